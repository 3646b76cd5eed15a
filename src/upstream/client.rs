//! [`Upstream`]: one configured MCP server and its warm client.
//!
//! The connection (`RunningService`) is owned by a single task that waits for it to end and
//! then marks it closed; callers share a cheap [`Live`] clone holding the `Peer`. A server is
//! started on first use, reused while alive, restarted on the next use after it dies, and
//! after a failed start waits an exponentially growing backoff before trying again.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject, ServerPeerInfo, Tool,
};
use rmcp::service::{Peer, RoleClient};
use rmcp::ServiceExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lane::{Lane, LaneError};
use super::transport::{ChildTransport, EndReason};
use super::UpstreamError;
use crate::config::{ServerSpec, Transport};
use crate::lines::{FrameEvent, LineAssembler, LineTail};

/// Longest a server may take to start and list its tools.
pub const START_TIMEOUT_SECS: u64 = 30;
/// First retry delay after a failed start; doubles per failure.
pub const BACKOFF_START_MS: u64 = 250;
/// Longest retry delay.
pub const BACKOFF_MAX_SECS: u64 = 30;
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
    lane: Option<Arc<Lane>>,
    closed: CancellationToken,
    stop: CancellationToken,
}

impl Live {
    /// True once the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }
}

enum State {
    Idle,
    Live(Live),
    Failed {
        at: Instant,
        failures: u32,
        error: UpstreamError,
    },
}

impl State {
    /// The connection, if it is up and its transport still open.
    fn usable(&self) -> Option<Live> {
        match self {
            State::Live(l) if !l.is_closed() => Some(l.clone()),
            _ => None,
        }
    }
}

/// One configured server.
pub struct Upstream {
    /// Its definition.
    pub spec: Arc<ServerSpec>,
    state: tokio::sync::Mutex<State>,
    stderr: Arc<LineTail>,
    ended: EndReason,
    starts: std::sync::atomic::AtomicU32,
}

impl Upstream {
    /// A server that is not started yet.
    pub fn new(spec: Arc<ServerSpec>) -> Self {
        Upstream {
            spec,
            state: tokio::sync::Mutex::new(State::Idle),
            stderr: Arc::new(LineTail::new(STDERR_TAIL_LINES, STDERR_LINE_CHARS)),
            ended: Arc::default(),
            starts: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// How many times the server was started.
    pub fn starts(&self) -> u32 {
        self.starts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The connection if it is up and nobody holds the state (a start or restart), at once.
    fn live_idle(&self) -> Option<Live> {
        self.state.try_lock().ok()?.usable()
    }

    /// The connection if it is up, without starting anything.
    pub async fn live_now(&self) -> Option<Live> {
        self.state.lock().await.usable()
    }

    /// `idle`, `running`, `failed`, `closed` or `not approved`: for listings.
    pub async fn state_name(&self) -> &'static str {
        if !self.spec.consent.permits() {
            return "not approved";
        }
        match &*self.state.lock().await {
            State::Idle => "idle",
            State::Live(l) if l.is_closed() => "closed",
            State::Live(_) => "running",
            State::Failed { .. } => "failed",
        }
    }

    /// The connection, starting or restarting the server if needed.
    ///
    /// # Errors
    /// [`UpstreamError::Start`] when it cannot be started by `deadline` (or is in backoff).
    pub async fn connect(&self, deadline: Instant) -> Result<Live, UpstreamError> {
        // Consent comes first: nothing of a project's unapproved server runs, by any path.
        if let Some(message) = self
            .spec
            .consent
            .refusal(&self.spec.name, &self.spec.source)
        {
            return Err(UpstreamError::NotAllowed {
                server: self.spec.name.clone(),
                message,
            });
        }
        let mut state = self.state.lock().await;
        if let Some(live) = state.usable() {
            return Ok(live);
        }
        if let State::Failed {
            at,
            failures,
            error,
        } = &*state
        {
            let wait = backoff(*failures);
            if at.elapsed() < wait {
                let UpstreamError::Start {
                    reason,
                    stderr_tail,
                    ..
                } = error
                else {
                    return Err(error.clone());
                };
                return Err(UpstreamError::Start {
                    server: self.spec.name.clone(),
                    reason: format!(
                        "{reason} (retrying in {:.1} s)",
                        (wait - at.elapsed()).as_secs_f64()
                    ),
                    stderr_tail: stderr_tail.clone(),
                });
            }
        }
        let failures = match &*state {
            State::Failed { failures, .. } => *failures,
            _ => 0,
        };
        let began = Instant::now();
        let limit = deadline.min(began + Duration::from_secs(START_TIMEOUT_SECS));
        match tokio::time::timeout_at(limit, self.start()).await {
            Ok(Ok(live)) => {
                *state = State::Live(live.clone());
                Ok(live)
            }
            result => {
                let reason = match result {
                    Ok(Err(reason)) => reason,
                    _ => format!("no answer within {:.1} s", began.elapsed().as_secs_f64()),
                };
                tokio::time::sleep(Duration::from_millis(50)).await; // let the stderr reader catch up
                let error = UpstreamError::Start {
                    server: self.spec.name.clone(),
                    reason: self.spec.redact(&reason),
                    stderr_tail: self.stderr_tail(),
                };
                *state = State::Failed {
                    at: Instant::now(),
                    failures: failures + 1,
                    error: error.clone(),
                };
                Err(error)
            }
        }
    }

    async fn start(&self) -> Result<Live, String> {
        self.starts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(server = %self.spec.name, "starting MCP server");
        let mut lane = None;
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
                let (transport, stderr) =
                    ChildTransport::spawn(cmd, &self.spec.name, self.ended.clone())
                        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
                lane = Some(transport.lane());
                if let Some(stderr) = stderr {
                    tokio::spawn(drain_stderr(stderr, self.stderr.clone(), self.spec.clone()));
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
        let closed = CancellationToken::new();
        let stop = CancellationToken::new();
        let (c, s, name) = (closed.clone(), stop.clone(), self.spec.name.clone());
        let cancel = service.cancellation_token();
        let stop_waiter = stop.clone();
        tokio::spawn(async move {
            s.cancelled().await;
            cancel.cancel();
        });
        tokio::spawn(async move {
            let reason = service.waiting().await;
            tracing::info!(server = %name, reason = ?reason.ok(), "MCP server connection ended");
            c.cancel();
            stop_waiter.cancel(); // ends the stopper task too
        });
        Ok(Live {
            peer,
            tools: Arc::new(tools),
            info,
            lane,
            closed,
            stop,
        })
    }

    /// Calls `tool` with `args`, finishing by `deadline`.
    ///
    /// # Errors
    /// Unknown tool, start failure, crash (with stderr tail), timeout, or the tool's own error.
    pub async fn call(
        &self,
        tool: &str,
        args: JsonObject,
        deadline: Instant,
    ) -> Result<CallToolResult, UpstreamError> {
        // The warm path skips `connect`: its future (the whole handshake, ~8 KiB) would be
        // copied around on every call, which cost more CPU than the rest of the call.
        let live = match self.live_idle() {
            Some(live) => live,
            None => Box::pin(self.connect(deadline)).await?,
        };
        if self.spec.tool_disabled(tool) {
            return Err(UpstreamError::ToolDisabled {
                server: self.spec.name.clone(),
                tool: tool.to_string(),
                file: self.spec.source.display().to_string(),
            });
        }
        if !live.tools.iter().any(|t| t.name == tool) {
            return Err(UpstreamError::UnknownTool {
                server: self.spec.name.clone(),
                tool: tool.to_string(),
                available: live.tools.iter().map(|t| t.name.to_string()).collect(),
            });
        }
        let secs = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        let call = async {
            match &live.lane {
                Some(lane) => lane
                    .call_tool(tool, &args)
                    .await
                    .map(CallToolResponse::Complete)
                    .map_err(LaneError::into_service_error),
                // rmcp's request future is large; boxed, it stays off the lane's path.
                None => {
                    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
                    Box::pin(live.peer.call_tool_once(params)).await
                }
            }
        };
        match tokio::time::timeout_at(deadline, call).await {
            Err(_) => Err(UpstreamError::Timeout { server: self.spec.name.clone(), tool: tool.into(), secs }),
            Ok(Ok(CallToolResponse::Complete(r))) => Ok(r),
            Ok(Ok(_)) => Err(UpstreamError::Tool {
                server: self.spec.name.clone(),
                tool: tool.into(),
                message: "the server asked for client input or created a task; the bridge does not support that".into(),
            }),
            Ok(Err(rmcp::ServiceError::McpError(e))) => Err(UpstreamError::Tool {
                server: self.spec.name.clone(),
                tool: tool.into(),
                message: e.message.to_string(),
            }),
            Ok(Err(e)) => {
                // Transport-level failure: the server is gone or broken. Let the stderr reader
                // and the owner task catch up, then restart on next use.
                let _ = tokio::time::timeout(Duration::from_millis(300), live.closed.cancelled()).await;
                live.stop.cancel();
                let reason = match self.ended.lock().expect("end reason lock").clone() {
                    Some(why) => why,
                    None => e.to_string(),
                };
                Err(UpstreamError::Crashed {
                    server: self.spec.name.clone(),
                    tool: tool.into(),
                    reason: self.spec.redact(&reason),
                    stderr_tail: self.stderr_tail(),
                })
            }
        }
    }

    /// Closes the connection, if any.
    pub async fn shutdown(&self) {
        if let State::Live(l) = &*self.state.lock().await {
            l.stop.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(3), l.closed.cancelled()).await;
        }
    }

    /// The server's last stderr lines (already redacted as they were read).
    pub fn stderr_tail(&self) -> String {
        self.stderr.joined()
    }
}

fn backoff(failures: u32) -> Duration {
    let ms = BACKOFF_START_MS.saturating_mul(1u64 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms).min(Duration::from_secs(BACKOFF_MAX_SECS))
}

async fn drain_stderr(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<LineTail>,
    spec: Arc<ServerSpec>,
) {
    let server = &spec.name;
    use tokio::io::AsyncReadExt;
    let mut lines = LineAssembler::new(STDERR_LINE_MAX);
    let mut chunk = vec![0u8; 16 << 10];
    let mut events = Vec::new();
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        lines.push(&chunk[..n], &mut events);
        for ev in events.drain(..) {
            let line = match ev {
                FrameEvent::Line(l) => spec.redact(&String::from_utf8_lossy(&l)),
                FrameEvent::TooLong { seen } => {
                    format!("[a stderr line over {seen} bytes was cut]")
                }
            };
            tracing::debug!(target: "upstream", server = %server, "{line}");
            tail.push(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_call_does_not_carry_the_connect_state_machine() {
        // `connect` (handshake and all) is a future of ~8 KiB; inside `call` it was copied on
        // every proxied call, more CPU than the rest of the bridge's work on it.
        let stdio = crate::config::Transport::Stdio {
            command: "x".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        };
        let spec = ServerSpec::new("a", stdio, std::path::Path::new("/x.json"));
        let up = Upstream::new(Arc::new(spec));
        let call = up.call("t", JsonObject::new(), Instant::now());
        assert!(
            std::mem::size_of_val(&call) <= 2048,
            "{} bytes",
            std::mem::size_of_val(&call)
        );
    }

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_millis(1000));
        assert_eq!(backoff(40), Duration::from_secs(BACKOFF_MAX_SECS));
    }
}
