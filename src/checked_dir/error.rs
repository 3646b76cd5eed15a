//! [`DirError`]: why a folder the bridge keeps things in was refused.

use std::path::PathBuf;

use crate::shown::ShownPath;

/// A folder (or a folder on the way to it) that another user could change, or that could not
/// be opened. Every message names the folder, its owner and mode where known, and the fix.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// The folder is owned by another user (it may have been made first by someone else).
    #[error(
        "{} is owned by uid {owner} (mode {mode:04o}), not by this user (uid {me}): another user \
         could read or replace what the bridge keeps there. Remove it, or {fix}",
        ShownPath(path)
    )]
    NotOwned {
        /// The folder.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// Its permission bits.
        mode: u32,
        /// The bridge's effective uid.
        me: u32,
        /// What to set instead.
        fix: &'static str,
    },
    /// The folder is writable (for a private folder: readable or searchable) by others.
    #[error(
        "{} (owner uid {owner}, mode {mode:04o}) is open to other users: {what}. Remove it or \
         `chmod {want:o}` it, or {fix}",
        ShownPath(path)
    )]
    OpenToOthers {
        /// The folder.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// Its permission bits.
        mode: u32,
        /// What is wrong with the mode.
        what: &'static str,
        /// A mode that would be accepted.
        want: u32,
        /// What to set instead.
        fix: &'static str,
    },
    /// A folder on the way is writable by others without the sticky bit, or owned by another
    /// user: someone else could swap what lies below it.
    #[error(
        "{} (owner uid {owner}, mode {mode:04o}), a folder on the way to {}, could be changed \
         by another user, who could then swap what lies below it. {fix_first}",
        ShownPath(path),
        ShownPath(target)
    )]
    UnsafeAncestor {
        /// The folder on the way.
        path: PathBuf,
        /// The folder asked for.
        target: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// Its permission bits.
        mode: u32,
        /// What to set instead (starting with a capital letter).
        fix_first: String,
    },
    /// Something other than a folder stands where the folder should be (a symbolic link is
    /// never followed there).
    #[error(
        "{} is a {kind}, not a folder (it is not followed). Remove it, or {fix}",
        ShownPath(path)
    )]
    NotAFolder {
        /// The path.
        path: PathBuf,
        /// What is there instead ("symbolic link", "file", ...).
        kind: &'static str,
        /// What to set instead.
        fix: &'static str,
    },
    /// An I/O failure while opening, creating or checking the folder.
    #[error("{about} {}: {err}", ShownPath(path))]
    Io {
        /// What was being done.
        about: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        err: std::io::Error,
    },
}

impl DirError {
    /// An I/O failure `about` (a verb: "opening") `path`.
    pub fn io(about: &'static str, path: &std::path::Path, err: std::io::Error) -> Self {
        DirError::Io {
            about,
            path: path.to_path_buf(),
            err,
        }
    }

    /// As an `io::Error` (kind `PermissionDenied` for a refused folder), for callers whose
    /// errors are I/O errors; the `DirError` stays reachable through `get_ref`.
    pub fn into_io(self) -> std::io::Error {
        let kind = match &self {
            DirError::Io { err, .. } => err.kind(),
            _ => std::io::ErrorKind::PermissionDenied,
        };
        std::io::Error::new(kind, self)
    }
}
