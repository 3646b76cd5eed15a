//! [`Front`]: what every HTTP request meets before rmcp's streamable HTTP service. It serves
//! the protected-resource metadata (RFC 9728, which the MCP authorization spec points
//! clients to), answers only `/mcp`, refuses a browser's request from an origin not allowed
//! (`origin.rs`), admits a request by its bearer token (or, with no tokens file, only from
//! this user's own processes on loopback), caps each token's requests in flight (a session's
//! one standing GET stream apart), and marks the request with the token's name for the MCP
//! face. A 401 or 403 closes the connection; a session is forgotten only once its DELETE
//! succeeded, which is answered 200 (rmcp says 202, which clients take for a failure).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::gate::Conn;
use super::origin::Origins;
use super::sessions::SessionBook;
use super::tokens::Tokens;
use crate::server::{Authenticated, BridgeServer};
use crate::upstream::oauth::public::{PublicCallback, Undelivered, PUBLIC_PATH};

/// The MCP endpoint's path.
pub const MCP_PATH: &str = "/mcp";
/// Where the protected-resource metadata is (RFC 9728, with and without the resource path).
const METADATA_PATHS: [&str; 2] = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
];
/// The token name of every request when there is no tokens file (loopback, own user only).
pub const LOCAL_TOKEN: &str = "local";

/// A response body.
pub type Reply = Response<BoxBody<Bytes, Infallible>>;

/// The front of the HTTP server.
pub struct Front {
    /// `None`: no tokens file (loopback only, this user's processes only).
    tokens: RwLock<Option<Arc<Tokens>>>,
    inflight: Mutex<HashMap<Arc<str>, Arc<Semaphore>>>,
    per_token: usize,
    mcp: StreamableHttpService<BridgeServer, LocalSessionManager>,
    /// rmcp's sessions, to close those the book evicts or revokes.
    manager: Arc<LocalSessionManager>,
    /// Which token opened each session, and which sessions have their standing GET stream.
    book: Arc<Mutex<SessionBook>>,
    /// The browser origins served.
    origins: Origins,
    /// This endpoint's URL, for the metadata.
    resource: String,
    /// Callers' sign-ins waiting at `/oauth/callback` (`MCP_BRIDGE_PUBLIC_URL` set).
    public: Option<(PublicCallback, String)>,
}

/// The header carrying a session id.
const SESSION_HEADER: &str = "mcp-session-id";

impl Front {
    /// A front admitting `tokens` (none: own user on loopback) to `mcp` (whose sessions
    /// `manager` keeps), at most `per_token` requests in flight each, browsers only from
    /// `origins`; `resource` is the endpoint's URL.
    pub fn new(
        tokens: Option<Tokens>,
        per_token: usize,
        mcp: StreamableHttpService<BridgeServer, LocalSessionManager>,
        manager: Arc<LocalSessionManager>,
        origins: Origins,
        resource: String,
    ) -> Self {
        Front {
            tokens: RwLock::new(tokens.map(Arc::new)),
            inflight: Mutex::new(HashMap::new()),
            per_token,
            mcp,
            manager,
            book: Arc::new(Mutex::new(SessionBook::default())),
            origins,
            resource,
            public: None,
        }
    }

    /// The same front answering callers' sign-in callbacks at `/oauth/callback` (and at the
    /// path of `public`'s redirect URI, when a proxy passes its prefix on).
    pub fn with_public_callback(mut self, public: Option<PublicCallback>) -> Self {
        self.public = public.map(|p| {
            let path = url::Url::parse(p.redirect_uri())
                .map(|u| u.path().to_string())
                .unwrap_or_else(|_| PUBLIC_PATH.to_string());
            (p, path)
        });
        self
    }

    /// A sign-in callback: handed to the caller's sign-in waiting for its `state`, or a plain
    /// 400 that says nothing more. Needs no bearer token (the browser has none).
    fn callback(&self, public: &PublicCallback, req_query: Option<&str>) -> Reply {
        match public.deliver(req_query.unwrap_or_default()) {
            Ok(()) => plain(
                StatusCode::OK,
                "The sign-in came back to mcp-code-bridge. You can close this tab.",
            ),
            Err(Undelivered::TooLong) => plain(StatusCode::BAD_REQUEST, "The request is too long."),
            Err(Undelivered::NoneWaits) => plain(
                StatusCode::BAD_REQUEST,
                "No sign-in waits for this callback.",
            ),
        }
    }

    /// Replaces the tokens (a reload of the tokens file); the sessions of tokens no longer in
    /// it, or whose secret changed under the same name, are closed. Returns the names of those
    /// tokens (what else they created goes too).
    pub fn set_tokens(&self, tokens: Tokens) -> HashSet<Arc<str>> {
        let next = Arc::new(tokens);
        let old = self
            .tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .replace(next.clone());
        let ended = match &old {
            Some(old) => old.ended_by(&next),
            None => HashSet::new(),
        };
        self.inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name, _| !ended.contains(name));
        let revoked = self.book().revoke(|t| !ended.contains(t));
        self.close_sessions(revoked);
        ended
    }

    fn book(&self) -> std::sync::MutexGuard<'_, SessionBook> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes rmcp's `sessions` in the background (their handlers are dropped: their
    /// sandboxes go).
    fn close_sessions(&self, sessions: Vec<String>) {
        for id in sessions {
            let manager = self.manager.clone();
            tokio::spawn(async move {
                let _ = manager.close_session(&Arc::from(id)).await;
            });
        }
    }

    fn current(&self) -> Option<Arc<Tokens>> {
        self.tokens
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Answers one request of `conn` (admitting the connection when the request is); a 401
    /// or 403 closes the connection.
    pub async fn handle<B>(&self, req: Request<B>, conn: &Conn) -> Reply
    where
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: std::fmt::Display,
    {
        let mut reply = self.answer(req, conn).await;
        if matches!(
            reply.status(),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            reply
                .headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
        }
        reply
    }

    async fn answer<B>(&self, mut req: Request<B>, conn: &Conn) -> Reply
    where
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: std::fmt::Display,
    {
        let path = req.uri().path();
        if METADATA_PATHS.contains(&path) {
            return self.metadata();
        }
        if let Some((public, own)) = &self.public {
            if path == PUBLIC_PATH || path == own {
                if req.method() != http::Method::GET {
                    return plain(StatusCode::METHOD_NOT_ALLOWED, "GET only");
                }
                return self.callback(public, req.uri().query());
            }
        }
        if path != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is /mcp");
        }
        let origin = req.headers().get(header::ORIGIN).map(|v| v.as_bytes());
        if !self.origins.allows(origin) {
            return plain(
                StatusCode::FORBIDDEN,
                "this Origin is not allowed (MCP_BRIDGE_HTTP_ALLOWED_ORIGINS)",
            );
        }
        let (token, identity) = match self.current() {
            None if conn.own_user() => (Arc::from(LOCAL_TOKEN), None),
            None => {
                return plain(
                    StatusCode::FORBIDDEN,
                    "this bridge serves only its own user's processes (no --token-file)",
                )
            }
            Some(tokens) => {
                let presented = req
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(bearer);
                match presented.and_then(|p| tokens.admit(p)) {
                    Some((name, key)) => (name, Some(key)),
                    None => return self.unauthorized(presented.is_some()),
                }
            }
        };
        conn.admit();
        let session = req
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let method = req.method().clone();
        let mut standing = None;
        if let Some(s) = &session {
            // Another token's session is answered as if it did not exist.
            if !self.book().allows(s, &token) {
                return plain(StatusCode::NOT_FOUND, "session not found");
            }
            // A session's one standing GET stream (server-to-client messages; an idle
            // client keeps it open) is not a request in flight.
            if method == http::Method::GET && self.book().stand(s) {
                standing = Some(Standing {
                    book: self.book.clone(),
                    session: s.clone(),
                });
            }
        }
        let permit = match standing {
            Some(_) => None,
            None => match self.permit(&token) {
                Some(p) => Some(p),
                None => return self.too_many(),
            },
        };
        req.extensions_mut().insert(Authenticated {
            token: token.clone(),
            identity,
        });
        let mut reply = self.mcp.handle(req).await;
        match &session {
            None => {
                if let Some(new) = reply
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                {
                    let evicted = self.book().opened(new, &token);
                    self.close_sessions(evicted);
                }
            }
            Some(s) if method == http::Method::DELETE && reply.status().is_success() => {
                // Only a DELETE rmcp carried out ends the session's binding to its token.
                self.book().closed(s);
                if reply.status() == StatusCode::ACCEPTED {
                    *reply.status_mut() = StatusCode::OK;
                }
            }
            Some(_) => {}
        }
        reply.map(|body| {
            Held {
                inner: body,
                _permit: permit,
                _standing: standing,
            }
            .boxed()
        })
    }

    /// 429 for a token at its cap of requests in flight.
    fn too_many(&self) -> Reply {
        let mut reply = rpc_error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "too many requests in flight for this token (MCP_BRIDGE_REQUESTS_PER_TOKEN={})",
                self.per_token
            ),
        );
        reply
            .headers_mut()
            .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        reply
    }

    /// A permit for one more request of `token`, if it has fewer than its cap in flight.
    fn permit(&self, token: &Arc<str>) -> Option<OwnedSemaphorePermit> {
        let semaphore = self
            .inflight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(token.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_token)))
            .clone();
        semaphore.try_acquire_owned().ok()
    }

    /// 401 with the challenge pointing at the metadata (RFC 6750, RFC 9728).
    fn unauthorized(&self, presented: bool) -> Reply {
        let mut challenge = format!(
            "Bearer realm=\"mcp-code-bridge\", resource_metadata=\"{}\"",
            self.metadata_url()
        );
        if presented {
            challenge.push_str(", error=\"invalid_token\"");
        }
        let mut reply = plain(
            StatusCode::UNAUTHORIZED,
            if presented {
                "unknown bearer token"
            } else {
                "a bearer token is required (Authorization: Bearer TOKEN)"
            },
        );
        if let Ok(v) = http::HeaderValue::from_str(&challenge) {
            reply.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        reply
    }

    fn metadata_url(&self) -> String {
        let origin = self.resource.trim_end_matches(MCP_PATH);
        format!("{origin}{}", METADATA_PATHS[1])
    }

    /// The protected-resource metadata: this resource, bearer tokens in the header; no
    /// authorization server (tokens are issued by the operator, out of band).
    fn metadata(&self) -> Reply {
        let doc = serde_json::json!({
            "resource": self.resource,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-code-bridge",
        });
        let mut reply = Response::new(Full::new(Bytes::from(doc.to_string())).boxed());
        reply.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        reply
    }
}

/// The token of an `Authorization: Bearer TOKEN` value (the scheme in any case, RFC 9110).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// A plain-text reply.
pub fn plain(status: StatusCode, text: &str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    reply
}

/// A JSON-RPC error reply with no id (the request was not read).
fn rpc_error(status: StatusCode, message: &str) -> Reply {
    let doc = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": message},
    });
    let mut reply = Response::new(Full::new(Bytes::from(doc.to_string())).boxed());
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    reply
}

/// A body that holds its request's permit (or its session's standing-stream mark) until it
/// has been sent (an SSE stream lasts as long as its call, a standing one as its client).
struct Held {
    inner: BoxBody<Bytes, Infallible>,
    _permit: Option<OwnedSemaphorePermit>,
    _standing: Option<Standing>,
}

/// A session's standing GET stream, open while this lives.
struct Standing {
    book: Arc<Mutex<SessionBook>>,
    session: String,
}

impl Drop for Standing {
    fn drop(&mut self) {
        self.book
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sat(&self.session);
    }
}

impl Body for Held {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::bearer;

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearerabc"), None);
    }
}
