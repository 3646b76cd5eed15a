//! The private runtime folder a bridge uses (its podman service's socket, the frame channels'
//! sockets), chosen once at startup.
//!
//! Its name is per user (`mcp-code-bridge-<uid>` in `$XDG_RUNTIME_DIR`, else in the temp
//! folder), and in a shared `/tmp` any local user can make that name first. Refusing to start
//! then would let one user deny every other the bridge; so a name another user holds (their
//! folder, their link) is passed over for a fresh folder beside it with a random name
//! (`mcp-code-bridge-<uid>-<12 random characters>`, 0700). Its path is recorded in the state
//! folder (`runtime-folder`, 0600), where only this user can write, so this user's other
//! bridges find and share it. Choosing, making and recording happen under a lock in the state
//! folder (`runtime-folder.lock`); making one is said once, as a warning.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::checked_dir::{Access, CheckedDir, DirError, FIX_RUNTIME};
use crate::shown::ShownPath;

/// The record of the folder in use, in the state folder.
pub const RECORD: &str = "runtime-folder";
/// The lock held while a folder is chosen, made and recorded.
const LOCK: &str = "runtime-folder.lock";
/// Random characters in a fallback folder's name.
const RANDOM_CHARS: usize = 12;
/// The largest record read (a path; anything longer is no record of ours).
const MAX_RECORD: u64 = 4096;
/// How long to wait for another bridge of this user choosing at the same time.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The runtime folder to use: `named` (the per-user name) when it is this user's, else the
/// recorded fallback folder, else a new one (made, recorded and announced).
///
/// # Errors
/// [`DirError`] when `named` is refused for another reason than another user holding it (a
/// folder of this user open to others, an unsafe folder on the way), or the fallback folder
/// cannot be made, checked or recorded.
pub fn choose(named: &Path, state: &CheckedDir) -> Result<PathBuf, DirError> {
    let held = match CheckedDir::open(named, Access::Private, FIX_RUNTIME) {
        Ok(_) => return Ok(named.to_path_buf()),
        Err(err) if held_by_another(&err, named) => err,
        Err(err) => return Err(err),
    };
    let (Some(base), Some(name)) = (named.parent(), named.file_name()) else {
        return Err(held);
    };
    let mut prefix = name.to_os_string();
    prefix.push("-");
    let _lock = Lock::take(state)?;
    if let Some(recorded) = read_record(state, base, &prefix) {
        match CheckedDir::open(&recorded, Access::Private, FIX_RUNTIME) {
            Ok(_) => {
                tracing::debug!(folder = %ShownPath(&recorded), "using the recorded runtime folder");
                return Ok(recorded);
            }
            Err(err) => {
                tracing::debug!(cause = %err, "the recorded runtime folder is refused; making another")
            }
        }
    }
    let fresh = tempfile::Builder::new()
        .prefix(&prefix)
        .rand_bytes(RANDOM_CHARS)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(base)
        .map_err(|err| DirError::io("making a private folder in", base, err))?
        .keep();
    CheckedDir::open(&fresh, Access::Private, FIX_RUNTIME)?;
    write_record(state, &fresh)?;
    tracing::warn!(
        "{held}. Using the private folder {} instead (recorded in {} for this user's other \
         bridges)",
        ShownPath(&fresh),
        ShownPath(&state.join(RECORD))
    );
    Ok(fresh)
}

/// True when `err` says another user holds the name: their folder, or anything of theirs in
/// its place (a link is never followed there).
fn held_by_another(err: &DirError, named: &Path) -> bool {
    match err {
        DirError::NotOwned { .. } => true,
        DirError::NotAFolder { .. } => named
            .symlink_metadata()
            .is_ok_and(|m| m.uid() != crate::checked_dir::euid()),
        _ => false,
    }
}

/// The recorded folder, when the record is this user's and names a fallback folder beside
/// the per-user name (`base/<prefix><random>`); anything else is ignored.
fn read_record(state: &CheckedDir, base: &Path, prefix: &OsStr) -> Option<PathBuf> {
    let file = match state.open_file(RECORD, libc::O_RDONLY, 0) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
        Err(err) => {
            tracing::debug!(cause = %err, "the runtime folder's record is not read");
            return None;
        }
    };
    let mut text = Vec::new();
    file.take(MAX_RECORD).read_to_end(&mut text).ok()?;
    let path = PathBuf::from(OsStr::from_bytes(text.strip_suffix(b"\n")?));
    let name = path.file_name()?.as_bytes();
    let random = name.strip_prefix(prefix.as_bytes())?;
    let shaped = random.len() == RANDOM_CHARS && random.iter().all(u8::is_ascii_alphanumeric);
    if !shaped || path.parent() != Some(base) {
        tracing::debug!(record = %ShownPath(&path), "the runtime folder's record names no fallback folder here; ignored");
        return None;
    }
    Some(path)
}

/// Records `folder` in the state folder (written whole, then renamed over the record).
fn write_record(state: &CheckedDir, folder: &Path) -> Result<(), DirError> {
    let record = state.join(RECORD);
    let failed = |err| DirError::io("recording the runtime folder in", &record, err);
    let mut new = state.new_file(RECORD).map_err(failed)?;
    let mut text = folder.as_os_str().as_bytes().to_vec();
    text.push(b'\n');
    new.file().write_all(&text).map_err(failed)?;
    new.commit(0o600).map_err(|e| failed(e.into_io()))
}

/// The lock in the state folder (`flock`), released when dropped.
struct Lock {
    _held: File,
}

impl Lock {
    /// Takes the lock, waiting up to [`LOCK_WAIT`] for another bridge of this user.
    fn take(state: &CheckedDir) -> Result<Lock, DirError> {
        let path = state.join(LOCK);
        let file = state
            .open_file(LOCK, libc::O_RDWR | libc::O_CREAT, 0o600)
            .map_err(|err| DirError::io("opening", &path, err))?;
        let began = std::time::Instant::now();
        loop {
            // SAFETY: flock(2) on a descriptor this function owns; no memory is passed.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Lock { _held: file });
            }
            let err = io::Error::last_os_error();
            let busy =
                err.kind() == io::ErrorKind::WouldBlock || err.kind() == io::ErrorKind::Interrupted;
            if !busy || began.elapsed() > LOCK_WAIT {
                return Err(DirError::io("locking", &path, err));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    //! Another user is uid 65534 (`chown` needs root, as the tests run in CI).

    use super::*;
    use crate::checked_dir::FIX_STATE;

    const OTHER: u32 = 65534;

    fn root() -> bool {
        if crate::checked_dir::euid() == 0 {
            return true;
        }
        eprintln!("skipped: chown to another uid needs root (CI runs these tests as root)");
        false
    }

    fn mode_of(path: &Path) -> (u32, u32) {
        let m = std::fs::symlink_metadata(path).expect("stat");
        (m.uid(), m.mode() & 0o7777)
    }

    struct Place {
        _tmp: tempfile::TempDir,
        base: PathBuf,
        named: PathBuf,
        state: CheckedDir,
    }

    /// A shared temp folder (1777) and a state folder of this user.
    fn place() -> Place {
        let tmp = tempfile::tempdir().expect("tempdir");
        let base = tmp.path().join("tmp");
        std::fs::create_dir(&base).expect("mkdir");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        let named = base.join("mcp-code-bridge-0");
        let state =
            CheckedDir::open(&tmp.path().join("state"), Access::Shared, FIX_STATE).expect("state");
        Place {
            _tmp: tmp,
            base,
            named,
            state,
        }
    }

    #[test]
    fn the_per_user_name_is_used_when_it_is_this_users() {
        let p = place();
        assert_eq!(choose(&p.named, &p.state).expect("chosen"), p.named);
        assert_eq!(mode_of(&p.named).1, 0o700);
        assert!(!p.state.join(RECORD).exists(), "nothing recorded");
    }

    #[test]
    fn a_name_another_user_holds_gives_a_random_private_folder_recorded_and_shared() {
        if !root() {
            return;
        }
        let p = place();
        std::fs::create_dir(&p.named).expect("mkdir");
        std::os::unix::fs::chown(&p.named, Some(OTHER), Some(OTHER)).expect("chown");
        std::fs::set_permissions(&p.named, std::fs::Permissions::from_mode(0o777)).expect("chmod");

        let first = choose(&p.named, &p.state).expect("a fallback");
        assert_ne!(first, p.named);
        assert_eq!(first.parent(), Some(p.base.as_path()));
        let name = first.file_name().expect("name").to_str().expect("utf-8");
        let random = name.strip_prefix("mcp-code-bridge-0-").expect("prefix");
        assert_eq!(random.len(), RANDOM_CHARS, "{name}");
        assert_eq!(mode_of(&first), (0, 0o700));
        let record = std::fs::read_to_string(p.state.join(RECORD)).expect("recorded");
        assert_eq!(record, format!("{}\n", first.display()));
        assert_eq!(mode_of(&p.state.join(RECORD)), (0, 0o600));
        assert_eq!(mode_of(&p.named), (OTHER, 0o777), "theirs is left alone");

        // The next bridge of this user finds and shares it.
        assert_eq!(choose(&p.named, &p.state).expect("again"), first);

        // Taken over too (after a reboot emptied the temp folder, say): another one.
        std::fs::remove_dir(&first).expect("rmdir");
        std::fs::create_dir(&first).expect("mkdir");
        std::os::unix::fs::chown(&first, Some(OTHER), Some(OTHER)).expect("chown");
        let second = choose(&p.named, &p.state).expect("another fallback");
        assert_ne!(second, first);
        assert_eq!(mode_of(&second), (0, 0o700));
        assert_eq!(choose(&p.named, &p.state).expect("again"), second);

        // A link of theirs in place of the name is passed over the same way.
        std::fs::remove_dir(&p.named).expect("rmdir");
        std::os::unix::fs::symlink("/", &p.named).expect("symlink");
        std::os::unix::fs::lchown(&p.named, Some(OTHER), Some(OTHER)).expect("lchown");
        assert_eq!(choose(&p.named, &p.state).expect("past the link"), second);
    }

    #[test]
    fn a_record_naming_anything_else_is_ignored() {
        if !root() {
            return;
        }
        let p = place();
        std::fs::create_dir(&p.named).expect("mkdir");
        std::os::unix::fs::chown(&p.named, Some(OTHER), Some(OTHER)).expect("chown");
        let elsewhere = p.base.join("elsewhere");
        for planted in [
            format!("{}\n", elsewhere.display()),
            format!("{}-0123456789ab/x\n", p.named.display()),
            format!("{}-0123456789ab", p.named.display()),
        ] {
            std::fs::write(p.state.join(RECORD), &planted).expect("write");
            let chosen = choose(&p.named, &p.state).expect("a fallback");
            assert!(!elsewhere.exists() && chosen.parent() == Some(p.base.as_path()));
            assert_ne!(
                std::fs::read_to_string(p.state.join(RECORD)).expect("read"),
                planted
            );
        }
    }

    #[test]
    fn a_folder_of_this_user_open_to_others_is_refused_not_passed_over() {
        let p = place();
        std::fs::create_dir(&p.named).expect("mkdir");
        std::fs::set_permissions(&p.named, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = choose(&p.named, &p.state).expect_err("refused");
        assert!(matches!(err, DirError::OpenToOthers { .. }), "{err:?}");
    }
}
