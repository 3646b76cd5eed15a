//! [`HttpLane`]: `tools/call` POSTed to a streamable HTTP server from the calling task, past
//! rmcp's service loop and its HTTP worker.
//!
//! On rmcp's path a call crosses four tasks each way (the caller, the service loop, the worker,
//! the worker's task for that POST); on the lane the caller makes the POST itself with rmcp's
//! own HTTP client (`StreamableHttpClient`: the same status handling, event-stream parsing and
//! size bound, and under OAuth the same token, refresh and retry), on the session rmcp's worker
//! made ([`SessionSeen`]). What the server sends on the call's stream besides the reply (its
//! questions, progress, log messages) goes to rmcp's service through [`super::inject`], and
//! rmcp answers it as on its own path. rmcp keeps everything else: the handshake, a new session
//! after a 404, lists, the standing GET stream, notifications.
//!
//! The lane takes a call only on a session it has seen, of a protocol revision before
//! 2026-07-28 (whose per-request headers only rmcp's worker writes); else, and when the server
//! says the session expired before reading the call, the caller takes rmcp's path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use http::HeaderName;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, ClientRequest,
    JsonObject, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, JsonRpcVersion2_0, MetaObject,
    NumberOrString, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::recording::{Session, SessionSeen};
use super::{LaneError, FIRST_ID};

/// rmcp's HTTP error, as its streamable HTTP client gives it.
pub type HttpError = StreamableHttpError<reqwest::Error>;
type Events = BoxStream<'static, Result<Sse, SseError>>;

/// The most times a call's event stream is resumed (`Last-Event-ID`) after it ends early.
pub const MAX_RESUMES: usize = 3;
/// The wait before a resume when the server named none (`retry`).
pub const RESUME_WAIT: Duration = Duration::from_secs(1);
/// The longest wait before a resume, whatever the server's `retry` says.
pub const RESUME_WAIT_MAX: Duration = Duration::from_secs(10);

/// The longest a call's stream is read on after its reply.
pub const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// rmcp's streamable HTTP client as the lane uses it (object-safe: plain or authorizing).
#[async_trait::async_trait]
pub trait Poster: Send + Sync {
    /// POSTs one message on `session`.
    async fn post(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session: &Session,
        max_event: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError>;

    /// Resumes a stream after `last_event_id` (a GET).
    async fn resume(
        &self,
        uri: Arc<str>,
        session: &Session,
        last_event_id: String,
        max_event: usize,
    ) -> Result<Events, HttpError>;
}

#[async_trait::async_trait]
impl<C: StreamableHttpClient<Error = reqwest::Error> + Sync> Poster for C {
    async fn post(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session: &Session,
        max_event: usize,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session.id.clone(),
            None,
            session.headers.clone(),
            max_event,
        )
        .await
    }

    async fn resume(
        &self,
        uri: Arc<str>,
        session: &Session,
        last_event_id: String,
        max_event: usize,
    ) -> Result<Events, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session.id.clone(),
            Some(last_event_id),
            None,
            session.headers.clone(),
            max_event,
        )
        .await
    }
}

/// What became of a call offered to the lane.
pub enum Taken {
    /// The lane made the call: its outcome.
    Done(Result<CallToolResult, LaneError>),
    /// Not sent, or refused unread (an expired session): rmcp's path makes it.
    NotTaken,
}

/// The lane of one streamable HTTP connection.
pub struct HttpLane {
    client: Arc<dyn Poster>,
    uri: Arc<str>,
    seen: Arc<SessionSeen>,
    to_rmcp: mpsc::Sender<ServerJsonRpcMessage>,
    max_event: usize,
    next: AtomicU64,
    /// Where a withdrawn call's `notifications/cancelled` is sent from.
    tasks: TaskTracker,
    span: tracing::Span,
}

impl HttpLane {
    /// A lane POSTing to `uri` with `client` on the session `seen` records, handing other
    /// messages to rmcp through `to_rmcp`.
    pub fn new(
        client: Arc<dyn Poster>,
        uri: Arc<str>,
        seen: Arc<SessionSeen>,
        to_rmcp: mpsc::Sender<ServerJsonRpcMessage>,
        max_event: usize,
        tasks: TaskTracker,
    ) -> Self {
        HttpLane {
            client,
            uri,
            seen,
            to_rmcp,
            max_event,
            next: AtomicU64::new(FIRST_ID),
            tasks,
            span: tracing::Span::current(),
        }
    }

    /// The session to send on, when the lane may: one seen, of a revision before 2026-07-28.
    fn session(&self) -> Option<Session> {
        let session = self.seen.get()?;
        let name = HeaderName::from_static("mcp-protocol-version");
        let version = session.headers.get(&name)?.to_str().ok()?;
        (version < "2026-07-28").then_some(session)
    }

    /// Calls `tool` with `arguments` (copied into the request). Dropping the future withdraws
    /// the call: the server is sent `notifications/cancelled`.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: &JsonObject,
        meta: Option<&JsonObject>,
    ) -> Taken {
        let Some(session) = self.session() else {
            return Taken::NotTaken;
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let request_id = NumberOrString::Number(id as i64);
        let mut params =
            CallToolRequestParams::new(tool.to_string()).with_arguments(arguments.clone());
        params.meta = meta.map(|m| RequestMetaObject(MetaObject(m.clone())));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let message = JsonRpcMessage::Request(JsonRpcRequest::new(request_id.clone(), request));
        let mut waiting = Withdraw {
            lane: self,
            session: &session,
            id: Some(request_id.clone()),
        };
        let sent = self
            .client
            .post(self.uri.clone(), message, &session, self.max_event)
            .await;
        let outcome = match sent {
            Err(StreamableHttpError::SessionExpired) => {
                waiting.id = None; // refused unread: nothing to withdraw
                return Taken::NotTaken;
            }
            Err(e) => Err(LaneError::Http(Box::new(e))),
            Ok(StreamableHttpPostResponse::Json(message, _)) => {
                match self.mine(message, &request_id).await {
                    Some(reply) => reply,
                    None => Err(LaneError::Closed),
                }
            }
            Ok(StreamableHttpPostResponse::Sse(events, _)) => {
                self.read_events(events, &session, &request_id).await
            }
            Ok(StreamableHttpPostResponse::Accepted) => {
                Err(LaneError::Malformed("202 Accepted for a request".into()))
            }
            Ok(_) => Err(LaneError::Malformed(
                "an answer rmcp's client does not know".into(),
            )),
        };
        waiting.id = None;
        Taken::Done(outcome)
    }

    /// Reads the call's event stream until its reply, resuming it after an early end.
    async fn read_events(
        &self,
        mut events: Events,
        session: &Session,
        id: &NumberOrString,
    ) -> Result<CallToolResult, LaneError> {
        let (mut last_event, mut wait, mut resumes) = (None::<String>, RESUME_WAIT, 0);
        loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(_)) | None => {
                    let Some(last) = last_event.clone().filter(|_| resumes < MAX_RESUMES) else {
                        return Err(LaneError::Closed);
                    };
                    resumes += 1;
                    tokio::time::sleep(wait).await;
                    events = self
                        .client
                        .resume(self.uri.clone(), session, last, self.max_event)
                        .await
                        .map_err(|e| LaneError::Http(Box::new(e)))?;
                    continue;
                }
            };
            if let Some(event_id) = event.id {
                last_event = Some(event_id);
            }
            if let Some(ms) = event.retry {
                wait = Duration::from_millis(ms).min(RESUME_WAIT_MAX);
            }
            let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                continue; // a priming event, or a comment
            };
            let message = match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(error = %e, "an event on a tools/call stream is not a JSON-RPC message");
                    continue;
                }
            };
            if let Some(reply) = self.mine(message, id).await {
                self.finish(events);
                return reply;
            }
        }
    }

    /// Reads the rest of a call's stream after its reply, as rmcp's worker does, so that the
    /// server ends it rather than sees its client leave (which costs some servers more than the
    /// call: measured, benches/RESULTS.md); what else comes on it goes to rmcp. At once when
    /// the end has already come, else in a task of its own, for at most [`DRAIN_WAIT`].
    fn finish(&self, mut events: Events) {
        use futures::FutureExt;
        let first = match events.next().now_or_never() {
            Some(None) => return,
            Some(Some(event)) => Some(event),
            None => None,
        };
        let (to_rmcp, gone) = (self.to_rmcp.clone(), self.to_rmcp.clone());
        let drain = async move {
            let rest = futures::stream::iter(first).chain(events);
            let mut rest = std::pin::pin!(rest);
            while let Some(Ok(event)) = rest.next().await {
                let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                    continue;
                };
                if let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                    let _ = to_rmcp.send(message).await;
                }
            }
        };
        self.tasks.spawn(
            async move {
                // The connection's end (rmcp's service gone) ends the read too.
                tokio::select! {
                    _ = tokio::time::timeout(DRAIN_WAIT, drain) => {}
                    _ = gone.closed() => {}
                }
            }
            .instrument(self.span.clone()),
        );
    }

    /// The reply to `id`, or `None` after handing any other message to rmcp.
    async fn mine(
        &self,
        message: ServerJsonRpcMessage,
        id: &NumberOrString,
    ) -> Option<Result<CallToolResult, LaneError>> {
        match message {
            JsonRpcMessage::Response(r) if r.id == *id => Some(match r.result {
                ServerResult::CallToolResult(result) => Ok(result),
                _ => Err(LaneError::not_a_tool_result()),
            }),
            JsonRpcMessage::Error(e) if e.id.as_ref() == Some(id) => {
                Some(Err(LaneError::Server(e.error)))
            }
            other => {
                // rmcp's service gone: the connection is ending, and so will this call.
                let _ = self.to_rmcp.send(other).await;
                None
            }
        }
    }

    /// Sends `notifications/cancelled` for `id` in a task of its own.
    fn withdraw(&self, session: Session, id: NumberOrString) {
        let note = CancelledNotification::new(CancelledNotificationParam::new(
            Some(id),
            Some("the bridge's caller gave up (time limit or cancelled)".into()),
        ));
        let message = JsonRpcMessage::Notification(JsonRpcNotification {
            jsonrpc: JsonRpcVersion2_0,
            notification: ClientNotification::CancelledNotification(note),
        });
        let (client, uri, max) = (self.client.clone(), self.uri.clone(), self.max_event);
        self.tasks.spawn(
            async move {
                if let Err(e) = client.post(uri, message, &session, max).await {
                    tracing::debug!(error = %e, "notifications/cancelled not delivered");
                }
            }
            .instrument(self.span.clone()),
        );
    }
}

/// Withdraws a call whose caller stopped waiting before its reply.
struct Withdraw<'a> {
    lane: &'a HttpLane,
    session: &'a Session,
    id: Option<NumberOrString>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.lane.withdraw(self.session.clone(), id);
        }
    }
}
