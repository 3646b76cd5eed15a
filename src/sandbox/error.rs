//! Errors of the bridge layer (sandbox sessions and their frames).

use std::sync::Arc;

use super::protocol::FrameError;
use crate::container::RuntimeError;
use crate::image::BuildError;

/// A failure of the sandbox session.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The container engine failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The image is missing and a build runs; the run waits for it (`Sandbox::run`).
    #[error("the sandbox image is being built")]
    ImageBuilding,
    /// The image is missing and the last build failed, less than the retry delay ago.
    #[error("the sandbox image '{image}' is missing and building it failed: {error}")]
    ImageBuildFailed {
        /// The image.
        image: String,
        /// Why the build failed, and what to do.
        #[source]
        error: Arc<BuildError>,
    },
    /// The sandbox did not become ready.
    #[error("the sandbox did not start: {reason}{}", crate::lines::stderr_section("sandbox", .stderr_tail))]
    Boot {
        /// Why.
        reason: String,
        /// The last lines the container wrote to stderr.
        stderr_tail: String,
    },
    /// The container exited or was killed.
    #[error("the sandbox died: {reason}{}", crate::lines::stderr_section("sandbox", .stderr_tail))]
    Died {
        /// Exit code interpretation.
        reason: String,
        /// The last lines the container wrote to stderr.
        stderr_tail: String,
        /// True when the running exec had not been acknowledged (`started`): its code never ran.
        before_start: bool,
    },
    /// The container engine went away while the sandbox ran (its API service died, its socket
    /// vanished): the sandbox can no longer be watched or removed through it.
    #[error("lost the connection to the container engine: {cause}")]
    EngineLost {
        /// Why it is considered gone (names the engine).
        cause: String,
    },
    /// The sandbox is less isolated than configured (and the user did not allow that).
    #[error("the sandbox is weaker than configured, so it was not used: {0}. The container engine \
             ignored part of the configuration; fix its setup (see `mcp-code-bridge doctor`), or set \
             MCP_BRIDGE_ALLOW_WEAK_SANDBOX=1 to run anyway")]
    Weak(String),
    /// The engine cannot bind-mount the host folders `MCP_BRIDGE_MOUNTS` names (a remote
    /// engine, or an engine in a VM the folder is not shared with).
    #[error("MCP_BRIDGE_MOUNTS cannot be used with this container engine: {0}")]
    Mounts(String),
    /// `MCP_BRIDGE_NETWORK_ALLOW` cannot be served on this engine (it cannot mount the
    /// bridge's socket folder: a remote engine, or stdio frames).
    #[error("MCP_BRIDGE_NETWORK_ALLOW cannot be used with this container engine: {0}")]
    Network(String),
    /// The sandbox broke the frame protocol, or its session ended under a request.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

/// How a request to the sandbox ended without its answer.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The session went away before it answered.
    #[error("the sandbox session ended")]
    SessionEnded,
    /// The sandbox sent a frame over the size limit.
    #[error("the sandbox sent a frame larger than MCP_BRIDGE_MAX_FRAME ({max_frame} bytes); it was dropped")]
    FrameTooLong {
        /// The limit (`MCP_BRIDGE_MAX_FRAME`).
        max_frame: usize,
    },
    /// The sandbox sent a line that is no frame it may send.
    #[error(transparent)]
    Malformed(#[from] FrameError),
}

/// Explains a container exit code in words.
pub fn explain_exit(code: Option<i64>, memory_bytes: u64) -> String {
    match code {
        Some(137) => format!(
            "killed (exit 137): out of memory (limit {} MiB, MCP_BRIDGE_MEMORY) or killed from outside",
            memory_bytes >> 20
        ),
        Some(139) => "crashed with a segmentation fault (exit 139)".into(),
        Some(0) => "the sandbox process exited (exit 0)".into(),
        Some(c) if c > 128 => format!("killed by signal {} (exit {c})", c - 128),
        Some(c) => format!("exited with code {c}"),
        None => "its output stream ended (exit code unknown)".into(),
    }
}
