//! Thin, safe wrappers of the `*at` system calls the folder checks need (libc): every call
//! names a file relative to an open folder and never follows a symbolic link at the last step.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Flags for folders only walked through (no read permission needed where `O_PATH` exists).
#[cfg(target_os = "linux")]
pub const WALK: libc::c_int = libc::O_PATH;
/// Flags for folders only walked through.
#[cfg(not(target_os = "linux"))]
pub const WALK: libc::c_int = libc::O_RDONLY;

/// The bridge's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `open(path)` of a folder with `flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC`.
pub fn open_dir(path: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = c_name(path)?;
    let flags = flags | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let fd = check(unsafe { libc::open(c.as_ptr(), flags) })?;
    // SAFETY: `fd` was just returned by open(2) and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`.
pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let c = c_name(name)?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid fd and NUL-terminated name; the mode is passed as the variadic argument.
    let fd =
        check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, mode as libc::c_uint) })?;
    // SAFETY: `fd` was just returned by openat(2) and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = c_name(name)?;
    // SAFETY: a valid fd and NUL-terminated name.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) }).map(drop)
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<libc::stat> {
    let c = c_name(name)?;
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid fd, NUL-terminated name and a buffer of the right type to fill.
    check(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat(2) succeeded, so it filled the buffer.
    Ok(unsafe { st.assume_init() })
}

/// `fstat(fd)`: the open file's own metadata (never the path's).
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a valid fd and a buffer of the right type to fill.
    check(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat(2) succeeded, so it filled the buffer.
    Ok(unsafe { st.assume_init() })
}

/// `readlinkat(dir, name)`.
pub fn read_link_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OsString> {
    let c = c_name(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: a valid fd, NUL-terminated name, and a buffer of `buf.len()` writable bytes.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(OsString::from_vec(buf))
}

/// `unlinkat(dir, name, flags)` (`AT_REMOVEDIR` for an empty folder).
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr, flags: libc::c_int) -> io::Result<()> {
    let c = c_name(name)?;
    // SAFETY: a valid fd and NUL-terminated name.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) }).map(drop)
}

/// `renameat(dir, from, dir, to)`: replaces `to` when it exists; links are renamed, not followed.
pub fn rename_at(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (f, t) = (c_name(from)?, c_name(to)?);
    // SAFETY: a valid fd and two NUL-terminated names.
    check(unsafe { libc::renameat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr()) })
        .map(drop)
}

/// What a `stat` mode says the file is, for messages.
pub fn kind(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFLNK => "symbolic link",
        libc::S_IFREG => "file",
        libc::S_IFDIR => "folder",
        libc::S_IFSOCK => "socket",
        libc::S_IFIFO => "FIFO",
        _ => "device or special file",
    }
}
