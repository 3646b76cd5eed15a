//! [`Upstream`]: the cheap handle to one configured MCP server.
//!
//! The server's connection belongs to one task, its owner (`owner.rs`), spawned on first use on
//! the bridge's tracker. A call takes the live connection from the owner's published status
//! (one uncontended lock, no message), so the warm path has no channel hop; anything else
//! (a first start, a restart after the server died, a retry after backoff) is a request to the
//! owner. Consent is checked here, before anything is sent to the owner.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject, MetaObject,
    RequestMetaObject, Tool,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::elicit::{Flights, InFlight};
use super::lane::http_lane::Taken;
use super::lane::LaneError;
use super::live::SameList;
pub use super::live::{
    Live, START_TIMEOUT_SECS, STDERR_LINE_CHARS, STDERR_LINE_MAX, STDERR_TAIL_LINES,
};
use super::owner::{Connect, Owner, Refusal, Status};
use super::start::Starter;
use super::transport::EndReason;
use super::UpstreamError;
use crate::calls::RunScope;
use crate::config::ServerSpec;
use crate::lines::LineTail;

/// Connect requests queued for one server's owner.
const REQUESTS: usize = 64;

/// Where an upstream's tasks run and what stops them.
#[derive(Clone)]
pub struct UpstreamTasks {
    /// The bridge's tracker: every task of the upstream layer is spawned on it.
    pub tracker: TaskTracker,
    /// Cancelled at shutdown; each server's owner gets a child token.
    pub ct: CancellationToken,
    /// Whether proxied calls to stdio servers take the lane (`MCP_BRIDGE_CALL_LANE`).
    pub call_lane: bool,
    /// The largest message accepted from a stdio or legacy SSE server
    /// (`MCP_BRIDGE_MAX_SERVER_MESSAGE`).
    pub max_message: usize,
    /// The OAuth token store remote servers' sign-ins are read from (set by the pool).
    pub tokens: Option<super::oauth::store::TokenFile>,
    /// How long a server's question relayed to the user waits (`MCP_BRIDGE_QUESTION_TIMEOUT`).
    pub question_timeout: Duration,
    /// How a sign-in inside a run goes (`MCP_BRIDGE_LOGIN_TIMEOUT`, the metadata document).
    pub login: super::oauth::login::LoginOptions,
    /// The pinned tool definitions (`MCP_BRIDGE_PIN_TOOLS`); `None`: nothing is pinned.
    pub pins: Option<super::pins::Pins>,
}

impl Default for UpstreamTasks {
    /// A tracker and token of their own, the lane off, the default message cap.
    fn default() -> Self {
        UpstreamTasks {
            tracker: TaskTracker::default(),
            ct: CancellationToken::default(),
            call_lane: false,
            max_message: crate::config::DEFAULT_MAX_SERVER_MESSAGE,
            tokens: None,
            question_timeout: Duration::from_secs(300),
            login: Default::default(),
            pins: None,
        }
    }
}

impl UpstreamTasks {
    /// Tasks on a tracker of their own with a token of their own, the lane on (tests, CLI).
    pub fn detached() -> Self {
        UpstreamTasks {
            call_lane: true,
            ..Default::default()
        }
    }
}

/// One configured server: a handle to its owner task.
pub struct Upstream {
    /// Its definition.
    pub spec: Arc<ServerSpec>,
    status: Arc<Mutex<Status>>,
    stderr: Arc<LineTail>,
    ended: EndReason,
    starts: Arc<AtomicU32>,
    pub(super) tasks: UpstreamTasks,
    /// The owner's request channel, once it runs.
    owner: OnceLock<mpsc::Sender<Connect>>,
    /// Cancelled by the owner task when it has closed everything and ended.
    exited: CancellationToken,
    /// The tool list shared with this server's other processes.
    list: Arc<SameList>,
    /// The calls in flight, whose runs the server's questions go to.
    flights: Arc<Flights>,
    /// Sign-ins inside runs: one at a time, its outcome shared (`sign_in.rs`).
    pub(super) signing: Arc<super::sign_ins::SignIns>,
}

impl Upstream {
    /// A server that is not started yet, with tasks of its own (see [`UpstreamTasks::detached`]).
    pub fn new(spec: Arc<ServerSpec>) -> Self {
        Self::with_tasks(spec, UpstreamTasks::detached())
    }

    /// A server that is not started yet, whose tasks go on `tasks` (its token is the parent).
    pub fn with_tasks(spec: Arc<ServerSpec>, tasks: UpstreamTasks) -> Self {
        Self::sharing(spec, tasks, Arc::default())
    }

    /// Another process of the same server (a client's own, for `"perClient"`), not started
    /// yet, whose tasks go on `tasks`; it shares this one's tool list while they list the same.
    pub fn sibling(&self, tasks: UpstreamTasks) -> Self {
        Self::sharing(self.spec.clone(), tasks, self.list.clone())
    }

    /// This handle, signing in through `signing` (shared with the other handles of one
    /// caller: [`CallerSignIns`](super::sign_ins::CallerSignIns)).
    pub fn signing_through(mut self, signing: Arc<super::sign_ins::SignIns>) -> Self {
        self.signing = signing;
        self
    }

    fn sharing(spec: Arc<ServerSpec>, tasks: UpstreamTasks, list: Arc<SameList>) -> Self {
        let tasks = UpstreamTasks {
            ct: tasks.ct.child_token(),
            ..tasks
        };
        Upstream {
            spec,
            status: Arc::new(Mutex::new(Status::Idle)),
            stderr: Arc::new(LineTail::new(STDERR_TAIL_LINES, STDERR_LINE_CHARS)),
            ended: Arc::default(),
            starts: Arc::default(),
            tasks,
            owner: OnceLock::new(),
            exited: CancellationToken::new(),
            list,
            flights: Arc::default(),
            signing: Default::default(),
        }
    }

    /// Records a call of `run` in flight until the guard is dropped: the server's questions
    /// meanwhile go to `run`'s client.
    pub(super) fn in_flight(&self, run: Arc<crate::calls::RunScope>) -> InFlight {
        self.flights.enter(run)
    }

    /// How many times the server was started.
    pub fn starts(&self) -> u32 {
        self.starts.load(Ordering::Relaxed)
    }

    /// The connection if it is up, at once: the warm path of every call.
    /// The open connection itself, when there is one (the fast path of a repeated load keeps
    /// it to tell, by [`Live::is_closed`], that nothing about it changed).
    pub(super) fn live_handle(&self) -> Option<Arc<Live>> {
        self.live_arc()
    }

    fn live_arc(&self) -> Option<Arc<Live>> {
        match &*self.status.lock().expect("status lock") {
            Status::Live(l) if !l.is_closed() => Some(l.clone()),
            _ => None,
        }
    }

    /// `tool`'s behaviour hints in the running server's list: (`destructiveHint`,
    /// `readOnlyHint`), each `false` when not said or when the running server has no such tool
    /// (the call fails as an unknown tool); `None` when the server is not running.
    pub fn hints(&self, tool: &str) -> Option<(bool, bool)> {
        let live = self.live_arc()?;
        Some(tool_hints(&live.tools, tool).unwrap_or_default())
    }

    /// The connection if it is up, without starting anything or waiting for a start.
    pub fn live_now(&self) -> Option<Live> {
        self.live_arc().map(|l| (*l).clone())
    }

    /// The tool list of the connection if it is up: [`Upstream::live_now`] without copying the
    /// connection's handles (the warm path of every run's load, once per named server).
    pub fn live_tools(&self) -> Option<Arc<Vec<Tool>>> {
        match &*self.status.lock().expect("status lock") {
            Status::Live(l) if !l.is_closed() => Some(l.tools.clone()),
            _ => None,
        }
    }

    /// `idle`, `running`, `failed`, `needs sign-in`, `closed` or `not approved`: for listings. A server being
    /// started shows its state from before the start.
    pub fn state_name(&self) -> &'static str {
        if !self.spec.consent.permits() {
            return "not approved";
        }
        match &*self.status.lock().expect("status lock") {
            Status::Idle => "idle",
            Status::Live(l) if l.is_closed() => "closed",
            Status::Live(_) => "running",
            Status::Failed => "failed",
            Status::SignIn => "needs sign-in",
        }
    }

    /// Whether the last start met the server asking for sign-in (until a start succeeds).
    pub fn needs_sign_in(&self) -> bool {
        matches!(&*self.status.lock().expect("status lock"), Status::SignIn)
    }

    /// The connection, starting or restarting the server if needed.
    ///
    /// # Errors
    /// [`UpstreamError::Start`] when it cannot be started by `deadline` (or is in backoff, or
    /// the bridge is shutting down); [`UpstreamError::NotAllowed`] without consent.
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
        if let Some(live) = self.live_now() {
            return Ok(live);
        }
        let (reply, answer) = oneshot::channel();
        let sent = self.owner().send(Connect { deadline, reply }).await;
        let answer = match sent {
            Ok(()) => answer.await.unwrap_or(Err(Refusal::Stopped)),
            Err(_) => Err(Refusal::Stopped),
        };
        answer.map_err(|refusal| {
            let reason = match refusal {
                Refusal::Failed(reason) => reason,
                Refusal::Backoff { reason, left } => {
                    format!("{reason} (retrying in {:.1} s)", left.as_secs_f64())
                }
                Refusal::Stopped => "the bridge is shutting down".into(),
                // The seam for signing in inside a run: a caller that can ask the person
                // (URL elicitation) would start the sign-in here and call again.
                Refusal::AuthRequired => {
                    return UpstreamError::AuthRequired {
                        server: self.spec.name.clone(),
                    }
                }
            };
            UpstreamError::Start {
                server: self.spec.name.clone(),
                reason,
                stderr_tail: self.stderr_tail(),
            }
        })
    }

    /// The owner's request channel; the owner task is spawned on first use.
    fn owner(&self) -> &mpsc::Sender<Connect> {
        self.owner.get_or_init(|| {
            let (tx, rx) = mpsc::channel(REQUESTS);
            let owner = Owner {
                starter: Starter {
                    spec: self.spec.clone(),
                    stderr: self.stderr.clone(),
                    ended: self.ended.clone(),
                    starts: self.starts.clone(),
                    tracker: self.tasks.tracker.clone(),
                    ct: self.tasks.ct.clone(),
                    call_lane: self.tasks.call_lane,
                    max_message: self.tasks.max_message,
                    list: self.list.clone(),
                    tokens: self.tasks.tokens.clone(),
                    flights: self.flights.clone(),
                    question_timeout: self.tasks.question_timeout,
                    pins: self.tasks.pins.clone(),
                },
                status: self.status.clone(),
                failures: (0, None),
            };
            let exited = self.exited.clone().drop_guard();
            let span =
                tracing::info_span!("upstream", server = %crate::shown::Shown(&self.spec.name));
            self.tasks.tracker.spawn(
                async move {
                    let _exited = exited;
                    owner.run(rx).await;
                }
                .instrument(span),
            );
            tx
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
        self.call_in(tool, args, deadline, None).await
    }

    /// [`Upstream::call`] for `run`: its waits for a person (the server's questions relayed)
    /// do not count against `deadline`, and its trace context goes in the call's `_meta`.
    ///
    /// # Errors
    /// As [`Upstream::call`].
    pub(super) async fn call_in(
        &self,
        tool: &str,
        args: JsonObject,
        deadline: Instant,
        run: Option<&RunScope>,
    ) -> Result<CallToolResult, UpstreamError> {
        let waits = run.map(|r| &r.waits);
        let meta = run.and_then(|r| r.trace_meta.as_deref());
        // The warm path skips `connect`: its future (the whole handshake, ~8 KiB) would be
        // copied around on every call, which cost more CPU than the rest of the call.
        let live = match self.live_arc() {
            Some(live) => live,
            // A start after a wait for a person (a sign-in) has the time the wait took.
            None => {
                let by = waits.map_or(deadline, |w| w.extended(deadline));
                Arc::new(Box::pin(self.connect(by)).await?)
            }
        };
        // A tool changed or new since the server was pinned (`pins/`): refused until approved.
        // A held tool: the pins file is read for an approval given since (a refused call only).
        if live.held.holds(tool) && live.held.still_held_now(tool) {
            return Err(UpstreamError::ToolChanged {
                server: self.spec.name.clone(),
                tool: tool.into(),
            });
        }
        // The live list holds no refused tool (filtered at its source): the rules are read only
        // for a tool it lacks, to say which rule refuses it. A tool approved since it was held
        // is not in it as listed.
        if !live.tools.iter().any(|t| t.name == tool) && !live.held.approved_since(tool) {
            let available = live.tools.iter().map(|t| t.name.to_string()).collect();
            return Err(UpstreamError::missing_tool(&self.spec, tool, available));
        }
        let secs = deadline
            .saturating_duration_since(Instant::now())
            .as_secs_f64();
        let call = async {
            let lane_result = |r: Result<CallToolResult, LaneError>| {
                r.map(CallToolResponse::Complete)
                    .map_err(LaneError::into_service_error)
            };
            if let Some(lane) = &live.lane {
                return lane_result(lane.call_tool(tool, &args, meta).await);
            }
            if let Some(lane) = &live.http_lane {
                // Boxed: the HTTP request's future is large, and the stdio lane's path stays small.
                if let Taken::Done(r) = Box::pin(lane.call_tool(tool, &args, meta)).await {
                    return lane_result(r);
                }
            }
            // rmcp's request future is large; boxed, it stays off the lane's path.
            let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
            params.meta = meta.map(|m| RequestMetaObject(MetaObject(m.clone())));
            match Box::pin(live.peer.call_tool_once(params)).await {
                // A result rmcp could not read as a tool result: the lane's words.
                Err(rmcp::ServiceError::UnexpectedResponse) => {
                    Err(LaneError::not_a_tool_result().into_service_error())
                }
                r => r,
            }
        };
        let done = match waits {
            Some(waits) => waits.timeout_at(deadline, call).await,
            None => tokio::time::timeout_at(deadline, call)
                .await
                .map_err(|_| ()),
        };
        match done {
            Err(()) => Err(UpstreamError::Timeout { server: self.spec.name.clone(), tool: tool.into(), secs }),
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
            // The server refused the token (revoked, or a refresh was refused) or wants more
            // scopes (403 `insufficient_scope`): noted for `servers` and the next sign-in (with
            // the step-up's scope), and the connection is closed so the next call starts with
            // what is stored then. A run's call signs in and retries once (`sign_in.rs`).
            Ok(Err(e)) if super::oauth::needs_sign_in(&e) => {
                if let (Some(tokens), Ok(url)) =
                    (&self.tasks.tokens, super::oauth::remote_url(&self.spec))
                {
                    match super::oauth::sign_in_challenge(&e).flatten() {
                        // A step-up: the tokens still serve the other tools.
                        Some(scope) => {
                            super::oauth::note_step_up(&self.spec, url, tokens, scope).await
                        }
                        None => {
                            super::oauth::mark_needs_sign_in(&self.spec, url, tokens, None).await
                        }
                    }
                }
                live.stop.cancel();
                Err(UpstreamError::AuthRequired {
                    server: self.spec.name.clone(),
                })
            }
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

    /// Stops the owner (a start in progress is abandoned, the connection closed, the process
    /// group killed after a short grace) and waits for it to end.
    pub async fn shutdown(&self) {
        self.tasks.ct.cancel();
        if self.owner.get().is_some() {
            self.exited.cancelled().await;
        }
    }

    /// The server's last stderr lines (already redacted as they were read).
    pub fn stderr_tail(&self) -> String {
        self.stderr.joined()
    }
}

/// `tool`'s (`destructiveHint`, `readOnlyHint`) in `tools`, each `false` when not said; `None`
/// when `tools` has no such tool.
pub fn tool_hints(tools: &[rmcp::model::Tool], tool: &str) -> Option<(bool, bool)> {
    let t = tools.iter().find(|t| t.name == tool)?;
    let a = t.annotations.as_ref();
    Some((
        a.and_then(|a| a.destructive_hint).unwrap_or(false),
        a.and_then(|a| a.read_only_hint).unwrap_or(false),
    ))
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
}
