//! The legacy HTTP+SSE transport (MCP 2024-11-05) to a remote server, which rmcp 3.9 has no
//! client for: a GET event stream whose first `endpoint` event names the URL (same origin) to
//! POST messages to; the server's messages arrive as `message` events on that stream.
//!
//! Everything the server sends is bounded: the wait for the endpoint event
//! ([`ENDPOINT_WAIT`]), each event's size (`MCP_BRIDGE_MAX_SERVER_MESSAGE` plus room for the
//! field names), each POST's wait and the reply body read. The stream's end ends the connection
//! with its reason recorded. Headers come from one [`RemoteHeaders`] for the GET and every POST.

mod bound;
mod endpoint;

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};
use reqwest::Url;
use rmcp::service::{ClientInitializeError, RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use sse_stream::{Sse, SseStream};

pub use bound::{EventBound, TooLarge};
pub use endpoint::{resolve, EndpointError};

use super::remote_headers::{AuthorizeError, RemoteHeaders};
use super::transport::{parse_line_logged, too_long, EndReason};
use crate::log_limit::LogLimit;

/// How long the server has, from the GET, to answer and send its `endpoint` event.
pub const ENDPOINT_WAIT: Duration = Duration::from_secs(10);
/// How long one POST of a message may take to be answered (the reply itself comes on the
/// stream).
const POST_WAIT: Duration = Duration::from_secs(30);
/// How long opening a TCP (and TLS) connection may take.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// Room an event may take beyond the message it carries: field names, an id, line ends.
const EVENT_OVERHEAD: usize = 64 << 10;
/// The most of a POST's reply body read (then dropped): enough to reuse the connection.
const POST_BODY_MAX: usize = 64 << 10;
/// The longest `WWW-Authenticate` value kept for sign-in.
const MAX_CHALLENGE: usize = 4096;
/// How much of a server's unexpected text goes into a log line or an error.
const SHOWN_MAX: usize = 200;

/// Why the legacy SSE transport failed. No variant's text holds a header value or a body the
/// server sent beyond [`SHOWN_MAX`] characters.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The URL in the entry is not a valid http(s) URL.
    #[error("not an http(s) URL: {0}")]
    Url(String),
    /// The request could not be made or its answer read (the error names no URL).
    #[error("{0}")]
    Request(#[source] reqwest::Error),
    /// The server answered the GET or a POST with a failure status.
    #[error("HTTP {status} to the {what}")]
    Status {
        /// `GET` of the event stream or `POST` of a message.
        what: &'static str,
        /// The status.
        status: StatusCode,
    },
    /// The server wants sign-in (401, or 403 with a challenge); `challenge` is its
    /// `WWW-Authenticate` (at most 4 KiB), for the sign-in to start from; not in the text.
    #[error("HTTP {status} to the {what}: the server needs sign-in")]
    AuthRequired {
        /// `GET of the event stream` or `POST of a message`.
        what: &'static str,
        /// 401 or 403.
        status: StatusCode,
        /// The `WWW-Authenticate` header, when it had one.
        challenge: Option<String>,
    },
    /// The GET's answer is not an event stream.
    #[error("the event stream's answer is {0:?}, not text/event-stream")]
    NotEventStream(String),
    /// No endpoint event within the wait ([`ENDPOINT_WAIT`]).
    #[error("no endpoint event within {:?} of connecting", .0)]
    NoEndpoint(Duration),
    /// The first event is not `endpoint`.
    #[error("its first event is {0:?}, not \"endpoint\"")]
    FirstEvent(String),
    /// The stream ended or failed before the endpoint event.
    #[error("the event stream ended before its endpoint event: {0}")]
    EndedEarly(String),
    /// The endpoint event was refused.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The sign-in seam could not supply a header.
    #[error("sign-in: {0}")]
    Authorize(#[from] AuthorizeError),
    /// A POST did not get an answer within its bound.
    #[error("the server did not accept a message within {} s", POST_WAIT.as_secs())]
    PostTimeout,
    /// A message could not be serialized.
    #[error("message: {0}")]
    Json(#[from] serde_json::Error),
    /// The connection was closed.
    #[error("the connection is closed")]
    Closed,
}

fn request_error(e: reqwest::Error) -> SseError {
    SseError::Request(e.without_url())
}

/// The failure of a stream's body: a read error or an event over the bound.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("{0}")]
    Read(#[source] reqwest::Error),
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
}

type Events = BoxStream<'static, Result<Sse, sse_stream::Error>>;

/// One legacy SSE connection, as an rmcp client transport.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Arc<Url>,
    headers: RemoteHeaders,
    events: Option<Events>,
    server: String,
    ended: EndReason,
    max_message: usize,
    /// Bounds the log lines the server's stray or malformed events cause.
    log: LogLimit,
}

impl std::fmt::Debug for SseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseTransport")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl SseTransport {
    /// Opens the event stream at `url` with `headers` and waits (at most [`ENDPOINT_WAIT`])
    /// for its `endpoint` event. Messages up to `max_message` bytes are accepted; why the
    /// connection ends is put in `ended`.
    ///
    /// # Errors
    /// See [`SseError`]: a refused or failed GET, no or a refused endpoint event.
    pub async fn connect(
        url: &str,
        headers: RemoteHeaders,
        server: &str,
        ended: EndReason,
        max_message: usize,
    ) -> Result<SseTransport, SseError> {
        Self::connect_within(url, headers, server, ended, max_message, ENDPOINT_WAIT).await
    }

    /// [`SseTransport::connect`] with the endpoint event's wait given.
    async fn connect_within(
        url: &str,
        headers: RemoteHeaders,
        server: &str,
        ended: EndReason,
        max_message: usize,
        wait: Duration,
    ) -> Result<SseTransport, SseError> {
        let stream_url = Url::parse(url).map_err(|e| SseError::Url(e.to_string()))?;
        if !matches!(stream_url.scheme(), "http" | "https") {
            return Err(SseError::Url(format!("scheme {:?}", stream_url.scheme())));
        }
        // No redirects: one to another host would carry the entry's headers there.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_WAIT)
            .build()
            .map_err(request_error)?;
        *ended.lock().expect("end reason lock") = None;
        let limit = max_message.saturating_add(EVENT_OVERHEAD);
        let opened = async {
            let mut h = headers.current().await?;
            h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
            h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            let answer = client
                .get(stream_url.clone())
                .headers(h)
                .send()
                .await
                .map_err(request_error)?;
            if !answer.status().is_success() {
                return Err(failed("GET of the event stream", &answer));
            }
            let kind = answer
                .headers()
                .get(CONTENT_TYPE)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            if !kind
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
            {
                return Err(SseError::NotEventStream(cut(&kind)));
            }
            let mut events = bounded_events(answer, limit);
            let endpoint = first_endpoint(&mut events, &stream_url, max_message).await?;
            Ok((events, endpoint))
        };
        let (events, endpoint) = tokio::time::timeout(wait, opened)
            .await
            .map_err(|_| SseError::NoEndpoint(wait))??;
        Ok(SseTransport {
            client,
            endpoint: Arc::new(endpoint),
            headers,
            events: Some(events),
            server: server.to_string(),
            ended,
            max_message,
            log: LogLimit::new(),
        })
    }

    fn end(&mut self, reason: String) {
        tracing::warn!(server = %crate::shown::Shown(&self.server), "{}", crate::shown::Shown(&reason));
        *self.ended.lock().expect("end reason lock") = Some(reason);
        self.events = None;
    }
}

/// The GET's body as events, each at most `limit` bytes.
fn bounded_events(answer: reqwest::Response, limit: usize) -> Events {
    let mut bound = EventBound::new(limit);
    let bytes = answer.bytes_stream().map(move |chunk| match chunk {
        Ok(b) => bound.observe(&b).map(|()| b).map_err(BodyError::from),
        Err(e) => Err(BodyError::Read(e.without_url())),
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

/// Reads events until the first that has a type or data, which must be `endpoint`.
async fn first_endpoint(
    events: &mut Events,
    stream: &Url,
    max_message: usize,
) -> Result<Url, SseError> {
    loop {
        let event = match events.next().await {
            None => return Err(SseError::EndedEarly("the server closed it".into())),
            Some(Err(e)) => return Err(SseError::EndedEarly(stream_error(&e, max_message))),
            Some(Ok(e)) => e,
        };
        match (event.event.as_deref(), event.data.as_deref()) {
            (None, None) => continue, // a bare `retry:` or `id:`
            (Some("endpoint"), data) => return Ok(resolve(stream, data.unwrap_or(""))?),
            (kind, _) => {
                return Err(SseError::FirstEvent(cut(kind.unwrap_or("message"))));
            }
        }
    }
}

/// Why reading the stream failed, in words (an event over the bound names its setting, for
/// messages of `max_message` bytes).
fn stream_error(e: &sse_stream::Error, max_message: usize) -> String {
    if let sse_stream::Error::Body(body) = e {
        match body.downcast_ref::<BodyError>() {
            Some(BodyError::TooLarge(_)) => return too_long(max_message),
            Some(BodyError::Read(e)) => {
                return format!("its event stream broke off ({})", with_causes(e));
            }
            None => {}
        }
    }
    format!("its event stream is malformed: {e}")
}

/// The error for a failure status: sign-in needed (401, or 403 with a challenge: the seam
/// sign-in takes its `WWW-Authenticate` from), else the status.
fn failed(what: &'static str, answer: &reqwest::Response) -> SseError {
    let status = answer.status();
    let challenge = answer
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .filter(|v| v.len() <= MAX_CHALLENGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match (status, challenge) {
        (StatusCode::UNAUTHORIZED, challenge) | (StatusCode::FORBIDDEN, challenge @ Some(_)) => {
            SseError::AuthRequired {
                what,
                status,
                challenge,
            }
        }
        _ => SseError::Status { what, status },
    }
}

/// An error with up to three of its causes (`decoding the body: connection closed ...`).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    for _ in 0..3 {
        let Some(c) = cause else { break };
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    cut(&text)
}

/// At most [`SHOWN_MAX`] characters of server-sent text.
fn cut(text: &str) -> String {
    text.chars().take(SHOWN_MAX).collect()
}

/// POSTs one message; the reply body is read (bounded) so the connection can be reused.
async fn post(
    client: reqwest::Client,
    endpoint: Arc<Url>,
    headers: RemoteHeaders,
    body: Vec<u8>,
) -> Result<(), SseError> {
    let mut h = headers.current().await?;
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let sent = async {
        let mut answer = client
            .post(Url::clone(&endpoint))
            .headers(h)
            .body(body)
            .send()
            .await
            .map_err(request_error)?;
        let status = answer.status();
        let refused = (!status.is_success()).then(|| failed("POST of a message", &answer));
        let mut read = 0usize;
        while read < POST_BODY_MAX {
            match answer.chunk().await {
                Ok(Some(c)) => read += c.len(),
                _ => break,
            }
        }
        match refused {
            Some(err) => Err(err),
            None => Ok(()),
        }
    };
    tokio::time::timeout(POST_WAIT, sent)
        .await
        .map_err(|_| SseError::PostTimeout)?
}

impl rmcp::transport::Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let open = self.events.is_some();
        let (client, endpoint, headers) = (
            self.client.clone(),
            self.endpoint.clone(),
            self.headers.clone(),
        );
        let body = serde_json::to_vec(&item);
        async move {
            if !open {
                return Err(SseError::Closed);
            }
            post(client, endpoint, headers, body?).await
        }
    }

    /// Cancel safe: the event stream keeps its partial event.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let event = match self.events.as_mut()?.next().await {
                None => {
                    self.end("the server closed its event stream".into());
                    return None;
                }
                Some(Err(e)) => {
                    let reason = stream_error(&e, self.max_message);
                    self.end(reason);
                    return None;
                }
                Some(Ok(event)) => event,
            };
            match event.event.as_deref() {
                None | Some("message") => {
                    let data = event.data.unwrap_or_default();
                    let log = &self.log;
                    let mut admit = || log.admit().is_some();
                    let msg = parse_line_logged(data.as_bytes(), &self.server, None, &mut admit);
                    if msg.is_some() {
                        return msg;
                    }
                }
                Some(kind) => {
                    if let Some(left_out) = self.log.admit() {
                        tracing::debug!(
                            server = %crate::shown::Shown(&self.server),
                            "ignored an event of type {} ({left_out} such lines left out before)",
                            crate::shown::Shown(&cut(kind))
                        );
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping the GET's body closes the stream; the server ends the session with it.
        self.events = None;
        Ok(())
    }
}

/// Whether a failed streamable HTTP `initialize` says the server may speak only the legacy
/// transport: the POST was answered with a 4xx status other than 401/403 (the 2025-11-25
/// spec's backwards-compatibility rule; sign-in failures stay sign-in failures).
pub fn wants_legacy(err: &ClientInitializeError) -> bool {
    match err {
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            wants_legacy(fallback) || wants_legacy(discover)
        }
        ClientInitializeError::TransportError { error, .. } => error
            .error
            .downcast_ref::<StreamableHttpError<reqwest::Error>>()
            .is_some_and(|e| match e {
                StreamableHttpError::UnexpectedServerResponse(text) => {
                    status_of(text).is_some_and(|s| (400..500).contains(&s) && s != 401 && s != 403)
                }
                _ => false,
            }),
        _ => false,
    }
}

/// The status of rmcp's "HTTP 404 Not Found: ..." failure text.
fn status_of(text: &str) -> Option<u16> {
    let rest = text.strip_prefix("HTTP ")?;
    rest.get(..3)?.parse().ok()
}

#[cfg(test)]
mod tests;
