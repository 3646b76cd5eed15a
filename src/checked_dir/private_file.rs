//! [`PrivateFile`]: a private file of ours in a checked folder that is changed under an advisory
//! lock: read whole (bounded, judged on its descriptor, never through a link), written aside and
//! renamed over (0600). The OAuth token store, the skills store and the pins keep their records
//! this way; each parses and judges the bytes itself, with [`parse_json`] and [`judge_records`]
//! saying where a file is damaged in the same words.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};

use super::own_file::{self, Keep};
use super::CheckedDir;

/// Why a private file could not be read or written.
#[derive(Debug)]
pub enum PrivateFileError {
    /// An I/O step failed: what was being done, and why.
    Io(&'static str, std::io::Error),
    /// The file is larger than the most it may hold.
    TooLarge(u64),
}

impl PrivateFileError {
    /// This failure as a store says it: an I/O step through `io`, an oversized file through
    /// `damaged` (the text a store's "damaged" error gives as where).
    pub fn said<E>(
        self,
        io: impl FnOnce(&'static str, std::io::Error) -> E,
        damaged: impl FnOnce(String) -> E,
    ) -> E {
        match self {
            PrivateFileError::Io(what, source) => io(what, source),
            PrivateFileError::TooLarge(max) => damaged(format!("larger than {max} bytes")),
        }
    }
}

/// `text` parsed as JSON into `T`; `Err` says where it is damaged by the parser's position
/// only (its message could quote a secret).
pub fn parse_json<T: serde::de::DeserializeOwned>(text: &[u8]) -> Result<T, String> {
    serde_json::from_slice(text).map_err(|e| format!("line {} column {}", e.line(), e.column()))
}

/// Judges a store's parsed records: its format `version` is `want`, and there are at most
/// `max` records, each `sound` (`noun` names one in the message); `Err` says where it is
/// damaged.
pub fn judge_records<R>(
    version: u32,
    want: u32,
    records: &[R],
    max: usize,
    noun: &str,
    sound: impl Fn(&R) -> bool,
) -> Result<(), String> {
    if version != want {
        return Err(format!("format {version}, not {want}"));
    }
    if records.len() > max {
        return Err(format!("more than {max} {noun}s"));
    }
    match records.iter().position(|r| !sound(r)) {
        Some(bad) => Err(format!(
            "{noun} {} has a bad name, count, digest or size",
            bad + 1
        )),
        None => Ok(()),
    }
}

/// One private file of a checked folder, with the lock file its changes hold.
pub struct PrivateFile<'a> {
    /// The folder.
    pub dir: &'a CheckedDir,
    /// The file's name in it.
    pub name: &'a str,
    /// The lock file's name in it.
    pub lock: &'a str,
    /// The most bytes the file may hold.
    pub max: u64,
}

impl<'a> PrivateFile<'a> {
    /// File `name` of `dir`, changed under lock file `lock`, at most `max` bytes.
    pub fn new(dir: &'a CheckedDir, name: &'a str, lock: &'a str, max: u64) -> Self {
        PrivateFile {
            dir,
            name,
            lock,
            max,
        }
    }

    /// Takes the lock (blocking until no other holder has it); held until the file is closed.
    ///
    /// # Errors
    /// The lock file cannot be opened or locked.
    pub fn lock(&self) -> Result<File, PrivateFileError> {
        let lock = self
            .dir
            .open_file(
                self.lock,
                libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                0o600,
            )
            .map_err(|e| PrivateFileError::Io("opening its lock", e))?;
        // SAFETY: flock on a descriptor this function owns; released when it is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(PrivateFileError::Io(
                "locking",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(lock)
    }

    /// The file's bytes; `None` when there is no file.
    ///
    /// # Errors
    /// It cannot be opened or read, is not a private file of ours, or is over [`Self::max`].
    pub fn read(&self) -> Result<Option<Vec<u8>>, PrivateFileError> {
        let mut file = match self
            .dir
            .open_file(self.name, libc::O_RDONLY | libc::O_CLOEXEC, 0)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(PrivateFileError::Io("opening", e)),
        };
        own_file::check(file.as_fd(), Keep::Private)
            .map_err(|e| PrivateFileError::Io("checking", e.into_io()))?;
        let mut text = Vec::new();
        (&mut file)
            .take(self.max + 1)
            .read_to_end(&mut text)
            .map_err(|e| PrivateFileError::Io("reading", e))?;
        if text.len() as u64 > self.max {
            return Err(PrivateFileError::TooLarge(self.max));
        }
        Ok(Some(text))
    }

    /// Replaces the file with `bytes`: written to a fresh file beside it, then renamed over.
    ///
    /// # Errors
    /// The new file cannot be made, written or renamed.
    pub fn write(&self, bytes: &[u8]) -> Result<(), PrivateFileError> {
        let mut new = self
            .dir
            .new_file(self.name)
            .map_err(|e| PrivateFileError::Io("creating a temporary file", e))?;
        new.file()
            .write_all(bytes)
            .map_err(|e| PrivateFileError::Io("writing", e))?;
        new.commit(0o600)
            .map_err(|e| PrivateFileError::Io("writing", e.into_io()))
    }

    /// Runs `change` on the file's bytes under the lock, writing back what it returns, when
    /// it returns something; errors of this file become the caller's through `err`.
    ///
    /// # Errors
    /// `change`'s, or the file's mapped by `err`.
    pub fn changed<R, E>(
        &self,
        err: impl Fn(PrivateFileError) -> E,
        change: impl FnOnce(Option<Vec<u8>>) -> Result<(Option<Vec<u8>>, R), E>,
    ) -> Result<R, E> {
        let _lock = self.lock().map_err(&err)?;
        let (new, out) = change(self.read().map_err(&err)?)?;
        if let Some(bytes) = new {
            self.write(&bytes).map_err(&err)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::super::{Access, FIX_STATE};
    use super::*;

    #[test]
    fn changed_under_the_lock_private_and_bounded() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = CheckedDir::open(tmp.path(), Access::Private, FIX_STATE).expect("dir");
        let f = PrivateFile {
            dir: &dir,
            name: "x.json",
            lock: "x.lock",
            max: 8,
        };
        assert!(f.read().expect("absent").is_none());
        let seen = f
            .changed(|e| format!("{e:?}"), |old| Ok((Some(b"[1]".to_vec()), old)))
            .expect("written");
        assert_eq!(seen, None);
        assert_eq!(f.read().expect("read"), Some(b"[1]".to_vec()));
        let mode = std::fs::metadata(tmp.path().join("x.json"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        f.write(b"0123456789").expect("written");
        assert!(matches!(f.read(), Err(PrivateFileError::TooLarge(8))));
        // A link in its place is never followed.
        std::fs::remove_file(tmp.path().join("x.json")).expect("rm");
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("x.json")).expect("link");
        assert!(matches!(f.read(), Err(PrivateFileError::Io(..))));
    }

    #[test]
    fn damage_is_said_by_position_and_record_never_by_content() {
        let err = parse_json::<serde_json::Value>(b"{\"secret-token\": ").expect_err("cut");
        assert!(
            err.starts_with("line 1 column") && !err.contains("secret"),
            "{err}"
        );
        let sound = |n: &u32| *n < 10;
        assert_eq!(judge_records(1, 1, &[1, 2], 2, "thing", sound), Ok(()));
        assert_eq!(
            judge_records(2, 1, &[1], 2, "thing", sound),
            Err("format 2, not 1".into())
        );
        assert_eq!(
            judge_records(1, 1, &[1, 2, 3], 2, "thing", sound),
            Err("more than 2 things".into())
        );
        assert_eq!(
            judge_records(1, 1, &[1, 20], 2, "thing", sound),
            Err("thing 2 has a bad name, count, digest or size".into())
        );
    }
}
