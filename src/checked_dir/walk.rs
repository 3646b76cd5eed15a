//! The walk from `/` down to a folder, one name at a time, each looked up relative to the
//! folder above it (`*at` calls): a missing folder is made (0700), a symbolic link on the way is
//! followed by hand only when no other user could have put it there, and every folder passed
//! through must be one no other user can change (owned by root or this user; writable by others
//! only with the sticky bit, as `/tmp`). What the walk has checked therefore stays as it was:
//! only root or this user could change it afterwards. The last name must be a real folder,
//! never a link.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use super::error::DirError;
use super::sys;

/// Most symbolic links followed in one walk (as the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;
/// Most times a missing folder is made and looked up again (another process may race us).
const MAX_MKDIR_TRIES: usize = 3;

/// One name still to walk, and whether it is the folder asked for (the path's last name).
type Step = (OsString, bool);

/// Walks to `target` (made absolute against the current folder), creating what is missing,
/// and returns the last folder opened for reading. Its own owner and mode are the caller's to
/// check; everything above it is checked here.
///
/// # Errors
/// [`DirError`] naming the folder that failed and why.
pub fn walk(target: &Path, me: u32, fix: &'static str) -> Result<OwnedFd, DirError> {
    let target = std::path::absolute(target).map_err(|err| DirError::Io {
        about: "making the path absolute:",
        path: target.to_path_buf(),
        err,
    })?;
    let io_err = |about, path: &Path, err| DirError::Io {
        about,
        path: path.to_path_buf(),
        err,
    };
    let root =
        sys::open_dir(OsStr::new("/"), sys::WALK).map_err(|e| io_err("opening", &target, e))?;
    let root_stat = sys::fstat(root.as_fd()).map_err(|e| io_err("checking", Path::new("/"), e))?;
    ancestor_ok(&root_stat, Path::new("/"), &target, me, fix)?;
    let mut stack: Vec<(OwnedFd, PathBuf)> = vec![(root, PathBuf::from("/"))];
    let mut todo: VecDeque<Step> = steps(&target, true);
    let mut links = 0;
    while let Some((name, last)) = todo.pop_front() {
        if name == ".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let (dir, at) = stack.last().expect("the root is never popped");
        let here = at.join(&name);
        let mut tries = 0;
        let st = loop {
            match sys::lstat_at(dir.as_fd(), &name) {
                Ok(st) => break st,
                Err(e) if e.kind() == io::ErrorKind::NotFound && tries < MAX_MKDIR_TRIES => {
                    tries += 1;
                    match sys::mkdir_at(dir.as_fd(), &name, 0o700) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(io_err("creating", &here, e)),
                    }
                }
                Err(e) => return Err(io_err("looking up", &here, e)),
            }
        };
        let fmt = st.st_mode & libc::S_IFMT;
        if fmt == libc::S_IFLNK && !last {
            if st.st_uid != 0 && st.st_uid != me {
                return Err(DirError::UnsafeAncestor {
                    path: here,
                    target,
                    owner: st.st_uid,
                    mode: st.st_mode & 0o7777,
                    fix_first: capitalized(fix),
                });
            }
            links += 1;
            if links > MAX_LINKS {
                let err = io::Error::from_raw_os_error(libc::ELOOP);
                return Err(io_err("following links to", &target, err));
            }
            let link = sys::read_link_at(dir.as_fd(), &name)
                .map_err(|e| io_err("reading the link", &here, e))?;
            let link = PathBuf::from(link);
            if link.is_absolute() {
                stack.truncate(1);
            }
            for step in steps(&link, false).into_iter().rev() {
                todo.push_front(step);
            }
            continue;
        }
        if fmt != libc::S_IFDIR {
            return Err(DirError::NotAFolder {
                path: here,
                kind: sys::kind(st.st_mode),
                fix,
            });
        }
        let fd = sys::open_at(dir.as_fd(), &name, sys::WALK | libc::O_DIRECTORY, 0)
            .map_err(|e| io_err("opening", &here, e))?;
        if !last {
            let st = sys::fstat(fd.as_fd()).map_err(|e| io_err("checking", &here, e))?;
            ancestor_ok(&st, &here, &target, me, fix)?;
        }
        stack.push((fd, here));
    }
    let (dir, at) = stack.last().expect("the root is never popped");
    sys::open_at(
        dir.as_fd(),
        OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    )
    .map_err(|e| io_err("opening", at, e))
}

/// The names of `path` in order; the last is marked when `mark_last`.
fn steps(path: &Path, mark_last: bool) -> VecDeque<Step> {
    let mut out: VecDeque<Step> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some((n.to_os_string(), false)),
            Component::ParentDir => Some((OsString::from(".."), false)),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    if mark_last {
        if let Some(last) = out.back_mut() {
            last.1 = true;
        }
    }
    out
}

/// A folder on the way may be passed through when no other user can change it.
fn ancestor_ok(
    st: &libc::stat,
    path: &Path,
    target: &Path,
    me: u32,
    fix: &'static str,
) -> Result<(), DirError> {
    let mode = st.st_mode & 0o7777;
    let owner_ok = st.st_uid == 0 || st.st_uid == me;
    let sticky = mode & libc::S_ISVTX != 0;
    if owner_ok && (mode & 0o022 == 0 || sticky) {
        return Ok(());
    }
    Err(DirError::UnsafeAncestor {
        path: path.to_path_buf(),
        target: target.to_path_buf(),
        owner: st.st_uid,
        mode,
        fix_first: capitalized(fix),
    })
}

fn capitalized(fix: &str) -> String {
    let mut c = fix.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
