//! The startup look for ways out in a shared folder: a unix socket (a host service), a FIFO (a
//! host reader) or a device node. The walk is bounded (entries and depth), never follows a
//! symlink and stays on the folder's own file system (the bind mount is not recursive, so nothing
//! mounted below it is visible in the sandbox). What it could not look at is said, not hidden;
//! one created later is the sandbox's own rule's job (ARCHITECTURE.md, "Shared folders").

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::shown::ShownPath;

/// At most this many entries are looked at per shared folder.
pub const MAX_ENTRIES: usize = 100_000;
/// Folders deeper than this below a shared folder are not looked into.
pub const MAX_DEPTH: usize = 32;

/// What the walk found nothing wrong in, and what it did not look at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Walked {
    /// Entries looked at.
    pub entries: usize,
    /// What was left out (cap reached, too deep, unreadable folders), for a warning.
    pub unchecked: Vec<String>,
}

/// Walks `root` looking for sockets, FIFOs and device nodes.
///
/// # Errors
/// The first one found, naming it and what it is.
pub fn check_special_files(root: &Path) -> Result<Walked, String> {
    check_bounded(root, MAX_ENTRIES, MAX_DEPTH)
}

fn check_bounded(root: &Path, max_entries: usize, max_depth: usize) -> Result<Walked, String> {
    let dev = std::fs::symlink_metadata(root)
        .map_err(|e| format!("{} cannot be looked at: {e}", ShownPath(root)))?
        .dev();
    let mut walked = Walked::default();
    let mut unreadable = 0usize;
    let mut too_deep = 0usize;
    let mut todo: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            unreadable += 1;
            continue;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                unreadable += 1;
                continue;
            };
            if walked.entries >= max_entries {
                walked.unchecked.push(format!(
                    "stopped after {max_entries} entries in {}",
                    ShownPath(root)
                ));
                return Ok(finish(walked, unreadable, too_deep, root, max_depth));
            }
            walked.entries += 1;
            let path = entry.path();
            // lstat: a symlink is looked at as a link, never followed
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                unreadable += 1;
                continue;
            };
            let kind = meta.file_type();
            let what = if kind.is_socket() {
                Some("a unix socket (a way to talk to a host service)")
            } else if kind.is_fifo() {
                Some("a FIFO (a way to send data to a host process)")
            } else if kind.is_char_device() || kind.is_block_device() {
                Some("a device node")
            } else {
                None
            };
            if let Some(what) = what {
                return Err(format!(
                    "{} in the shared folder {} is {what}; a shared folder may hold only files, \
                     folders and symlinks: move it out or share another folder",
                    ShownPath(&path),
                    ShownPath(root)
                ));
            }
            if kind.is_dir() && meta.dev() == dev {
                if depth + 1 >= max_depth {
                    too_deep += 1;
                } else {
                    todo.push((path, depth + 1));
                }
            }
        }
    }
    Ok(finish(walked, unreadable, too_deep, root, max_depth))
}

fn finish(
    mut walked: Walked,
    unreadable: usize,
    too_deep: usize,
    root: &Path,
    max_depth: usize,
) -> Walked {
    if unreadable > 0 {
        walked.unchecked.push(format!(
            "{unreadable} entries in {} could not be read",
            ShownPath(root)
        ));
    }
    if too_deep > 0 {
        walked.unchecked.push(format!(
            "{too_deep} folders in {} deeper than {max_depth} levels were not looked into",
            ShownPath(root)
        ));
    }
    walked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_folders_and_symlinks_pass() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
        std::fs::write(dir.path().join("a/b/x.csv"), "1").expect("write");
        std::os::unix::fs::symlink("/proc/self", dir.path().join("a/link")).expect("symlink");
        // a symlink to a socket is not followed (inside the sandbox it names another file)
        std::os::unix::fs::symlink("/run/docker.sock", dir.path().join("sock")).expect("ln");
        let walked = check_special_files(dir.path()).expect("clean");
        assert_eq!(walked.entries, 5);
        assert!(walked.unchecked.is_empty(), "{walked:?}");
    }

    #[test]
    fn a_socket_or_fifo_anywhere_below_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("deep/er")).expect("mkdir");
        let sock = dir.path().join("deep/er/svc.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let err = check_special_files(dir.path()).expect_err("socket");
        assert!(
            err.contains("svc.sock") && err.contains("unix socket"),
            "{err}"
        );
        std::fs::remove_file(&sock).expect("rm");
        let fifo = std::ffi::CString::new(dir.path().join("deep/pipe").to_str().expect("utf8"))
            .expect("cstring");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
        let err = check_special_files(dir.path()).expect_err("fifo");
        assert!(err.contains("pipe") && err.contains("FIFO"), "{err}");
    }

    #[test]
    fn the_bounds_are_said() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("1/2/3/4")).expect("mkdir");
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("f{i}")), "").expect("write");
        }
        let walked = check_bounded(dir.path(), 3, 32).expect("capped");
        assert_eq!(walked.entries, 3);
        assert!(
            walked.unchecked[0].contains("stopped after 3"),
            "{walked:?}"
        );
        let walked = check_bounded(dir.path(), 100, 2).expect("shallow");
        assert!(
            walked
                .unchecked
                .iter()
                .any(|u| u.contains("not looked into")),
            "{walked:?}"
        );
    }
}
