//! [`ChildTransport`]: the stdio transport to a downstream MCP server process.
//!
//! rmcp's own child transport drops an over-long message silently (the call then waits for its
//! deadline) and kills only the direct child. This one bounds messages and ends the connection
//! with a recorded reason when one is too long, skips non-JSON lines a server prints on stdout
//! (logged), runs the server in its own process group and kills the whole group when dropped, so
//! `npx`-style launchers leave nothing behind.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdout};
use tokio_util::task::TaskTracker;

use super::lane::{Lane, SharedStdin};
use super::read_chunk::ReadChunk;
use crate::lines::{FrameEvent, LineAssembler};

/// A server's stdout is read in pieces of this size at first...
const READ_MIN: usize = 4 << 10;
/// ... doubling, while reads fill them, up to this size.
const READ_MAX: usize = 64 << 10;

/// How long a server may take to exit after its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Why the connection was ended by the transport, if it was (shared with the caller).
pub type EndReason = Arc<Mutex<Option<String>>>;

/// The stdio transport of one spawned server.
pub struct ChildTransport {
    child: Option<Child>,
    pgid: Option<i32>,
    stdin: SharedStdin,
    lane: Option<Arc<Lane>>,
    stdout: ChildStdout,
    lines: LineAssembler,
    ready: VecDeque<RxJsonRpcMessage<RoleClient>>,
    chunk: ReadChunk,
    server: String,
    ended: EndReason,
    max_message: usize,
}

impl ChildTransport {
    /// Spawns `cmd` (stdin/stdout piped, stderr piped and returned) in its own process group,
    /// with a [`Lane`] for `tools/call` when `lane` names the tracker for its writes, accepting
    /// messages up to `max_message` bytes (`MCP_BRIDGE_MAX_SERVER_MESSAGE`).
    ///
    /// # Errors
    /// The spawn error.
    pub fn spawn(
        mut cmd: tokio::process::Command,
        server: &str,
        ended: EndReason,
        lane: Option<TaskTracker>,
        max_message: usize,
    ) -> std::io::Result<(ChildTransport, Option<tokio::process::ChildStderr>)> {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
        let stderr = child.stderr.take();
        let pgid = child.id().and_then(|p| i32::try_from(p).ok());
        let stdin = Arc::new(tokio::sync::Mutex::new(stdin));
        Ok((
            ChildTransport {
                child: Some(child),
                pgid,
                lane: lane.map(|tasks| Arc::new(Lane::new(stdin.clone(), tasks))),
                stdin,
                stdout,
                lines: LineAssembler::new(max_message),
                ready: VecDeque::new(),
                chunk: ReadChunk::new(READ_MIN, READ_MAX),
                server: server.to_string(),
                ended,
                max_message,
            },
            stderr,
        ))
    }

    /// The connection's fast lane for `tools/call` (see [`Lane`]), when it has one.
    pub fn lane(&self) -> Option<Arc<Lane>> {
        self.lane.clone()
    }

    /// The server's process group, to kill it from outside the connection.
    pub fn group(&self) -> ProcessGroup {
        ProcessGroup { pgid: self.pgid }
    }

    fn close_lane(&self) {
        if let Some(lane) = &self.lane {
            lane.close();
        }
    }

    fn end(&self, reason: String) {
        tracing::warn!(server = %crate::shown::Shown(&self.server), "{}", crate::shown::Shown(&reason));
        *self.ended.lock().expect("end reason lock") = Some(reason);
    }

    fn kill_group(&self) {
        self.group().kill();
    }
}

/// A spawned server's process group (the server and whatever its launcher started).
#[derive(Debug, Clone, Copy)]
pub struct ProcessGroup {
    pgid: Option<i32>,
}

impl ProcessGroup {
    /// Sends SIGKILL to every process of the group.
    pub fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        self.close_lane();
        self.kill_group();
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut guard = stdin.lock().await;
            let pipe = guard
                .as_mut()
                .ok_or_else(|| std::io::Error::other("the server's stdin is closed"))?;
            pipe.write_all(&line).await?;
            pipe.flush().await
        }
    }

    /// Cancel safe: partial lines stay in the assembler, parsed messages in `ready`.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(msg) = self.ready.pop_front() {
                return Some(msg);
            }
            let n = match self.stdout.read(self.chunk.space()).await {
                Ok(0) => {
                    self.close_lane();
                    return None;
                }
                Ok(n) => n,
                Err(e) => {
                    self.end(format!("reading its stdout failed: {e}"));
                    self.close_lane();
                    return None;
                }
            };
            let mut events = Vec::new();
            self.lines.push(self.chunk.filled(n), &mut events);
            for ev in events {
                match ev {
                    FrameEvent::Line(line) => {
                        let lane = self.lane.as_deref();
                        if lane.is_some_and(|lane| lane.route(strip_marks(&line))) {
                            continue;
                        }
                        if let Some(msg) = parse_line(&line, &self.server, lane) {
                            self.ready.push_back(msg);
                        }
                    }
                    FrameEvent::TooLong { .. } => {
                        self.end(too_long(self.max_message));
                        self.kill_group();
                        self.close_lane();
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.close_lane();
        drop(self.stdin.lock().await.take());
        if let Some(mut child) = self.child.take() {
            if tokio::time::timeout(EXIT_GRACE, child.wait())
                .await
                .is_err()
            {
                self.kill_group();
                let _ = child.wait().await;
            }
        }
        self.kill_group(); // whatever the launcher left in its group
        Ok(())
    }
}

/// Why the connection ended when a message was over `max` bytes: names the setting to raise.
pub(super) fn too_long(max: usize) -> String {
    format!(
        "it sent a message larger than MCP_BRIDGE_MAX_SERVER_MESSAGE ({} MiB), so the connection \
         was closed; raise MCP_BRIDGE_MAX_SERVER_MESSAGE (e.g. 256m) to accept larger results",
        max >> 20
    )
}

/// A line without a leading byte-order mark or a trailing carriage return.
fn strip_marks(line: &[u8]) -> &[u8] {
    let line = line
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// One stdout line as a message. Blank lines are skipped; a line that is not JSON-RPC is logged
/// and skipped; a malformed *response* (it has an id) becomes an error response for that id, so
/// the waiting call fails at once instead of at its deadline (a lane call through `lane`).
fn parse_line(
    line: &[u8],
    server: &str,
    lane: Option<&Lane>,
) -> Option<RxJsonRpcMessage<RoleClient>> {
    parse_line_logged(line, server, lane, &mut || true)
}

/// [`parse_line`], writing its log line only when `log()` says so (a remote server's limiter).
pub(super) fn parse_line_logged(
    line: &[u8],
    server: &str,
    lane: Option<&Lane>,
    log: &mut dyn FnMut() -> bool,
) -> Option<RxJsonRpcMessage<RoleClient>> {
    let line = strip_marks(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let err = match serde_json::from_slice(line) {
        Ok(msg) => return Some(msg),
        Err(e) => e,
    };
    let value: Option<serde_json::Value> = serde_json::from_slice(line).ok();
    let id = value.as_ref().and_then(|v| {
        let id = v.get("id").filter(|id| id.is_i64() || id.is_string())?;
        (v.get("result").is_some() || v.get("error").is_some()).then(|| id.clone())
    });
    match id {
        Some(id) => {
            let message = format!("the server sent a malformed response: {err}");
            if log() {
                tracing::warn!(server = %crate::shown::Shown(server), "{}", crate::shown::Shown(&message));
            }
            if lane.is_some_and(|lane| lane.route_malformed(&id, &err)) {
                return None;
            }
            let reply = serde_json::json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32603, "message": message},
            });
            serde_json::from_value(reply).ok()
        }
        None => {
            if log() {
                tracing::warn!(
                    server = %crate::shown::Shown(server),
                    "ignored a line (stdout) or event (SSE) that is not a JSON-RPC message ({err}): {}",
                    crate::shown::Shown(&String::from_utf8_lossy(&line[..line.len().min(200)]))
                );
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::lane::FIRST_ID;

    #[test]
    fn lines_become_messages_errors_or_nothing() {
        let lane = Lane::new(Arc::new(tokio::sync::Mutex::new(None)), Default::default());
        assert!(parse_line(b"  ", "s", Some(&lane)).is_none());
        assert!(parse_line(b"garbage from a server", "s", Some(&lane)).is_none());
        let ok = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#;
        assert!(matches!(
            parse_line(ok, "s", Some(&lane)),
            Some(rmcp::model::JsonRpcMessage::Response(_))
        ));
        let mut bom = b"\xEF\xBB\xBF".to_vec();
        bom.extend_from_slice(ok);
        bom.push(b'\r');
        assert!(parse_line(&bom, "s", Some(&lane)).is_some());
        let bad = br#"{"jsonrpc":"2.0","id":4,"result":{"content":"not a list"},"error":7}"#;
        match parse_line(bad, "s", Some(&lane)) {
            Some(rmcp::model::JsonRpcMessage::Error(e)) => {
                assert_eq!(e.id, Some(rmcp::model::NumberOrString::Number(4)));
                assert!(
                    e.error.message.contains("malformed response"),
                    "{}",
                    e.error.message
                );
            }
            other => panic!("expected an error response, got {other:?}"),
        }
    }

    #[test]
    fn lane_replies_are_recognised_with_a_byte_order_mark_and_crlf() {
        let lane = Lane::new(Arc::new(tokio::sync::Mutex::new(None)), Default::default());
        let mut line = b"\xEF\xBB\xBF".to_vec();
        line.extend_from_slice(
            format!(r#"{{"jsonrpc":"2.0","id":{FIRST_ID},"result":{{"content":[]}}}}"#).as_bytes(),
        );
        line.push(b'\r');
        assert!(!lane.route(&line), "as read, the mark hides it");
        assert!(
            lane.route(strip_marks(&line)),
            "what the reader hands the lane"
        );
    }

    #[test]
    fn an_unparsable_lane_reply_fails_its_call_with_one_clear_message() {
        let lane = Lane::new(Arc::new(tokio::sync::Mutex::new(None)), Default::default());
        let mut waiting = lane.expect_reply(FIRST_ID);
        // JSON with an id, but not a message either reader accepts (a repeated key).
        let bad = format!(r#"{{"jsonrpc":"2.0","id":{FIRST_ID},"id":{FIRST_ID},"result":{{}}}}"#);
        assert!(
            !lane.route(bad.as_bytes()),
            "the lane's own parse refuses it"
        );
        assert!(parse_line(bad.as_bytes(), "s", Some(&lane)).is_none());
        let err = waiting
            .try_recv()
            .expect("failed at once")
            .expect_err("an error");
        let text = err.into_service_error().to_string();
        assert_eq!(text.matches("malformed response").count(), 1, "{text}");
    }

    #[test]
    fn a_malformed_error_reply_reads_the_same_on_both_paths() {
        let lane = Lane::new(Arc::new(tokio::sync::Mutex::new(None)), Default::default());
        let mut waiting = lane.expect_reply(FIRST_ID);
        let on_lane = format!(r#"{{"jsonrpc":"2.0","id":{FIRST_ID},"error":7}}"#);
        assert!(
            !lane.route(on_lane.as_bytes()),
            "left to the transport's reader"
        );
        assert!(parse_line(on_lane.as_bytes(), "s", Some(&lane)).is_none());
        let lane_text = waiting
            .try_recv()
            .expect("failed at once")
            .expect_err("an error")
            .into_service_error()
            .to_string();
        let on_rmcp = br#"{"jsonrpc":"2.0","id":5,"error":7}"#;
        let Some(rmcp::model::JsonRpcMessage::Error(e)) = parse_line(on_rmcp, "s", None) else {
            panic!("an error response for rmcp's call");
        };
        let rmcp_text = rmcp::ServiceError::McpError(e.error).to_string();
        assert_eq!(lane_text, rmcp_text);
    }

    #[test]
    fn a_result_that_is_not_a_tool_result_reads_the_same_on_both_paths() {
        let lane = Lane::new(Arc::new(tokio::sync::Mutex::new(None)), Default::default());
        let mut waiting = lane.expect_reply(FIRST_ID);
        let line = format!(r#"{{"jsonrpc":"2.0","id":{FIRST_ID},"result":{{"content":7}}}}"#);
        assert!(lane.route(line.as_bytes()));
        let lane_text = waiting
            .try_recv()
            .expect("failed at once")
            .expect_err("an error")
            .into_service_error()
            .to_string();
        // On rmcp's path the same reply is read as a custom result: rmcp's call reports an
        // unexpected response, which `Upstream::call` words as the lane does.
        let rmcp_text = crate::upstream::lane::LaneError::not_a_tool_result()
            .into_service_error()
            .to_string();
        assert_eq!(lane_text, rmcp_text);
        assert!(
            lane_text.contains("malformed response: not a tool result"),
            "{lane_text}"
        );
    }
}
