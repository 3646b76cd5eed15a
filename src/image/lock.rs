//! [`BuildLock`]: one image build at a time per user, across bridges and `image build`: an
//! exclusive `flock` on `<cache>/image-build.lock`. The holder writes its pid and current phase
//! into the file so a waiting bridge can say whom it waits for. The kernel drops the lock when
//! the holder's file closes, however the process ends, so a killed build never blocks the next.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::checked_dir::{Access, CheckedDir, DirError, FIX_CACHE};

/// The lock file's name in the cache directory.
pub const LOCK_FILE: &str = "image-build.lock";
/// The most of the lock file a waiter reads (pid and phase).
const MAX_NOTE: u64 = 512;

/// A held build lock; released when dropped.
#[derive(Debug)]
pub struct BuildLock {
    file: File,
}

/// The outcome of one attempt to take the lock.
#[derive(Debug)]
pub enum Attempt {
    /// Taken.
    Held(BuildLock),
    /// Another process holds it; what it wrote (pid and phase), sanitized.
    Busy(String),
}

/// The lock file for builds of this user.
pub fn path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(LOCK_FILE)
}

/// Tries once, without waiting, to take the lock at `path` (creating it and its directory).
///
/// # Errors
/// The I/O error when the file cannot be created or locked for another reason than contention.
pub fn try_lock(path: &Path) -> std::io::Result<Attempt> {
    // The cache folder is checked (`checked_dir`: this user's, writable by no one else) and
    // the file opened in it without following a link, and only when it is this user's plain
    // file that only it can write: the holder truncates and writes it.
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = CheckedDir::open(dir, Access::Shared, FIX_CACHE).map_err(DirError::into_io)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(LOCK_FILE);
    let mut file = dir
        .open_file(name, libc::O_RDWR | libc::O_CREAT, 0o600)
        .map_err(|e| match e.kind() {
            // Another's file, or one others may write: the fix is to remove it.
            std::io::ErrorKind::PermissionDenied => {
                std::io::Error::new(e.kind(), format!("{e}: remove it"))
            }
            _ => e,
        })?;
    // SAFETY: flock on a file descriptor this function owns; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(Attempt::Held(BuildLock { file }));
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
        return Err(err);
    }
    let mut note = String::new();
    let _ = (&mut file).take(MAX_NOTE).read_to_string(&mut note);
    let note: String = note
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Ok(Attempt::Busy(note.trim().to_string()))
}

impl BuildLock {
    /// Records what the holder is doing, for waiters (best effort).
    pub fn note(&mut self, phase: &str) {
        let text = format!("pid {}: {phase}", std::process::id());
        let cut: String = text.chars().take(MAX_NOTE as usize / 4).collect();
        let _ = self.file.set_len(0);
        let _ = self.file.rewind();
        let _ = self.file.write_all(cut.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_waiters_see_its_note() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = path(&dir.path().join("cache"));
        let Attempt::Held(mut held) = try_lock(&p).expect("lock") else {
            panic!("the first attempt takes the lock");
        };
        held.note("installing pandas\n\u{1b}[31m");
        match try_lock(&p).expect("attempt") {
            Attempt::Busy(note) => {
                assert!(
                    note.contains(&format!("pid {}", std::process::id())),
                    "{note}"
                );
                assert!(
                    note.contains("installing pandas") && !note.contains('\u{1b}'),
                    "{note}"
                );
            }
            Attempt::Held(_) => panic!("a second holder while the first holds it"),
        }
        drop(held);
        assert!(matches!(try_lock(&p).expect("attempt"), Attempt::Held(_)));
    }

    #[test]
    fn a_link_or_a_shared_file_at_the_lock_is_refused_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let p = path(dir.path());
        std::os::unix::fs::symlink(&victim, &p).expect("symlink");
        assert!(try_lock(&p).is_err(), "a link is never opened");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
        std::fs::remove_file(&p).expect("rm");
        std::fs::write(&p, "").expect("write");
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .expect("chmod");
        let err = try_lock(&p).expect_err("shared");
        assert!(err.to_string().contains("remove it"), "{err}");
    }
}
