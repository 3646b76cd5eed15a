//! The chain's head: the MAC of the last line written to one log, kept beside the key in the
//! private state folder (`STATE/audit/head-<16 hex of the log path's SHA-256>`, `0600`), so
//! that lines cut from the log's newest end show: the writer, finding the log's last MAC is
//! not the head, chains its line to the head (the gap is then a broken link), and
//! `audit --verify` fails when the head is not among the log's lines. Written in place (65
//! bytes at offset 0) under the log's lock after each line.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::key::{folder, KeyError};
use super::mac::{from_hex, hex, Mac};

/// The head file's name for the log at `log` (made absolute).
pub fn name(log: &Path) -> String {
    let abs = std::path::absolute(log).unwrap_or_else(|_| log.to_path_buf());
    let digest = crate::ids::sha256_hex(abs.as_os_str().as_encoded_bytes());
    format!("head-{}", &digest[..16])
}

/// One log's head file, open for reading and writing.
pub struct Head {
    file: File,
}

impl Head {
    /// The head of the log at `log` in `state_dir`, made (empty) when missing.
    ///
    /// # Errors
    /// [`KeyError`] when the folder is unsafe or the file cannot be opened.
    pub fn open(state_dir: &Path, log: &Path) -> Result<Head, KeyError> {
        let dir = folder(state_dir)?;
        let name = name(log);
        let file = dir
            .open_file(&name, libc::O_RDWR | libc::O_CREAT, 0o600)
            .map_err(|source| KeyError::Io {
                path: dir.join(&name),
                what: "opening the chain's head",
                source,
            })?;
        Ok(Head { file })
    }

    /// The last MAC written; `None` when none was (or the file is damaged).
    pub fn read(&self) -> Option<Mac> {
        read_from(&self.file)
    }

    /// Flushes the head to disk (`fdatasync`).
    ///
    /// # Errors
    /// As `fdatasync(2)`.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Records `mac` as the last MAC written.
    ///
    /// # Errors
    /// As `pwrite(2)`.
    pub fn write(&self, mac: &Mac) -> io::Result<()> {
        let text = format!("{}\n", hex(mac));
        self.file.write_all_at(text.as_bytes(), 0)
    }
}

fn read_from(file: &File) -> Option<Mac> {
    let mut buf = [0u8; 64];
    file.read_exact_at(&mut buf, 0).ok()?;
    from_hex(&buf)
}

/// The head of the log at `log` in `state_dir`, for `audit --verify`; `None` when there is
/// none (no line written to a log at this path with this state folder).
///
/// # Errors
/// [`KeyError`] when the folder is unsafe, or the file is there but cannot be read.
pub fn load(state_dir: &Path, log: &Path) -> Result<Option<Mac>, KeyError> {
    let dir = folder(state_dir)?;
    let name = name(log);
    match dir.open_file(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
        Ok(file) => Ok(read_from(&file)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(KeyError::Io {
            path: dir.join(&name),
            what: "reading the chain's head",
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_per_log_path_written_in_place_and_read_back() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = tmp.path().join("a.log");
        assert_ne!(name(&a), name(&tmp.path().join("b.log")));
        assert!(load(tmp.path(), &a).expect("none yet").is_none());
        let head = Head::open(tmp.path(), &a).expect("open");
        assert_eq!(head.read(), None);
        head.write(&[1; 32]).expect("write");
        head.write(&[2; 32]).expect("write");
        assert_eq!(head.read(), Some([2; 32]));
        assert_eq!(load(tmp.path(), &a).expect("read"), Some([2; 32]));
        assert!(load(tmp.path(), &tmp.path().join("b.log"))
            .expect("read")
            .is_none());
    }
}
