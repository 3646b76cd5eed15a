//! [`NewFile`]: the one routine for a file the bridge creates by path (an image it saves, a
//! client config `setup` writes, a backup of one), made without ever following a symbolic link
//! or writing in place: the folder is opened once (`O_DIRECTORY`) and, for [`Folder::Safe`],
//! checked on that descriptor (ours or root's, and writable by no one else unless sticky); the
//! data goes to a fresh random name created with `O_CREAT|O_EXCL|O_NOFOLLOW` under that
//! descriptor; [`NewFile::commit`] renames it over the final name (`renameat`: a link planted
//! there is replaced, never followed) and [`NewFile::commit_new`] only where the name is free
//! (`renameat2(RENAME_NOREPLACE)`). Dropped before the commit, it removes its temporary file.
//! (Files inside a [`super::CheckedDir`] are made with its own `create_file`.)

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::shown::ShownPath;

/// How many fresh names are tried before giving up (each collision is another process's file).
const NAME_TRIES: u32 = 64;

/// Why a file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The path has no file name, or the folder cannot be opened.
    #[error("cannot write {}: {err}", ShownPath(.path))]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        err: std::io::Error,
    },
    /// The folder is one where another user could swap the file after it is written.
    #[error(
        "refusing to write into {}: it belongs to uid {owner} and has mode {mode:o}, so another \
         user could replace what is written there. Fix: choose a folder that is yours (or \
         root's) and writable by no one else, or a sticky one such as /var/tmp",
        ShownPath(.dir)
    )]
    UnsafeFolder {
        /// The folder.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its mode bits.
        mode: u32,
    },
}

/// Which folders a new file may be written into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Folder {
    /// Ours or root's, and writable by no one else unless sticky (a saved image: another user
    /// must not be able to swap it after it is written).
    Safe,
    /// The folder the user named, as it is (a client's config folder, whose owner may edit the
    /// file anyway): only its descriptor is used, so no link is followed.
    AsNamed,
}

/// A file being written under a temporary name; see the module docs.
pub struct NewFile {
    dir: File,
    dir_path: PathBuf,
    tmp: CString,
    name: CString,
    file: File,
    committed: bool,
}

/// Whether a folder of `owner` and `mode` is safe for a file of this process (`euid`).
pub fn folder_is_safe(owner: u32, mode: u32, euid: u32) -> bool {
    let owned = owner == euid || owner == 0;
    let shared = mode & 0o022 != 0;
    let sticky = mode & libc::S_ISVTX != 0;
    owned && (!shared || sticky)
}

impl NewFile {
    /// Starts writing `path` (its folder is checked first when `folder` is [`Folder::Safe`]).
    ///
    /// # Errors
    /// [`WriteError::UnsafeFolder`] for a folder another user could swap files in;
    /// [`WriteError::Io`] when the folder cannot be opened or the file made.
    pub fn create(path: &Path, folder: Folder) -> Result<NewFile, WriteError> {
        let io = |p: &Path, err| WriteError::Io {
            path: p.to_path_buf(),
            err,
        };
        let name = path.file_name().filter(|n| !n.is_empty()).ok_or_else(|| {
            io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
            )
        })?;
        let dir_path = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = open_dir(&dir_path).map_err(|e| io(&dir_path, e))?;
        let meta = dir.metadata().map_err(|e| io(&dir_path, e))?;
        if folder == Folder::Safe && !folder_is_safe(meta.uid(), meta.mode(), super::euid()) {
            return Err(WriteError::UnsafeFolder {
                dir: dir_path,
                owner: meta.uid(),
                mode: meta.mode() & 0o7777,
            });
        }
        NewFile::in_folder(dir, dir_path, name)
    }

    /// Starts writing `name` under the open (already checked) folder `dir` at `dir_path`.
    ///
    /// # Errors
    /// [`WriteError::Io`] when the file cannot be made.
    pub(super) fn in_folder(
        dir: File,
        dir_path: PathBuf,
        name: &OsStr,
    ) -> Result<NewFile, WriteError> {
        let io = |err| WriteError::Io {
            path: dir_path.join(name),
            err,
        };
        let (tmp, file) = fresh(&dir, name).map_err(io)?;
        let name = c_name(name).map_err(io)?;
        Ok(NewFile {
            dir,
            dir_path,
            tmp,
            name,
            file,
            committed: false,
        })
    }

    /// The open temporary file, to write to.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Sets `mode`, syncs, and renames the file over its final name.
    ///
    /// # Errors
    /// [`WriteError::Io`]; the temporary file is then removed.
    pub fn commit(self, mode: u32) -> Result<(), WriteError> {
        self.finish(mode, false)
    }

    /// Sets `mode`, syncs, and gives the file its final name only if that name is free.
    ///
    /// # Errors
    /// [`WriteError::Io`], of kind `AlreadyExists` when the name is taken ([`WriteError::is_taken`]);
    /// the temporary file is then removed.
    pub fn commit_new(self, mode: u32) -> Result<(), WriteError> {
        self.finish(mode, true)
    }

    fn finish(mut self, mode: u32, no_replace: bool) -> Result<(), WriteError> {
        let path = self.dir_path.join(OsStr::from_bytes(self.name.as_bytes()));
        let io = |err| WriteError::Io {
            path: path.clone(),
            err,
        };
        self.file.flush().map_err(io)?;
        // SAFETY: fchmod on a descriptor this value owns.
        if unsafe { libc::fchmod(self.file.as_raw_fd(), mode) } != 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        self.file.sync_all().map_err(io)?;
        let dirfd = self.dir.as_raw_fd();
        let done = if no_replace {
            rename_no_replace(dirfd, &self.tmp, &self.name)
        } else {
            // SAFETY: both names are NUL-terminated and relative to the folder this value holds.
            match unsafe { libc::renameat(dirfd, self.tmp.as_ptr(), dirfd, self.name.as_ptr()) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        };
        done.map_err(io)?;
        self.committed = true;
        let _ = self.dir.sync_all();
        Ok(())
    }
}

impl WriteError {
    /// As an I/O error of the same kind, its text naming the file.
    pub fn into_io(self) -> std::io::Error {
        let kind = match &self {
            WriteError::Io { err, .. } => err.kind(),
            WriteError::UnsafeFolder { .. } => std::io::ErrorKind::PermissionDenied,
        };
        std::io::Error::new(kind, self.to_string())
    }

    /// The final name was taken ([`NewFile::commit_new`]).
    pub fn is_taken(&self) -> bool {
        matches!(self, WriteError::Io { err, .. } if err.kind() == std::io::ErrorKind::AlreadyExists)
    }
}

/// Renames `from` to `to` under `dirfd` unless `to` exists: `renameat2(RENAME_NOREPLACE)`, or
/// where the file system lacks it, a hard link (which fails on an existing name) and an unlink.
fn rename_no_replace(dirfd: libc::c_int, from: &CString, to: &CString) -> std::io::Result<()> {
    // SAFETY: both names are NUL-terminated and relative to the folder descriptor given.
    let rc = unsafe {
        libc::renameat2(
            dirfd,
            from.as_ptr(),
            dirfd,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if !matches!(err.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(err);
    }
    // SAFETY: as above; linkat does not follow `from` (no AT_SYMLINK_FOLLOW).
    if unsafe { libc::linkat(dirfd, from.as_ptr(), dirfd, to.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    unsafe { libc::unlinkat(dirfd, from.as_ptr(), 0) };
    Ok(())
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if !self.committed {
            // SAFETY: removes this value's own temporary name under the folder it holds.
            unsafe { libc::unlinkat(self.dir.as_raw_fd(), self.tmp.as_ptr(), 0) };
        }
    }
}

fn c_name(name: &OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in the name"))
}

fn open_dir(dir: &Path) -> std::io::Result<File> {
    let c = c_name(dir.as_os_str())?;
    // SAFETY: a NUL-terminated path; the descriptor is owned by the File made from it.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by no one else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// A new file `.NAME.tmp-RANDOM` under `dir`, created exclusively and never through a link.
fn fresh(dir: &File, name: &OsStr) -> std::io::Result<(CString, File)> {
    let mut last = None;
    for _ in 0..NAME_TRIES {
        let mut tmp = b".".to_vec();
        tmp.extend_from_slice(name.as_bytes());
        tmp.extend_from_slice(format!(".tmp-{:016x}", random()).as_bytes());
        let tmp = c_name(OsStr::from_bytes(&tmp))?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated name relative to a folder descriptor this caller holds.
        let fd =
            unsafe { libc::openat(dir.as_raw_fd(), tmp.as_ptr(), flags, 0o600 as libc::c_uint) };
        if fd >= 0 {
            // SAFETY: fd was just opened and is owned by no one else.
            return Ok((tmp, File::from(unsafe { OwnedFd::from_raw_fd(fd) })));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(err);
        }
        last = Some(err);
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no fresh name")))
}

/// 64 unpredictable bits from the kernel (the name only needs to be unguessable enough that
/// collisions are rare: `O_EXCL` makes them harmless).
fn random() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: getrandom writes at most buf.len() bytes into buf.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        return t ^ u64::from(std::process::id()).rotate_left(32);
    }
    u64::from_ne_bytes(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_link_planted_at_the_name_is_replaced_never_followed() {
        let d = tempfile::tempdir().expect("tempdir");
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let out = d.path().join("out.tar");
        std::os::unix::fs::symlink(&victim, &out).expect("symlink");
        let mut f = NewFile::create(&out, Folder::Safe).expect("create");
        f.file().write_all(b"new").expect("write");
        f.commit(0o644).expect("commit");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
        let meta = std::fs::symlink_metadata(&out).expect("meta");
        assert!(meta.file_type().is_file(), "the link itself was replaced");
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_to_string(&out).expect("read"), "new");
        let left = std::fs::read_dir(d.path()).expect("ls").count();
        assert_eq!(left, 2, "no temporary file is left");
    }

    #[test]
    fn an_uncommitted_file_leaves_nothing_and_shared_folders_are_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        drop(NewFile::create(&d.path().join("x"), Folder::Safe).expect("create"));
        assert_eq!(std::fs::read_dir(d.path()).expect("ls").count(), 0);
        let shared = d.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = NewFile::create(&shared.join("x"), Folder::Safe)
            .err()
            .expect("refused");
        assert!(
            matches!(err, WriteError::UnsafeFolder { mode: 0o777, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("shared"), "{err}");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        NewFile::create(&shared.join("x"), Folder::Safe).expect("a sticky folder of ours is fine");
        assert!(folder_is_safe(0, 0o1777, 1000), "/var/tmp");
        assert!(
            !folder_is_safe(1000, 0o1777, 0),
            "another user's sticky folder"
        );
        assert!(!folder_is_safe(1000, 0o755, 0), "another user's folder");
        assert!(folder_is_safe(1000, 0o755, 1000));
    }

    #[test]
    fn commit_new_never_takes_a_name_not_even_a_dangling_link() {
        let d = tempfile::tempdir().expect("tempdir");
        let out = d.path().join("cfg.json");
        let mut f = NewFile::create(&out, Folder::AsNamed).expect("create");
        f.file().write_all(b"one").expect("write");
        f.commit_new(0o600).expect("a free name");
        assert_eq!(std::fs::read_to_string(&out).expect("read"), "one");
        let mut again = NewFile::create(&out, Folder::AsNamed).expect("create");
        again.file().write_all(b"two").expect("write");
        let err = again.commit_new(0o600).expect_err("taken");
        assert!(err.is_taken(), "{err}");
        assert_eq!(std::fs::read_to_string(&out).expect("read"), "one");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).expect("symlink");
        let err = NewFile::create(&dangling, Folder::AsNamed)
            .expect("create")
            .commit_new(0o600)
            .expect_err("a link holds the name");
        assert!(err.is_taken(), "{err}");
        assert!(
            !d.path().join("nowhere").exists(),
            "the link was not followed"
        );
        assert_eq!(
            std::fs::read_dir(d.path()).expect("ls").count(),
            2,
            "no temporary file left"
        );
    }

    #[test]
    fn a_named_folder_is_used_as_it_is() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let mut f = NewFile::create(&d.path().join("x"), Folder::AsNamed).expect("as named");
        f.file().write_all(b"x").expect("write");
        f.commit(0o600).expect("commit");
    }
}
