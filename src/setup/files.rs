//! Writing: a backup of each file before it changes, the change itself atomically (a temporary
//! file in the same folder, the original's permissions, synced, then renamed over it), and new
//! files that never replace an existing one.

use std::fs::{OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::error::SetupError;

/// Permissions of files `setup` creates: they may hold secrets.
const NEW_FILE_MODE: u32 = 0o600;

/// Copies `path`'s `bytes` to `<path>.bak-<stamp>` (then `-2`, `-3`, ... when taken) with the
/// same permissions; returns the backup's path.
///
/// # Errors
/// [`SetupError::Write`] when no backup could be written.
pub fn backup(path: &Path, bytes: &[u8], stamp: &str) -> Result<PathBuf, SetupError> {
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(NEW_FILE_MODE);
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".bak-{stamp}"));
    let first = PathBuf::from(name);
    for n in 1..1000 {
        let candidate = match n {
            1 => first.clone(),
            n => PathBuf::from(format!("{}-{n}", first.display())),
        };
        match write_new(&candidate, bytes, mode) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => {
                return Err(SetupError::Write {
                    path: candidate,
                    source,
                })
            }
        }
    }
    Err(SetupError::Write {
        path: first,
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "a thousand backups with this time exist",
        ),
    })
}

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
    let mode = std::fs::metadata(&target)
        .map_err(failed)?
        .permissions()
        .mode()
        & 0o7777;
    let dir = target.parent().unwrap_or(Path::new("/"));
    let mut tmp = tempfile::Builder::new()
        .prefix(".mcp-code-bridge-setup-")
        .tempfile_in(dir)
        .map_err(failed)?;
    tmp.as_file()
        .set_permissions(Permissions::from_mode(mode))
        .map_err(failed)?;
    tmp.write_all(text.as_bytes()).map_err(failed)?;
    tmp.as_file().sync_all().map_err(failed)?;
    tmp.persist(&target).map_err(|e| failed(e.error))?;
    Ok(())
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
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(failed)?;
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".mcp-code-bridge-setup-")
        .tempfile_in(dir)
        .map_err(failed)?;
    tmp.as_file()
        .set_permissions(Permissions::from_mode(NEW_FILE_MODE))
        .map_err(failed)?;
    tmp.write_all(text.as_bytes()).map_err(failed)?;
    tmp.as_file().sync_all().map_err(failed)?;
    tmp.persist_noclobber(path).map_err(|e| failed(e.error))?;
    Ok(())
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    // The mode given to open is cut by the umask: set it exactly.
    f.set_permissions(Permissions::from_mode(mode))?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backups_never_overwrite_and_keep_permissions() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("mcp.json");
        std::fs::write(&f, "old").expect("write");
        std::fs::set_permissions(&f, Permissions::from_mode(0o640)).expect("chmod");
        let a = backup(&f, b"old", "20260101T000000Z").expect("backup");
        let b = backup(&f, b"old", "20260101T000000Z").expect("backup");
        assert_eq!(a, d.path().join("mcp.json.bak-20260101T000000Z"));
        assert_eq!(b, d.path().join("mcp.json.bak-20260101T000000Z-2"));
        for p in [&a, &b] {
            assert_eq!(std::fs::read(p).expect("read"), b"old");
            let mode = std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o640);
        }
    }

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
