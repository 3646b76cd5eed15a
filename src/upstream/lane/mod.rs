//! [`Lane`]: `tools/call` written straight to a stdio server, past rmcp's service loop.
//!
//! rmcp sends each request through its service task and a spawned send task, and that costs
//! about 40 µs a call on a 2-vCPU VM, as much as the server's own work. On the lane the
//! caller writes the request line itself, and the transport's reader (still polled by rmcp's
//! loop) hands the reply straight to the caller, parsed once into a `CallToolResult`. Lane ids
//! start at [`FIRST_ID`], so they never meet rmcp's u32 counter. rmcp keeps everything else
//! on the connection: the handshake, lists, pings, notifications and server requests.
//!
//! The one entry point is [`Lane`]: the connection's owner makes one per stdio transport (when
//! `MCP_BRIDGE_CALL_LANE` is on), callers use [`Lane::call_tool`], and the transport's reader
//! offers it every line ([`Lane::route`], [`Lane::route_malformed`]) before rmcp sees it.
//! `wire.rs` writes and reads the lane's lines.

pub mod http_lane;
pub mod inject;
pub mod recording;
mod wire;

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolResult, ErrorData, JsonObject};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{oneshot, OwnedMutexGuard};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// The first id the lane uses (2^40: above any u32 counter, exact in a JavaScript number).
pub const FIRST_ID: u64 = 1 << 40;

/// The server's stdin, shared by rmcp's sends and the lane (one whole line per lock).
pub type SharedStdin = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

/// Why a lane call failed.
#[derive(Debug)]
pub enum LaneError {
    /// The connection ended (or was never usable) before the reply came.
    Closed,
    /// The server answered with a JSON-RPC error.
    Server(ErrorData),
    /// The server's reply was not a `CallToolResult` or an error.
    Malformed(String),
    /// The HTTP request failed (rmcp's streamable HTTP error: a refused token among them).
    Http(Box<http_lane::HttpError>),
}

impl LaneError {
    /// A result that is not a `CallToolResult`, worded as on rmcp's path (where rmcp reports
    /// an unexpected response).
    pub fn not_a_tool_result() -> Self {
        LaneError::Malformed("not a tool result".into())
    }

    /// The error rmcp's own call would have given, so callers handle both paths alike.
    pub fn into_service_error(self) -> rmcp::ServiceError {
        match self {
            LaneError::Server(e) => rmcp::ServiceError::McpError(e),
            LaneError::Malformed(m) => rmcp::ServiceError::McpError(ErrorData::internal_error(
                format!("the server sent a malformed response: {m}"),
                None,
            )),
            LaneError::Closed => rmcp::ServiceError::TransportClosed,
            // As rmcp's worker reports a failed send, so `oauth::sign_in_challenge` finds it.
            LaneError::Http(e) => rmcp::ServiceError::TransportSend(
                rmcp::transport::DynamicTransportError::from_parts(
                    "streamable-http-lane",
                    std::any::TypeId::of::<http_lane::HttpLane>(),
                    e,
                ),
            ),
        }
    }
}

type Reply = Result<CallToolResult, LaneError>;

/// The lane of one stdio connection.
pub struct Lane {
    stdin: SharedStdin,
    /// Where a write the pipe could not take at once finishes (the bridge's tracker).
    tasks: TaskTracker,
    /// The upstream's span, for those writes.
    span: tracing::Span,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    next: AtomicU64,
    closed: AtomicBool,
}

impl Lane {
    /// A lane writing to `stdin`, finishing slow writes on `tasks` in the current span.
    pub fn new(stdin: SharedStdin, tasks: TaskTracker) -> Self {
        Lane {
            stdin,
            tasks,
            span: tracing::Span::current(),
            pending: Mutex::default(),
            next: AtomicU64::new(FIRST_ID),
            closed: AtomicBool::new(false),
        }
    }

    /// Calls a tool and waits for its reply. Dropping the future withdraws the request: the
    /// server is sent `notifications/cancelled` and a late reply is discarded.
    ///
    /// # Errors
    /// [`LaneError`].
    pub async fn call_tool(
        self: &Arc<Self>,
        tool: &str,
        arguments: &JsonObject,
        meta: Option<&JsonObject>,
    ) -> Reply {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let line = wire::call_request(id, tool, arguments, meta);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("lane lock");
            if self.closed.load(Ordering::Acquire) {
                return Err(LaneError::Closed);
            }
            pending.insert(id, tx);
        }
        let mut waiting = Waiting {
            lane: self,
            id,
            answered: false,
        };
        self.write(line);
        let reply = rx.await.map_err(|_| LaneError::Closed);
        waiting.answered = true;
        reply?
    }

    /// Writes `line` whole, in order with every other write: at once when the pipe takes it,
    /// otherwise in a task of its own, so a caller that gives up never leaves half a line.
    fn write(self: &Arc<Self>, line: Vec<u8>) {
        let done = match self.stdin.clone().try_lock_owned() {
            Ok(mut guard) => match write_now(&mut guard, &line) {
                Some(n) if n == line.len() => return,
                Some(n) => Some((guard, n)),
                // The pipe is closed or broken: fail the callers now, not when the reader sees it.
                None => return self.close(),
            },
            Err(_) => None,
        };
        let stdin = self.stdin.clone();
        let lane = self.clone();
        let span = self.span.clone();
        self.tasks.spawn(
            async move {
                let (mut guard, from) = match done {
                    Some(held) => held,
                    None => (stdin.lock_owned().await, 0),
                };
                let ok = match guard.as_mut() {
                    Some(pipe) => pipe.write_all(&line[from..]).await.is_ok(),
                    None => false,
                };
                if !ok {
                    drop(guard);
                    lane.close();
                }
            }
            .instrument(span),
        );
    }

    /// Delivers `line` if it is a reply to a lane request. Returns false for anything else
    /// (rmcp's replies, requests, notifications), which the caller passes on to rmcp.
    pub fn route(&self, line: &[u8]) -> bool {
        #[derive(Deserialize)]
        struct Envelope<'a> {
            id: u64,
            #[serde(borrow, default)]
            result: Option<&'a RawValue>,
            #[serde(borrow, default)]
            error: Option<&'a RawValue>,
        }
        let Ok(env) = serde_json::from_slice::<Envelope<'_>>(line) else {
            return false;
        };
        if env.id < FIRST_ID || (env.result.is_none() && env.error.is_none()) {
            return false;
        }
        let reply = match (env.result, env.error) {
            (_, Some(err)) => match serde_json::from_str::<ErrorData>(err.get()) {
                Ok(e) => Err(LaneError::Server(e)),
                // Not ours to word: rmcp's reader refuses the line too, and the transport
                // fails the call with its words (`route_malformed`), as on rmcp's path.
                Err(_) => return false,
            },
            (Some(res), None) => wire::tool_result(res.get()).map_err(|e| {
                tracing::warn!(
                    id = env.id,
                    "the server's tools/call result is not a tool result: {e}"
                );
                LaneError::not_a_tool_result()
            }),
            (None, None) => unreachable!("checked above"),
        };
        let Some(tx) = self.pending.lock().expect("lane lock").remove(&env.id) else {
            tracing::debug!(id = env.id, "late reply to a withdrawn tools/call dropped");
            return true;
        };
        let _ = tx.send(reply);
        true
    }

    /// Fails the lane call of a reply with `id` that no reader could parse (`err`): true when
    /// the id is the lane's, whether or not its call is still waiting; false for rmcp's ids.
    pub fn route_malformed(&self, id: &serde_json::Value, err: &serde_json::Error) -> bool {
        match id.as_u64().filter(|n| *n >= FIRST_ID) {
            Some(n) => {
                // The lane's error adds the "malformed response" wording itself.
                self.fail(n, LaneError::Malformed(err.to_string()));
                true
            }
            None => false,
        }
    }

    /// Fails the lane call `id`, if it is waiting.
    fn fail(&self, id: u64, error: LaneError) {
        if let Some(tx) = self.pending.lock().expect("lane lock").remove(&id) {
            let _ = tx.send(Err(error));
        }
    }

    /// Ends the lane: every waiting call fails with [`LaneError::Closed`], later ones at once.
    pub fn close(&self) {
        let mut pending = self.pending.lock().expect("lane lock");
        self.closed.store(true, Ordering::Release);
        pending.clear();
    }

    /// Registers a waiting call `id` without sending anything (tests of the reply paths).
    #[cfg(test)]
    pub(super) fn expect_reply(&self, id: u64) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("lane lock").insert(id, tx);
        rx
    }

    fn withdraw(self: &Arc<Self>, id: u64) {
        let was_pending = self
            .pending
            .lock()
            .expect("lane lock")
            .remove(&id)
            .is_some();
        if was_pending && !self.closed.load(Ordering::Acquire) {
            let note = serde_json::json!({
                "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "the bridge's caller gave up (time limit or cancelled)"},
            });
            let mut line = note.to_string().into_bytes();
            line.push(b'\n');
            self.write(line);
        }
    }
}

/// Withdraws a request whose caller stopped waiting before the reply.
struct Waiting<'a> {
    lane: &'a Arc<Lane>,
    id: u64,
    answered: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.lane.withdraw(self.id);
        }
    }
}

/// One non-blocking write of as much of `line` as the pipe takes now: the count, or None when
/// the pipe is gone or broken.
fn write_now(guard: &mut OwnedMutexGuard<Option<ChildStdin>>, line: &[u8]) -> Option<usize> {
    let pipe = guard.as_mut()?;
    // SAFETY: write(2) on the pipe's own fd, which stays open while the guard is held, from a
    // valid buffer of `line.len()` bytes. Tokio set the fd non-blocking; EAGAIN means "later".
    let n = unsafe { libc::write(pipe.as_raw_fd(), line.as_ptr().cast(), line.len()) };
    if n >= 0 {
        return Some(n as usize);
    }
    match std::io::Error::last_os_error().kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Some(0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane() -> Lane {
        Lane::new(Arc::new(tokio::sync::Mutex::new(None)), TaskTracker::new())
    }

    fn waiting(lane: &Lane, id: u64) -> oneshot::Receiver<Reply> {
        lane.expect_reply(id)
    }

    #[test]
    fn replies_reach_their_callers_once_and_other_messages_pass_on() {
        let l = lane();
        let mut ok = waiting(&l, FIRST_ID);
        let mut err = waiting(&l, FIRST_ID + 1);
        let mut bad = waiting(&l, FIRST_ID + 2);
        let ok_line = format!(
            r#"{{"result":{{"content":[{{"type":"text","text":"hi"}}]}},"jsonrpc":"2.0","id":{FIRST_ID}}}"#
        );
        assert!(l.route(ok_line.as_bytes()));
        let r = ok.try_recv().expect("delivered").expect("a result");
        assert_eq!(r.content[0].as_text().expect("text").text, "hi");
        let e = format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32602,"message":"no such tool"}}}}"#,
            FIRST_ID + 1
        );
        assert!(l.route(e.as_bytes()));
        match err.try_recv().expect("delivered") {
            Err(LaneError::Server(e)) => assert_eq!(e.message, "no such tool"),
            other => panic!("{other:?}"),
        }
        let b = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"content":7}}}}"#,
            FIRST_ID + 2
        );
        assert!(l.route(b.as_bytes()));
        assert!(matches!(
            bad.try_recv().expect("delivered"),
            Err(LaneError::Malformed(_))
        ));

        // A late reply (the caller gave up) is swallowed, not passed to rmcp.
        assert!(l.route(ok_line.as_bytes()));
        // rmcp's own replies, server requests and notifications go on to rmcp.
        assert!(!l.route(br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#));
        assert!(!l.route(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#));
        assert!(!l.route(br#"{"jsonrpc":"2.0","id":1099511627776,"method":"ping"}"#));
        assert!(!l.route(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#));
        assert!(!l.route(b"not json"));
    }

    #[test]
    fn closing_fails_every_waiting_call_and_refuses_new_ones() {
        let l = lane();
        let mut a = waiting(&l, FIRST_ID);
        l.fail(FIRST_ID + 9, LaneError::Closed); // not waiting: nothing happens
        l.close();
        assert!(
            a.try_recv().is_err(),
            "the sender is gone: the caller sees Closed"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let l = Arc::new(l);
        assert!(matches!(
            rt.block_on(l.call_tool("echo", &JsonObject::new(), None)),
            Err(LaneError::Closed)
        ));
    }

    #[tokio::test]
    async fn a_call_on_a_closed_pipe_fails_at_once() {
        let l = Arc::new(lane()); // stdin already gone
        let none = JsonObject::new();
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            l.call_tool("echo", &none, None),
        )
        .await
        .expect("no hang");
        assert!(matches!(r, Err(LaneError::Closed)), "{r:?}");
    }

    #[tokio::test]
    async fn a_call_writes_one_request_line_and_withdrawing_it_tells_the_server() {
        use tokio::io::AsyncBufReadExt;
        let mut cat = tokio::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn cat");
        let stdin = cat.stdin.take();
        let mut sent = tokio::io::BufReader::new(cat.stdout.take().expect("stdout")).lines();
        let l = Arc::new(Lane::new(
            Arc::new(tokio::sync::Mutex::new(stdin)),
            TaskTracker::new(),
        ));
        let mut args = serde_json::Map::new();
        args.insert("text".into(), "hi".into());
        let gave_up = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            l.call_tool("echo", &args, None),
        )
        .await;
        assert!(gave_up.is_err(), "nobody answers: the caller gives up");
        let line = |s: Option<String>| -> serde_json::Value {
            serde_json::from_str(&s.expect("a line")).expect("JSON")
        };
        assert_eq!(
            line(sent.next_line().await.expect("read")),
            serde_json::json!({"jsonrpc": "2.0", "id": FIRST_ID, "method": "tools/call",
                               "params": {"name": "echo", "arguments": {"text": "hi"}}})
        );
        let cancel = line(sent.next_line().await.expect("read"));
        assert_eq!(cancel["method"], "notifications/cancelled");
        assert_eq!(cancel["params"]["requestId"], FIRST_ID);
        assert!(l.pending.lock().expect("lock").is_empty());
    }
}
