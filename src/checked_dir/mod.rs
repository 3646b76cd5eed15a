//! [`CheckedDir`]: a folder the bridge keeps things in (its private runtime folder, the state
//! folder and what lives in it, the image cache), opened or made so that no other local user
//! can read or swap what the bridge puts there.
//!
//! Without `XDG_RUNTIME_DIR` the private folder is `$TMPDIR/mcp-code-bridge-<uid>`, a name
//! anyone can make first in a shared `/tmp`. So a folder is never trusted by its path: it is
//! reached by a walk of `*at` calls from `/` (`walk.rs`: missing folders made 0700, symbolic
//! links on the way followed only where no other user could have made them, the last name never
//! a link), opened with `O_DIRECTORY | O_NOFOLLOW`, and its owner and mode are read from the open
//! descriptor (`fstat`), not the path: it must belong to the bridge's effective uid and must not
//! be writable by anyone else; a [`Access::Private`] folder is not open to others at all (read
//! and search bits of others are taken away, and a failing `fchmod` is an error). A folder that
//! fails is refused with a [`DirError`] naming it, its owner and mode, and the fix. Files and
//! folders inside are then made relative to the checked descriptor, exclusively and without
//! following links. Leaf: depends only on `shown`.

mod error;
pub mod new_file;
pub mod own_file;
pub mod private_file;
mod sys;
mod walk;

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use error::DirError;

/// The bridge's effective uid: the owner its folders must have.
pub fn euid() -> u32 {
    sys::euid()
}

/// The fix for a refused private runtime folder.
pub const FIX_RUNTIME: &str =
    "set XDG_RUNTIME_DIR (or TMPDIR) to a folder that only you can write to";
/// The fix for a refused state folder (or a folder in it).
pub const FIX_STATE: &str = "set MCP_BRIDGE_STATE_DIR to a folder that only you can write to";
/// The fix for a refused image cache folder.
pub const FIX_CACHE: &str = "set XDG_CACHE_HOME to a folder that only you can write to";

/// What others may do in a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Nothing: mode 0700 (read and search bits of others are removed when found).
    Private,
    /// Read and search, never write (an existing 0755 folder is kept as it is).
    Shared,
}

/// An open folder that passed the checks; its path may be used for what must be named by
/// path (a socket to bind, a folder to mount), since no other user can change it.
#[derive(Debug)]
pub struct CheckedDir {
    dir: File,
    path: PathBuf,
}

impl CheckedDir {
    /// Opens `path`, making it and the missing folders above it (0700), and checks it for
    /// `access`. `fix` says what the user can do instead (one of the `FIX_*`).
    ///
    /// # Errors
    /// [`DirError`] naming the folder (or the folder on the way) that failed.
    pub fn open(path: &Path, access: Access, fix: &'static str) -> Result<CheckedDir, DirError> {
        let me = sys::euid();
        let fd = walk::walk(path, me, fix)?;
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = File::from(fd);
        check(&dir, &path, access, me, fix)?;
        Ok(CheckedDir { dir, path })
    }

    /// The folder `name` inside this one, made (0700) when missing and checked for `access`.
    ///
    /// # Errors
    /// [`DirError`] when it cannot be made or opened, is a link or fails the check.
    pub fn sub(
        &self,
        name: &str,
        access: Access,
        fix: &'static str,
    ) -> Result<CheckedDir, DirError> {
        let path = self.join_checked(name)?;
        match sys::mkdir_at(self.dir.as_fd(), OsStr::new(name), 0o700) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(DirError::io("creating", &path, err)),
        }
        let dir = self.open_sub(name, &path, fix)?;
        check(&dir, &path, access, sys::euid(), fix)?;
        Ok(CheckedDir { dir, path })
    }

    /// A new folder `name` inside this one (it must not exist yet) with exactly `mode`
    /// (no group or other write bit allowed).
    ///
    /// # Errors
    /// [`DirError`] when it exists, cannot be made, or its mode cannot be set.
    pub fn fresh_sub(
        &self,
        name: &str,
        mode: u32,
        fix: &'static str,
    ) -> Result<CheckedDir, DirError> {
        assert_eq!(
            mode & 0o022,
            0,
            "a fresh folder is never writable by others"
        );
        let path = self.join_checked(name)?;
        sys::mkdir_at(self.dir.as_fd(), OsStr::new(name), 0o700)
            .map_err(|err| DirError::io("creating", &path, err))?;
        let dir = self.open_sub(name, &path, fix)?;
        check(&dir, &path, Access::Shared, sys::euid(), fix)?;
        dir.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|err| DirError::io("setting the mode of", &path, err))?;
        Ok(CheckedDir { dir, path })
    }

    /// A new file `name` in this folder, created exclusively (`O_CREAT | O_EXCL`, never through
    /// a link) for writing, with `mode` (less the umask).
    ///
    /// # Errors
    /// The name exists, or the file cannot be created.
    pub fn create_file(&self, name: &str, mode: u32) -> io::Result<File> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        sys::open_at(self.dir.as_fd(), OsStr::new(name), flags, mode).map(File::from)
    }

    /// A file written under a fresh name in this folder, then given `name` by
    /// [`new_file::NewFile::commit`] (replacing) or `commit_new` (only onto a free name).
    ///
    /// # Errors
    /// The name is not a single file name, or the file cannot be made.
    pub fn new_file(&self, name: &str) -> io::Result<new_file::NewFile> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let dir = self.dir.try_clone()?;
        new_file::NewFile::in_folder(dir, self.path.clone(), OsStr::new(name))
            .map_err(new_file::WriteError::into_io)
    }

    /// Opens the file `name` in this folder with `flags` (`O_RDONLY`, `O_RDWR | O_CREAT`, ...),
    /// never through a link, and only when it is a regular file of this user that nobody else
    /// may write (judged on the descriptor by [`own_file::check`], [`own_file::Keep::Own`]).
    ///
    /// # Errors
    /// The file cannot be opened (`ELOOP` for a link), or it is refused (`PermissionDenied`,
    /// naming the file and why).
    pub fn open_file(&self, name: &str, flags: libc::c_int, mode: u32) -> io::Result<File> {
        let fd = sys::open_at(self.dir.as_fd(), OsStr::new(name), flags, mode)?;
        own_file::check(fd.as_fd(), own_file::Keep::Own).map_err(|refused| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{}: {refused}",
                    crate::shown::ShownPath(&self.path.join(name))
                ),
            )
        })?;
        Ok(File::from(fd))
    }

    /// Removes the file `name` from this folder (a link is removed, not followed).
    ///
    /// # Errors
    /// As `unlinkat(2)`.
    pub fn remove_file(&self, name: &str) -> io::Result<()> {
        sys::unlink_at(self.dir.as_fd(), OsStr::new(name), 0)
    }

    /// Renames the file `from` in this folder to `to` (replacing it); a link is renamed, not
    /// followed.
    ///
    /// # Errors
    /// As `renameat(2)` (`NotFound` when `from` is missing).
    pub fn rename_file(&self, from: &str, to: &str) -> io::Result<()> {
        sys::rename_at(self.dir.as_fd(), OsStr::new(from), OsStr::new(to))
    }

    /// The folder's path (absolute).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this folder.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    fn join_checked(&self, name: &str) -> Result<PathBuf, DirError> {
        let path = self.path.join(name);
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            let err = io::Error::from(io::ErrorKind::InvalidInput);
            return Err(DirError::io(
                "a single folder name is needed for",
                &path,
                err,
            ));
        }
        Ok(path)
    }

    fn open_sub(&self, name: &str, path: &Path, fix: &'static str) -> Result<File, DirError> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY;
        match sys::open_at(self.dir.as_fd(), OsStr::new(name), flags, 0) {
            Ok(fd) => Ok(File::from(fd)),
            Err(err) => match sys::lstat_at(self.dir.as_fd(), OsStr::new(name)) {
                Ok(st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => Err(DirError::NotAFolder {
                    path: path.to_path_buf(),
                    kind: sys::kind(st.st_mode),
                    fix,
                }),
                _ => Err(DirError::io("opening", path, err)),
            },
        }
    }
}

/// The checks on the folder itself, made on its open descriptor.
fn check(
    dir: &File,
    path: &Path,
    access: Access,
    me: u32,
    fix: &'static str,
) -> Result<(), DirError> {
    let st = sys::fstat(dir.as_fd()).map_err(|err| DirError::io("checking", path, err))?;
    let (owner, mode) = (st.st_uid, st.st_mode & 0o7777);
    if owner != me {
        return Err(DirError::NotOwned {
            path: path.to_path_buf(),
            owner,
            mode,
            me,
            fix,
        });
    }
    if mode & 0o022 != 0 {
        return Err(DirError::OpenToOthers {
            path: path.to_path_buf(),
            owner,
            mode,
            what: "group or others may write in it",
            want: 0o700,
            fix,
        });
    }
    if access == Access::Private && mode & 0o077 != 0 {
        // Nobody else could write in it, so nothing in it is theirs: close it to them.
        dir.set_permissions(std::fs::Permissions::from_mode(mode & !0o077))
            .map_err(|err| DirError::io("removing others' access to", path, err))?;
        tracing::info!(folder = %crate::shown::ShownPath(path), "made a private folder 0700");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Folders another user made first, links in place of folders, modes open to others.

    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    use super::*;

    /// Another user's uid for `chown` (needs root, as the tests run in CI).
    const OTHER: u32 = 65534;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
    }

    /// A temp folder whose own path is safe to walk (0700 under a root-owned /tmp).
    fn base() -> tempfile::TempDir {
        tempfile::tempdir().expect("tempdir")
    }

    fn root() -> bool {
        if sys::euid() == 0 {
            return true;
        }
        eprintln!("skipped: chown to another uid needs root (CI runs these tests as root)");
        false
    }

    #[test]
    fn a_fresh_folder_is_made_private_and_accepted() {
        let b = base();
        let want = b.path().join("a/b/mcp-code-bridge-0");
        let dir = CheckedDir::open(&want, Access::Private, FIX_RUNTIME).expect("fresh folder");
        assert_eq!(dir.path(), want);
        assert_eq!(mode_of(&want), 0o700);
        assert_eq!(mode_of(&b.path().join("a")), 0o700);
        // Opening it again accepts it as it is.
        CheckedDir::open(&want, Access::Private, FIX_RUNTIME).expect("again");
    }

    #[test]
    fn a_folder_another_user_made_first_is_refused_with_owner_mode_and_fix() {
        if !root() {
            return;
        }
        let b = base();
        let planted = b.path().join("mcp-code-bridge-0");
        std::fs::create_dir(&planted).expect("mkdir");
        std::os::unix::fs::chown(&planted, Some(OTHER), Some(OTHER)).expect("chown");
        chmod(&planted, 0o777);
        let err = CheckedDir::open(&planted, Access::Private, FIX_RUNTIME).expect_err("refused");
        assert!(
            matches!(
                err,
                DirError::NotOwned {
                    owner: OTHER,
                    mode: 0o777,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        for part in [
            planted.to_str().expect("utf-8"),
            "uid 65534",
            "mode 0777",
            "XDG_RUNTIME_DIR",
        ] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
        // Nothing was changed in the other user's folder.
        assert_eq!(mode_of(&planted), 0o777);
        // The state folder is refused the same way.
        let err = CheckedDir::open(&planted, Access::Shared, FIX_STATE).expect_err("refused");
        assert!(err.to_string().contains("MCP_BRIDGE_STATE_DIR"), "{err}");
    }

    #[test]
    fn a_link_in_place_of_the_folder_is_refused_not_followed() {
        let b = base();
        let real = b.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        chmod(&real, 0o755);
        let link = b.path().join("mcp-code-bridge-0");
        symlink(&real, &link).expect("symlink");
        let err = CheckedDir::open(&link, Access::Private, FIX_RUNTIME).expect_err("refused");
        assert!(
            matches!(
                err,
                DirError::NotAFolder {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(mode_of(&real), 0o755, "the link's target was not touched");
        // A dangling link is not followed to create its target either.
        let dangling = b.path().join("dangling");
        symlink(b.path().join("elsewhere"), &dangling).expect("symlink");
        CheckedDir::open(&dangling, Access::Private, FIX_RUNTIME).expect_err("refused");
        assert!(!b.path().join("elsewhere").exists());
    }

    #[test]
    fn a_folder_open_to_others_is_refused_or_closed() {
        let b = base();
        let group_writable = b.path().join("gw");
        std::fs::create_dir(&group_writable).expect("mkdir");
        chmod(&group_writable, 0o770);
        let err =
            CheckedDir::open(&group_writable, Access::Shared, FIX_STATE).expect_err("refused");
        assert!(
            matches!(err, DirError::OpenToOthers { mode: 0o770, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("mode 0770"), "{err}");
        // Readable by others but writable by no one else: a private folder is closed to them,
        // a shared one kept as it is.
        let readable = b.path().join("r");
        std::fs::create_dir(&readable).expect("mkdir");
        chmod(&readable, 0o755);
        CheckedDir::open(&readable, Access::Shared, FIX_STATE).expect("shared");
        assert_eq!(mode_of(&readable), 0o755);
        CheckedDir::open(&readable, Access::Private, FIX_RUNTIME).expect("private");
        assert_eq!(mode_of(&readable), 0o700);
    }

    #[test]
    fn folders_on_the_way_must_be_unchangeable_by_others() {
        let b = base();
        let open = b.path().join("open");
        std::fs::create_dir(&open).expect("mkdir");
        chmod(&open, 0o777);
        let err =
            CheckedDir::open(&open.join("state"), Access::Shared, FIX_STATE).expect_err("refused");
        assert!(
            matches!(&err, DirError::UnsafeAncestor { path, mode: 0o777, .. } if *path == open),
            "{err:?}"
        );
        // With the sticky bit (as /tmp) others cannot rename what is ours: accepted.
        chmod(&open, 0o1777);
        CheckedDir::open(&open.join("state"), Access::Shared, FIX_STATE).expect("sticky");
        // A link on the way in a safe folder is followed.
        let via = b.path().join("via");
        symlink(&open, &via).expect("symlink");
        let dir =
            CheckedDir::open(&via.join("state"), Access::Shared, FIX_STATE).expect("via link");
        assert_eq!(dir.path(), via.join("state"));
    }

    #[test]
    fn a_link_on_the_way_owned_by_another_user_is_refused() {
        if !root() {
            return;
        }
        let b = base();
        let real = b.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        let link = b.path().join("link");
        symlink(&real, &link).expect("symlink");
        std::os::unix::fs::lchown(&link, Some(OTHER), Some(OTHER)).expect("lchown");
        let err =
            CheckedDir::open(&link.join("x"), Access::Shared, FIX_STATE).expect_err("refused");
        assert!(
            matches!(err, DirError::UnsafeAncestor { owner: OTHER, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn inside_a_checked_folder_nothing_is_followed_or_taken_over() {
        let b = base();
        let dir =
            CheckedDir::open(&b.path().join("state"), Access::Shared, FIX_STATE).expect("dir");
        let outside = b.path().join("outside");
        std::fs::write(&outside, "keep").expect("write");
        symlink(&outside, dir.join("consent.json")).expect("symlink");
        // A link where a file goes: neither created through nor opened.
        assert!(dir.create_file("consent.json", 0o600).is_err());
        assert!(dir.open_file("consent.json", libc::O_RDONLY, 0).is_err());
        assert_eq!(std::fs::read_to_string(&outside).expect("read"), "keep");
        // A link where a subfolder goes.
        symlink(b.path(), dir.join("outbox")).expect("symlink");
        let err = dir
            .sub("outbox", Access::Private, FIX_STATE)
            .expect_err("refused");
        assert!(matches!(err, DirError::NotAFolder { .. }), "{err:?}");
        // A fresh folder gets exactly the mode asked for; a second one of the name is refused.
        let ch = dir.fresh_sub("ch-1", 0o711, FIX_RUNTIME).expect("fresh");
        assert_eq!(mode_of(ch.path()), 0o711);
        assert!(dir.fresh_sub("ch-1", 0o711, FIX_RUNTIME).is_err());
        let mut f = ch.create_file("a", 0o600).expect("create");
        std::io::Write::write_all(&mut f, b"x").expect("write");
        assert_eq!(mode_of(&ch.join("a")), 0o600);
        ch.remove_file("a").expect("remove");
    }

    #[test]
    fn a_subfolder_another_user_owns_is_refused() {
        if !root() {
            return;
        }
        let b = base();
        let dir =
            CheckedDir::open(&b.path().join("state"), Access::Shared, FIX_STATE).expect("dir");
        let outbox = dir.join("outbox");
        std::fs::create_dir(&outbox).expect("mkdir");
        std::os::unix::fs::chown(&outbox, Some(OTHER), Some(OTHER)).expect("chown");
        let err = dir
            .sub("outbox", Access::Private, FIX_STATE)
            .expect_err("refused");
        assert!(
            matches!(err, DirError::NotOwned { owner: OTHER, .. }),
            "{err:?}"
        );
        // A file of another user is not opened either.
        let file = dir.join("consent.json");
        std::fs::write(&file, "{}").expect("write");
        std::os::unix::fs::chown(&file, Some(OTHER), Some(OTHER)).expect("chown");
        let err = dir
            .open_file("consent.json", libc::O_RDONLY, 0)
            .expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    }
}
