//! [`Recording`]: the HTTP client under rmcp's streamable HTTP worker, noting the session the
//! worker uses ([`SessionSeen`]) so the HTTP lane can send on the same session.
//!
//! rmcp keeps the session id and the negotiated `MCP-Protocol-Version` inside its worker; the
//! only place they show is the arguments of each request the worker makes. An `initialize`
//! request forgets what was seen (a new session is being made, as after a 404); the next
//! request of the worker (its `notifications/initialized`, its `tools/list`) records it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};

/// The session rmcp's worker sends on: its id (none for a server without sessions) and the
/// headers of its requests (the entry's and `MCP-Protocol-Version`).
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// `Mcp-Session-Id`, when the server gave one.
    pub id: Option<Arc<str>>,
    /// The headers the worker sends with every request of this session.
    pub headers: HashMap<HeaderName, HeaderValue>,
}

/// What the worker's requests showed of its session; shared with the lane.
#[derive(Default, Debug)]
pub struct SessionSeen(Mutex<Option<Session>>);

impl SessionSeen {
    /// The session last seen, unless an `initialize` came after it.
    pub fn get(&self) -> Option<Session> {
        self.0.lock().expect("session lock").clone()
    }

    /// Notes one request of the worker's.
    fn note(
        &self,
        message: &ClientJsonRpcMessage,
        id: &Option<Arc<str>>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        let initialize = matches!(
            message,
            JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_))
        );
        let mut seen = self.0.lock().expect("session lock");
        if initialize {
            *seen = None;
            return;
        }
        let same = seen
            .as_ref()
            .is_some_and(|s| s.id == *id && s.headers == *headers);
        if !same {
            *seen = Some(Session {
                id: id.clone(),
                headers: headers.clone(),
            });
        }
    }

    /// Forgets the session (the worker deleted it).
    fn forget(&self) {
        *self.0.lock().expect("session lock") = None;
    }
}

/// An rmcp streamable HTTP client that notes each request's session in a [`SessionSeen`].
#[derive(Clone)]
pub struct Recording<C> {
    inner: C,
    seen: Arc<SessionSeen>,
}

impl<C> Recording<C> {
    /// `inner`, noting into `seen`.
    pub fn new(inner: C, seen: Arc<SessionSeen>) -> Self {
        Recording { inner, seen }
    }
}

type Post<E> = Result<StreamableHttpPostResponse, StreamableHttpError<E>>;
type Stream<E> = Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<E>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Recording<C> {
    type Error = C::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Post<C::Error>> + Send + '_ {
        self.seen.note(&message, &session_id, &custom_headers);
        self.inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Post<C::Error>> + Send + '_ {
        self.seen.note(&message, &session_id, &custom_headers);
        self.inner.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<C::Error>>> + Send + '_ {
        self.seen.forget();
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Stream<C::Error>> + Send + '_ {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Stream<C::Error>> + Send + '_ {
        self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{
        ClientNotification, InitializedNotification, JsonRpcNotification, JsonRpcRequest,
        JsonRpcVersion2_0, NumberOrString,
    };

    fn initialized() -> ClientJsonRpcMessage {
        JsonRpcMessage::Notification(JsonRpcNotification {
            jsonrpc: JsonRpcVersion2_0,
            notification: ClientNotification::InitializedNotification(
                InitializedNotification::default(),
            ),
        })
    }

    fn initialize() -> ClientJsonRpcMessage {
        JsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(0),
            ClientRequest::InitializeRequest(rmcp::model::InitializeRequest::new(
                rmcp::model::InitializeRequestParams::new(
                    rmcp::model::ClientCapabilities::default(),
                    rmcp::model::Implementation::new("test", "0"),
                ),
            )),
        ))
    }

    #[test]
    fn the_session_is_what_the_last_request_after_initialize_carried() {
        let seen = SessionSeen::default();
        let mut headers = HashMap::new();
        headers.insert(
            HeaderName::from_static("mcp-protocol-version"),
            HeaderValue::from_static("2025-11-25"),
        );
        assert_eq!(seen.get(), None, "nothing seen yet");
        seen.note(&initialize(), &None, &HashMap::new());
        assert_eq!(seen.get(), None, "initialize: no session yet");
        let id: Option<Arc<str>> = Some("abc".into());
        seen.note(&initialized(), &id, &headers);
        let got = seen.get().expect("a session");
        assert_eq!(got.id.as_deref(), Some("abc"));
        assert_eq!(got.headers, headers);
        seen.note(&initialize(), &None, &HashMap::new());
        assert_eq!(seen.get(), None, "a new initialize forgets the old session");
        seen.note(&initialized(), &id, &headers);
        seen.forget();
        assert_eq!(seen.get(), None, "a deleted session is forgotten");
    }
}
