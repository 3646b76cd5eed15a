//! Writing: the change itself atomically (a temporary file in the same folder with the
//! original's owner, group and permissions, synced, then renamed over it), and new files that
//! never replace an existing one. Backups are `backups.rs`.

use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::{fchown, DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::error::SetupError;
use crate::checked_dir::new_file::{Folder, NewFile};

/// Permissions of files `setup` creates: they may hold secrets.
const NEW_FILE_MODE: u32 = 0o600;

/// Checks that `path` still holds `expected` (`None`: that it still does not exist), so that
/// what was shown is what is changed.
///
/// # Errors
/// [`SetupError::Changed`] when it does not; [`SetupError::Read`] when it cannot be read.
pub fn unchanged(path: &Path, expected: Option<&str>) -> Result<(), SetupError> {
    let now = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(SetupError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    if now.as_deref() == expected {
        Ok(())
    } else {
        Err(SetupError::Changed {
            path: path.to_path_buf(),
        })
    }
}

/// Replaces `path` with `text` when it still holds `expected` (`None`: creates it when it
/// still does not exist). A symbolic link keeps pointing where it did: its target is replaced.
///
/// # Errors
/// [`SetupError::Changed`] when the file is not as expected; [`SetupError::Write`] when the
/// write fails (the file is then as it was).
pub fn replace(path: &Path, expected: Option<&str>, text: &str) -> Result<(), SetupError> {
    unchanged(path, expected)?;
    if expected.is_none() {
        return create(path, text);
    }
    let target = std::fs::canonicalize(path).map_err(|source| SetupError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    let failed = |source| SetupError::Write {
        path: target.clone(),
        source,
    };
    let meta = std::fs::metadata(&target).map_err(failed)?;
    let mut new = NewFile::create(&target, Folder::AsNamed).map_err(|e| failed(e.into_io()))?;
    keep_owner_and_mode(new.file(), Some((meta.uid(), meta.gid())), meta.mode()).map_err(failed)?;
    new.file().write_all(text.as_bytes()).map_err(failed)?;
    new.commit(meta.mode() & 0o7777)
        .map_err(|e| failed(e.into_io()))
}

/// Creates `path` with `text` (mode 0600), atomically, never over an existing file; creates its
/// folder (mode 0700) when missing.
///
/// # Errors
/// [`SetupError::Write`], also when the file appeared meanwhile.
pub fn create(path: &Path, text: &str) -> Result<(), SetupError> {
    let failed = |source| SetupError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    let owner = make_dirs(dir).map_err(failed)?;
    let mut new = NewFile::create(path, Folder::AsNamed).map_err(|e| failed(e.into_io()))?;
    keep_owner_and_mode(new.file(), owner, NEW_FILE_MODE).map_err(failed)?;
    new.file().write_all(text.as_bytes()).map_err(failed)?;
    new.commit_new(NEW_FILE_MODE)
        .map_err(|e| failed(e.into_io()))
}

/// Gives the open file `f` the owner and group `owner` (when given and not already its own),
/// then the permission bits of `mode` exactly (a change of owner clears set-id bits; the umask
/// cut the mode given at creation).
///
/// # Errors
/// The I/O error, naming the owner it could not keep (a user who is not root cannot give a file
/// away): the file is then not used, never left with another owner.
pub fn keep_owner_and_mode(f: &File, owner: Option<(u32, u32)>, mode: u32) -> std::io::Result<()> {
    let now = f.metadata()?;
    if let Some((uid, gid)) = owner.filter(|o| *o != (now.uid(), now.gid())) {
        fchown(f, Some(uid), Some(gid)).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot keep its owner (uid {uid}, group {gid}): {e}"),
            )
        })?;
    }
    f.set_permissions(Permissions::from_mode(mode & 0o7777))
}

/// Creates the missing folders of `dir` (mode 0700). Run as root, they get the owner and group
/// of the nearest folder that exists (root writing into a user's home leaves the user's
/// folders), and so do the files made in `dir`: that owner is returned (`None` for a user).
fn make_dirs(dir: &Path) -> std::io::Result<Option<(u32, u32)>> {
    let mut missing = Vec::new();
    let mut at = dir;
    let base = loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => break m,
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "{} is not a folder",
                    at.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.push(at);
                at = at.parent().ok_or(e)?;
            }
            Err(e) => return Err(e),
        }
    };
    // SAFETY: geteuid has no preconditions.
    let owner = (unsafe { libc::geteuid() } == 0).then(|| (base.uid(), base.gid()));
    for d in missing.into_iter().rev() {
        std::fs::DirBuilder::new().mode(0o700).create(d)?;
        let made = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
            .open(d)?;
        keep_owner_and_mode(&made, owner, 0o700)?;
    }
    Ok(owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_keeps_mode_and_links_and_refuses_a_changed_file() {
        let d = tempfile::tempdir().expect("tempdir");
        let real = d.path().join("real.json");
        let link = d.path().join("link.json");
        std::fs::write(&real, "one").expect("write");
        std::fs::set_permissions(&real, Permissions::from_mode(0o600)).expect("chmod");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        replace(&link, Some("one"), "two").expect("replace");
        assert!(std::fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).expect("read"), "two");
        let mode = std::fs::metadata(&real).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(matches!(
            replace(&real, Some("one"), "three"),
            Err(SetupError::Changed { .. })
        ));
        assert_eq!(std::fs::read_to_string(&real).expect("read"), "two");
        let new = d.path().join("sub/new.json");
        replace(&new, None, "fresh").expect("create");
        assert!(matches!(
            create(&new, "again"),
            Err(SetupError::Write { .. })
        ));
        assert_eq!(std::fs::read_to_string(&new).expect("read"), "fresh");
        let left: Vec<_> = std::fs::read_dir(d.path())
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".mcp-code-bridge-setup-"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }
}
