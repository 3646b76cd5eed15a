//! Why `setup` left a file as it was.

use std::path::PathBuf;

/// A file `setup` could not read, change or write; every other file proceeds.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The file exists but cannot be read.
    #[error("{}: cannot read: {source}; left untouched", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A client named with `--client` has no config file or folder here.
    #[error("{client}: not found on this machine (no config file, nor the folder it goes in)")]
    NotFound {
        /// The client's name.
        client: &'static str,
    },
    /// The file is not a JSON object in its client's syntax.
    #[error("{}: not valid: {message}; left untouched", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// The server table is there but is not an object.
    #[error("{}: \"{key}\" is not an object; left untouched", path.display())]
    NotATable {
        /// The file.
        path: PathBuf,
        /// `mcpServers` or `servers`.
        key: &'static str,
    },
    /// Another server already has the bridge's name.
    #[error(
        "{}: a server named '{name}' is already there and does not launch mcp-code-bridge; left untouched (choose another name with --name)",
        path.display()
    )]
    NameTaken {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// The edit would have changed more than the entries it is about (a safety check).
    #[error("{}: the edit would change more than the entries it is about; left untouched", path.display())]
    Unsafe {
        /// The file.
        path: PathBuf,
    },
    /// The file changed on disk between the diff and the write (its client wrote it).
    #[error("{}: changed since it was read; not written (run setup again)", path.display())]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// Writing the file, its backup or a new file failed.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The record of moved servers could not be read or written.
    #[error(transparent)]
    Record(#[from] super::moves::RecordError),
}
