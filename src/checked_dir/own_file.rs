//! A file of ours opened by path: never through a link (`O_NOFOLLOW`), never waiting on a FIFO
//! (`O_NONBLOCK`), and judged on the descriptor it opened ([`check`]), so nothing can be
//! swapped in between the check and the use. The one routine every file the bridge trusts is
//! opened with: the tokens file, the audit log and its reader, the image cache, the snapshot.
//! (Config files the user or a client wrote may be links, as dotfile managers make them:
//! `config::read_text` follows those.)

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::sys;

/// What a file of ours must be, besides a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// This user's, and nobody else may read or write it (no group or other bits).
    Private,
    /// This user's, and nobody else may write it.
    Own,
    /// Any owner and mode: only not a link and a regular file (a file the user names to read).
    AnyOwner,
}

/// Why a file was refused.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be opened (`NotFound` among them).
    #[error("{0}")]
    Io(#[source] io::Error),
    /// The name is a symbolic link.
    #[error("it is a symbolic link")]
    Link,
    /// Not a regular file.
    #[error("it is a {0}, not a regular file")]
    NotRegular(&'static str),
    /// Another user's.
    #[error("it belongs to uid {uid}, not to this user (uid {me})")]
    NotOwn {
        /// Its owner.
        uid: u32,
        /// This user.
        me: u32,
    },
    /// Others may write it ([`Keep::Own`]), or read it ([`Keep::Private`]).
    #[error("others can {what} it (mode {mode:04o})")]
    Exposed {
        /// Its permission bits.
        mode: u32,
        /// `read or write`, or `write`.
        what: &'static str,
    },
}

impl FileError {
    /// As an I/O error: the open's own, else `PermissionDenied` with the reason.
    pub fn into_io(self) -> io::Error {
        match self {
            FileError::Io(e) => e,
            refused => io::Error::new(io::ErrorKind::PermissionDenied, refused.to_string()),
        }
    }

    /// The file does not exist.
    pub fn is_missing(&self) -> bool {
        matches!(self, FileError::Io(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

/// Opens `path` with `flags` (`O_RDONLY`, `O_WRONLY | O_APPEND`, ...; `O_NOFOLLOW`,
/// `O_NONBLOCK` and `O_CLOEXEC` are always added) and judges the descriptor by `keep`.
///
/// # Errors
/// [`FileError`]: the open's error, or why the file opened is refused.
pub fn open(path: &Path, flags: libc::c_int, keep: Keep) -> Result<File, FileError> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        FileError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NUL in the path",
        ))
    })?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated path; the descriptor is owned by the File made from it.
    let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(if err.raw_os_error() == Some(libc::ELOOP) {
            FileError::Link
        } else {
            FileError::Io(err)
        });
    }
    // SAFETY: fd was just opened and is owned by no one else.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    check(file.as_fd(), keep)?;
    Ok(file)
}

/// Judges an open descriptor: a regular file, and what `keep` asks of its owner and mode.
///
/// # Errors
/// [`FileError`] saying why it is refused.
pub fn check(fd: BorrowedFd<'_>, keep: Keep) -> Result<(), FileError> {
    let st = sys::fstat(fd).map_err(FileError::Io)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(FileError::NotRegular(sys::kind(st.st_mode)));
    }
    let mode = st.st_mode & 0o7777;
    let (mask, what) = match keep {
        Keep::AnyOwner => return Ok(()),
        Keep::Private => (0o077, "read or write"),
        Keep::Own => (0o022, "write"),
    };
    let me = sys::euid();
    if st.st_uid != me {
        return Err(FileError::NotOwn { uid: st.st_uid, me });
    }
    if mode & mask != 0 {
        return Err(FileError::Exposed { mode, what });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn links_fifos_and_exposed_files_are_refused_on_the_descriptor() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("f");
        std::fs::write(&f, "x").expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(open(&f, libc::O_RDONLY, Keep::Private).is_ok());
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&f, &link).expect("symlink");
        assert!(matches!(
            open(&link, libc::O_RDONLY, Keep::AnyOwner),
            Err(FileError::Link)
        ));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(open(&f, libc::O_RDONLY, Keep::Own).is_ok());
        let err = open(&f, libc::O_RDONLY, Keep::Private).expect_err("readable by others");
        assert!(
            matches!(err, FileError::Exposed { mode: 0o644, .. }),
            "{err}"
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(matches!(
            open(&f, libc::O_RDONLY, Keep::Own),
            Err(FileError::Exposed { .. })
        ));
        let fifo = d.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).expect("path");
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            open(&fifo, libc::O_RDONLY, Keep::AnyOwner),
            Err(FileError::NotRegular(_))
        ));
        let missing = open(&d.path().join("none"), libc::O_RDONLY, Keep::AnyOwner);
        assert!(missing.expect_err("missing").is_missing());
    }
}
