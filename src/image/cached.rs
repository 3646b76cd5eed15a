//! The Debian recipe's cached root filesystem tarball (`<cache>/rootfs-*.tar`) is loaded only
//! as it was written: `container/rootfs.sh` records its SHA-256 in `<tarball>.sha256` as it
//! packs it, and the bridge opens both without following links, requires each to be a regular
//! file of this user that no one else can write, and compares the record with the hash of the
//! very descriptor it then loads ([`super::archive::from_cached`]), so a file swapped or edited
//! in between is never loaded. A missing or unreadable record counts as a mismatch.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::checked_dir::own_file::{self, FileError, Keep};

/// The record's name is the tarball's with this added.
pub const RECORD_SUFFIX: &str = ".sha256";
/// The most of a record read (64 hex digits and a newline, with room for a file name).
const MAX_RECORD: u64 = 256;

/// The record of `tarball`'s SHA-256.
pub fn record_path(tarball: &Path) -> PathBuf {
    let mut name = tarball.as_os_str().to_owned();
    name.push(RECORD_SUFFIX);
    PathBuf::from(name)
}

/// Opens `path` for reading without following a link, and checks on the descriptor that it is
/// a regular file of this user that no one else can write.
///
/// # Errors
/// The I/O error (`PermissionDenied` with the reason for a file that fails the check).
pub fn open_owned(path: &Path) -> std::io::Result<File> {
    own_file::open(path, libc::O_RDONLY, Keep::Own).map_err(FileError::into_io)
}

/// The SHA-256 (64 lower-case hex digits) recorded for `tarball`.
///
/// # Errors
/// Why there is no usable record: missing, not this user's, or not a hash.
pub fn recorded(tarball: &Path) -> Result<String, String> {
    let record = record_path(tarball);
    let mut text = String::new();
    open_owned(&record)
        .and_then(|f| f.take(MAX_RECORD).read_to_string(&mut text))
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "it has no hash record".to_string(),
            _ => format!("its hash record cannot be used: {e}"),
        })?;
    let digest = text.split_whitespace().next().unwrap_or("");
    if digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(digest.to_ascii_lowercase())
    } else {
        Err("its hash record holds no SHA-256".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn records_and_tarballs_must_be_plain_files_of_ours_that_no_one_else_writes() {
        let d = tempfile::tempdir().expect("tempdir");
        let tar = d.path().join("rootfs-x.tar");
        std::fs::write(&tar, "t").expect("write");
        assert!(recorded(&tar).expect_err("none").contains("no hash record"));
        std::fs::write(record_path(&tar), "nonsense\n").expect("write");
        assert!(recorded(&tar).expect_err("bad").contains("no SHA-256"));
        let sum = "ab".repeat(32);
        std::fs::write(record_path(&tar), format!("{sum}  -\n")).expect("write");
        assert_eq!(recorded(&tar).expect("record"), sum);
        std::fs::set_permissions(record_path(&tar), std::fs::Permissions::from_mode(0o666))
            .expect("chmod");
        assert!(recorded(&tar)
            .expect_err("shared")
            .contains("others can write"));

        let link = d.path().join("link.tar");
        std::os::unix::fs::symlink(&tar, &link).expect("symlink");
        let err = open_owned(&link).expect_err("a link");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(open_owned(d.path()).is_err(), "a folder");
        open_owned(&tar).expect("our own file");
        // SAFETY: chown of a file this test made.
        let c = CString::new(tar.as_os_str().as_bytes()).expect("path");
        if unsafe { libc::geteuid() } == 0 && unsafe { libc::chown(c.as_ptr(), 65534, 65534) } == 0
        {
            let err = open_owned(&tar).expect_err("another user's");
            assert!(err.to_string().contains("uid 65534"), "{err}");
        }
    }
}
