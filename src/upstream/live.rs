//! What the parts of the upstream layer share about one server's connection: the [`Live`]
//! handle callers use, the start timeout, and the reader that keeps the server's stderr tail.
//! The client, its owner and the start all import it; it names no other part of `upstream/`
//! but the lane, so they form no circle.

use std::sync::Arc;

use rmcp::model::{ServerPeerInfo, Tool};
use rmcp::service::{Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use super::lane::http_lane::HttpLane;
use super::lane::Lane;
use super::read_chunk::ReadChunk;
use crate::config::ServerSpec;
use crate::lines::{FrameEvent, LineAssembler, LineTail};

/// Longest a server may take to start and list its tools.
pub const START_TIMEOUT_SECS: u64 = 30;
/// Stderr lines kept per server for error messages.
pub const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line buffered; longer ones are replaced by a note.
pub const STDERR_LINE_MAX: usize = 64 << 10;
/// Characters of a stderr line kept in the tail.
pub const STDERR_LINE_CHARS: usize = 1000;
/// A connected server: a cheap handle to its session.
#[derive(Clone)]
pub struct Live {
    /// The MCP peer (clone per call; concurrent calls are fine).
    pub peer: Peer<RoleClient>,
    /// Its tools, as listed at connect time.
    pub tools: Arc<Vec<Tool>>,
    /// What the server said about itself at initialize.
    pub info: Option<Arc<ServerPeerInfo>>,
    /// The fast lane for `tools/call`: stdio servers with an `initialize` handshake.
    pub(super) lane: Option<Arc<Lane>>,
    /// The fast lane for `tools/call` of a streamable HTTP server.
    pub(super) http_lane: Option<Arc<HttpLane>>,
    /// Cancelled by the owner once the connection has ended.
    pub(super) closed: CancellationToken,
    /// rmcp's own token: cancelling it ends the connection.
    pub(super) stop: CancellationToken,
}

impl Live {
    /// True once the connection has ended or is being stopped.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled() || self.stop.is_cancelled()
    }
}

/// The tool list every process of one server shares while they list the same tools (the shared
/// process, the per-client ones of a `"perClient"` server, and each restart): one `Arc`, so the
/// tool cache, the argument checks and the exec-frame entries, keyed by the list's identity, are
/// made once, not once per process.
#[derive(Default)]
pub(super) struct SameList(std::sync::Mutex<Option<Arc<Vec<Tool>>>>);

impl SameList {
    /// `tools` as the one shared list: the list kept when it is equal, else `tools`, kept.
    pub(super) fn share(&self, tools: Vec<Tool>) -> Arc<Vec<Tool>> {
        let mut kept = self.0.lock().expect("tool list lock");
        match &*kept {
            Some(list) if **list == tools => list.clone(),
            _ => {
                let list = Arc::new(tools);
                *kept = Some(list.clone());
                list
            }
        }
    }
}

/// Reads a server's stderr until it ends: each line redacted, logged at debug and kept in `tail`.
pub(super) async fn drain_stderr(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<LineTail>,
    spec: Arc<ServerSpec>,
) {
    let server = &spec.name;
    use tokio::io::AsyncReadExt;
    let mut lines = LineAssembler::new(STDERR_LINE_MAX);
    // Most servers write a few lines, if any: a small buffer, grown for one that floods.
    let mut chunk = ReadChunk::new(1 << 10, 16 << 10);
    let mut events = Vec::new();
    while let Ok(n) = stderr.read(chunk.space()).await {
        if n == 0 {
            break;
        }
        lines.push(chunk.filled(n), &mut events);
        for ev in events.drain(..) {
            let line = match ev {
                FrameEvent::Line(l) => spec.redact(&String::from_utf8_lossy(&l)),
                FrameEvent::TooLong { seen } => {
                    format!("[a stderr line over {seen} bytes was cut]")
                }
            };
            tracing::debug!(target: "upstream", server = %crate::shown::Shown(server), "{}", crate::shown::Shown(&line));
            tail.push(line);
        }
    }
}
