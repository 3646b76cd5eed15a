//! How a host call fails: [`CallError`] (raised in the sandbox with its [`ErrorKind`]) and
//! [`LoadError`] (a run's servers could not be loaded).

use super::error_kind::ErrorKind;

/// A failed host call, as raised in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// Error class for the sandbox; see ARCHITECTURE.md.
    pub kind: ErrorKind,
    /// The message.
    pub message: String,
}

impl CallError {
    /// A `bad_request` error.
    pub fn bad_request(message: impl Into<String>) -> Self {
        CallError {
            kind: ErrorKind::BadRequest,
            message: message.into(),
        }
    }
}

/// Why the servers a run names could not be loaded ([`HostCalls::load`](super::host_calls::HostCalls::load)); the run reports it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The run named a server, and no servers are configured.
    #[error("unknown MCP server '{server}': no servers are configured")]
    NoServers {
        /// The first server named.
        server: String,
    },
    /// The backend could not start or list a server (its own error, e.g. `UpstreamError`).
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync>),
}
