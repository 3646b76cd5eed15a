//! The chain's marks, kept beside the key in the private state folder
//! (`STATE/audit/head-<16 hex of the log path's SHA-256>`, `0600`), where whoever can write
//! only the log cannot change them:
//! - the head, the MAC of the last line written, so that lines cut from the log's newest end
//!   show: the writer, finding the log's last MAC is not the head, chains its line to the head
//!   (the gap is then a broken link), and `audit --verify` fails when the head is not among the
//!   log's lines;
//! - the floor, the MAC the oldest kept file's first chained line must name (zeros while the
//!   chain's first file is kept; the last MAC of the file a rotation dropped after that), so
//!   that a whole file removed from the log's oldest end does not pass for a rotation.
//!
//! Two lines of 65 bytes written in place (the head at offset 0, the floor at 65) under the
//! log's lock; a floor not known (the file a rotation dropped could not be read, or the marks
//! predate it) is 64 `-` and checks nothing.

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

/// Byte offset of the floor in the marks file.
const FLOOR_AT: u64 = 65;

/// What the marks file holds, as `audit --verify` reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// The last MAC written; `None` when none was.
    pub last: Option<Mac>,
    /// The MAC the oldest kept file's first chained line names; `None` when not known.
    pub floor: Option<Mac>,
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

    /// The floor; `None` when not known.
    pub fn floor(&self) -> Option<Mac> {
        read_at(&self.file, FLOOR_AT)
    }

    /// Records `floor` (`None`: not known) as what the oldest kept file follows.
    ///
    /// # Errors
    /// As `pwrite(2)`.
    pub fn set_floor(&self, floor: Option<Mac>) -> io::Result<()> {
        let text = match floor {
            Some(mac) => format!("{}\n", hex(&mac)),
            None => format!("{}\n", "-".repeat(64)),
        };
        self.file.write_all_at(text.as_bytes(), FLOOR_AT)
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
    read_at(file, 0)
}

fn read_at(file: &File, at: u64) -> Option<Mac> {
    let mut buf = [0u8; 64];
    file.read_exact_at(&mut buf, at).ok()?;
    from_hex(&buf)
}

/// The marks of the log at `log` in `state_dir`, for `audit --verify`; none when there are
/// none (no line written to a log at this path with this state folder).
///
/// # Errors
/// [`KeyError`] when the folder is unsafe, or the file is there but cannot be read.
pub fn load(state_dir: &Path, log: &Path) -> Result<Marks, KeyError> {
    let dir = folder(state_dir)?;
    let name = name(log);
    match dir.open_file(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
        Ok(file) => Ok(Marks {
            last: read_from(&file),
            floor: read_at(&file, FLOOR_AT),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Marks::default()),
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
        assert_eq!(load(tmp.path(), &a).expect("none yet"), Marks::default());
        let head = Head::open(tmp.path(), &a).expect("open");
        assert_eq!((head.read(), head.floor()), (None, None));
        head.write(&[1; 32]).expect("write");
        head.write(&[2; 32]).expect("write");
        assert_eq!((head.read(), head.floor()), (Some([2; 32]), None));
        head.set_floor(Some([7; 32])).expect("floor");
        head.write(&[3; 32]).expect("write");
        let marks = Marks {
            last: Some([3; 32]),
            floor: Some([7; 32]),
        };
        assert_eq!(load(tmp.path(), &a).expect("read"), marks);
        head.set_floor(None).expect("floor not known");
        assert_eq!((head.read(), head.floor()), (Some([3; 32]), None));
        assert_eq!(
            load(tmp.path(), &tmp.path().join("b.log")).expect("read"),
            Marks::default()
        );
    }
}
