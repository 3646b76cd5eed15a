//! Backups: before a file changes, a copy next to it, `<file>.bak-<YYYYMMDDTHHMMSSZ>` (then
//! `-2`, `-3`, ... when taken), created new (never through a link, never over a file) with the
//! original's owner, group and permissions; and afterwards only the newest
//! `MCP_BRIDGE_SETUP_BACKUPS` of them are kept. Pruning touches only names of exactly that form
//! for exactly that file, oldest first.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::SetupError;
use super::files::keep_owner_and_mode;
use crate::checked_dir::new_file::{Folder, NewFile, WriteError};

/// How many names with one time stamp are tried before giving up.
const MAX_SAME_STAMP: u32 = 1000;

/// Copies `path`'s `bytes` to a new backup next to it with `path`'s owner, group and
/// permissions; returns the backup's path.
///
/// # Errors
/// [`SetupError::Write`] when no backup could be written (also when the owner cannot be kept).
pub fn backup(path: &Path, bytes: &[u8], stamp: &str) -> Result<PathBuf, SetupError> {
    let meta = std::fs::metadata(path).map_err(|source| SetupError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".bak-{stamp}"));
    let first = PathBuf::from(name);
    for n in 1..=MAX_SAME_STAMP {
        let candidate = match n {
            1 => first.clone(),
            n => PathBuf::from(format!("{}-{n}", first.display())),
        };
        match write_new(&candidate, bytes, &meta) {
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

/// Writes `bytes` to the new file `path` (never over a name that exists, never through a
/// link) with `like`'s owner, group and permissions; a copy that is not faithful is not left.
fn write_new(path: &Path, bytes: &[u8], like: &std::fs::Metadata) -> std::io::Result<()> {
    let mut new = NewFile::create(path, Folder::AsNamed).map_err(WriteError::into_io)?;
    keep_owner_and_mode(new.file(), Some((like.uid(), like.gid())), like.mode())?;
    new.file().write_all(bytes)?;
    new.commit_new(like.mode() & 0o7777)
        .map_err(WriteError::into_io)
}

/// Removes the oldest backups of `path` until `keep` remain; returns the ones removed.
///
/// # Errors
/// [`SetupError::Write`] when the folder cannot be listed or a backup cannot be removed.
pub fn prune(path: &Path, keep: usize) -> Result<Vec<PathBuf>, SetupError> {
    let failed = |path: &Path, source| SetupError::Write {
        path: path.to_path_buf(),
        source,
    };
    let (Some(dir), Some(file)) = (path.parent(), path.file_name()) else {
        return Ok(Vec::new());
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut ours = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| failed(dir, e))? {
        let entry = entry.map_err(|e| failed(dir, e))?;
        if let Some(order) = backup_order(file, &entry.file_name()) {
            ours.push((order, entry.path()));
        }
    }
    ours.sort();
    let excess = ours.len().saturating_sub(keep);
    let mut removed = Vec::new();
    for (_, old) in ours.into_iter().take(excess) {
        std::fs::remove_file(&old).map_err(|e| failed(&old, e))?;
        removed.push(old);
    }
    Ok(removed)
}

/// When `name` is a backup of `file` (`FILE.bak-YYYYMMDDTHHMMSSZ` or `...Z-N`), its place in
/// time: the stamp, then N (1 for none).
fn backup_order(file: &OsStr, name: &OsStr) -> Option<(String, u32)> {
    let rest = name.as_bytes().strip_prefix(file.as_bytes())?;
    let rest = std::str::from_utf8(rest.strip_prefix(b".bak-")?).ok()?;
    let (stamp, n) = match rest.split_once('-') {
        Some((stamp, n)) => {
            let ok = !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit());
            (stamp, if ok { n.parse().ok()? } else { return None })
        }
        None => (rest, 1),
    };
    let b = stamp.as_bytes();
    let shape = b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit);
    shape.then(|| (stamp.to_string(), n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn backups_never_overwrite_and_keep_permissions() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("mcp.json");
        std::fs::write(&f, "old").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).expect("chmod");
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
    fn only_this_files_own_backups_are_pruned_oldest_first() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("mcp.json");
        let names = [
            "mcp.json.bak-20250101T000000Z",
            "mcp.json.bak-20250101T000000Z-2",
            "mcp.json.bak-20250101T000000Z-10",
            "mcp.json.bak-20260101T000000Z",
            // Not ours: another file's, another shape, a user's own copy.
            "mcp.json.bak-2025",
            "mcp.json.bak-20240101T000000Z-02",
            "mcp.json.bak-20240101T000000Z.orig",
            "xmcp.json.bak-20200101T000000Z",
            "other.json.bak-20200101T000000Z",
        ];
        for n in names {
            std::fs::write(d.path().join(n), n).expect("write");
        }
        let removed = prune(&f, 2).expect("prune");
        let removed: Vec<_> = removed
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            removed,
            [
                "mcp.json.bak-20250101T000000Z",
                "mcp.json.bak-20250101T000000Z-2"
            ]
        );
        for n in &names[2..] {
            assert!(d.path().join(n).exists(), "{n} was removed");
        }
        assert!(prune(&f, 2).expect("again").is_empty());
    }
}
