//! Starting one server for its owner (`owner.rs`): the process or HTTP connection, the MCP
//! handshake and the tool list, with `disabledTools` dropped. Every task it spawns (the stderr
//! reader) is on the bridge's tracker, in the server's span.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::service::{RoleClient, RunningService};
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::live::{drain_stderr, Live};
use super::transport::{ChildTransport, EndReason, ProcessGroup};
use crate::config::{ServerSpec, Transport};
use crate::lines::LineTail;

/// How long the stderr reader goes on once the connection is closed (or the bridge stops):
/// the process group is killed by then, so this only bounds a pipe an escaped process holds.
const STDERR_AFTER_CLOSE: Duration = Duration::from_secs(1);

/// A started server: the connection (owned by the owner task) and the handle callers share.
pub(super) struct Started {
    /// rmcp's service: its loop runs until the connection ends or the owner stops it.
    pub service: RunningService<RoleClient, ()>,
    /// What callers use.
    pub live: Live,
}

/// What starting one server needs; the owner task holds it.
pub(super) struct Starter {
    /// The server's definition.
    pub spec: Arc<ServerSpec>,
    /// Its last stderr lines, filled by the stderr reader.
    pub stderr: Arc<LineTail>,
    /// Why its process's connection ended, set by the transport.
    pub ended: EndReason,
    /// How many times it was started.
    pub starts: Arc<AtomicU32>,
    /// The bridge's tracker: the stderr reader and the lane's tasks run on it.
    pub tracker: TaskTracker,
    /// The server's token: cancelled when the bridge stops.
    pub ct: CancellationToken,
    /// Whether calls to a stdio server take the lane.
    pub call_lane: bool,
    /// The largest message accepted from a stdio server.
    pub max_message: usize,
}

impl Starter {
    /// Starts the server. The process group of a stdio server is put in `group` as soon as it
    /// exists, so an abandoned start can be killed.
    pub(super) async fn start(&self, group: &OnceLock<ProcessGroup>) -> Result<Started, String> {
        self.starts.fetch_add(1, Ordering::Relaxed);
        tracing::info!(server = %crate::shown::Shown(&self.spec.name), "starting MCP server");
        let mut lane = None;
        let closed = CancellationToken::new();
        let service = match &self.spec.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                *self.ended.lock().expect("end reason lock") = None;
                let lane_tasks = self.call_lane.then(|| self.tracker.clone());
                let (transport, stderr) = ChildTransport::spawn(
                    cmd,
                    &self.spec.name,
                    self.ended.clone(),
                    lane_tasks,
                    self.max_message,
                )
                .map_err(|e| format!("cannot run {command:?}: {e}"))?;
                let _ = group.set(transport.group());
                lane = transport.lane();
                if let Some(stderr) = stderr {
                    let drain = drain_stderr(stderr, self.stderr.clone(), self.spec.clone());
                    // Not stopped with the token at once: a server still writing to a closed
                    // pipe would die of it before its grace to exit.
                    let (ct, closed) = (self.ct.clone(), closed.clone());
                    let backstop = async move {
                        tokio::select! {
                            _ = ct.cancelled() => {}
                            _ = closed.cancelled() => {}
                        }
                        tokio::time::sleep(STDERR_AFTER_CLOSE).await;
                    };
                    self.tracker.spawn(
                        async move {
                            tokio::select! {
                                _ = drain => {}
                                _ = backstop => {}
                            }
                        }
                        .in_current_span(),
                    );
                }
                ().serve(transport)
                    .await
                    .map_err(|e| format!("initialize failed: {e}"))?
            }
            Transport::Http { url, headers } => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                for (k, v) in headers {
                    let name = http::HeaderName::try_from(k.as_str())
                        .map_err(|e| format!("header {k:?}: {e}"))?;
                    let value = http::HeaderValue::try_from(v.as_str())
                        .map_err(|e| format!("header {k:?}: {e}"))?;
                    config.custom_headers.insert(name, value);
                }
                let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                ().serve(transport)
                    .await
                    .map_err(|e| format!("initialize failed: {e}"))?
            }
            Transport::Sse { .. } => {
                return Err(
                    "the legacy SSE transport is not supported (the MCP SDK dropped it); \
                            most servers also serve streamable HTTP: use \"type\": \"http\""
                        .into(),
                )
            }
        };
        let peer = service.peer().clone();
        let info = peer.peer_info();
        // Servers that negotiated a protocol without `initialize` expect per-request metadata,
        // which only rmcp's own requests carry.
        let lane = lane.filter(|_| {
            info.as_ref()
                .is_some_and(|i| i.protocol_version.has_initialize())
        });
        let mut tools = peer
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        // `disabledTools`: hidden from the sandbox, its search and the tool cache.
        tools.retain(|t| !self.spec.tool_disabled(&t.name));
        let live = Live {
            peer,
            tools: Arc::new(tools),
            info,
            lane,
            closed,
            stop: CancellationToken::new(),
        };
        Ok(Started { service, live })
    }
}
