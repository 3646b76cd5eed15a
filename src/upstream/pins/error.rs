//! [`PinError`]: why the pinned tool definitions could not be read, checked or changed.

/// Why a pin operation failed. Messages never quote the pins file's text.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The pins file is not what the bridge wrote: nothing is re-pinned over it.
    #[error("the pinned tool definitions {path} are damaged ({at}); the server is not started, so that nothing is trusted afresh: move the file aside to pin every server again at its next start (MCP_BRIDGE_PIN_TOOLS)")]
    Damaged {
        /// The file, as shown.
        path: String,
        /// Where or how.
        at: String,
    },
    /// The server lists more tools than are pinned per server.
    #[error("MCP server '{server}' lists {count} tools; at most {max} are pinned per server (MCP_BRIDGE_PIN_TOOLS=0 turns pinning off)")]
    TooManyTools {
        /// The server, as shown.
        server: String,
        /// Tools it listed.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// The pins file would grow past its bound (servers or bytes).
    #[error("the pinned tool definitions {path} are full ({what}); remove entries of servers you no longer use by moving the file aside")]
    Full {
        /// The file, as shown.
        path: String,
        /// Which bound.
        what: String,
    },
    /// The folder is refused.
    #[error(transparent)]
    Folder(#[from] crate::checked_dir::DirError),
    /// Reading or writing the file failed.
    #[error("{what} the pinned tool definitions {path}: {source}")]
    Io {
        /// The file, as shown.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
