//! [`StartError`]: why a server could not be started (a process, a remote connection, a
//! handshake, a sign-in), shared by the starter, the remote connectors and the owner.

use super::remote_headers::HeaderError;
use super::sse::SseError;

/// Why a server could not be started. Its words go to the user once the owner has redacted the
/// server's secrets from them.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    /// The command could not be run.
    #[error("cannot run {command:?}: {err}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        #[source]
        err: std::io::Error,
    },
    /// A configured HTTP header is no valid header.
    #[error(transparent)]
    Header(HeaderError),
    /// The entry's `headersHelper` gave no headers (its output is never in the text).
    #[error(transparent)]
    HeadersHelper(super::headers_helper::HelperError),
    /// The legacy SSE transport could not connect.
    #[error("legacy SSE: {0}")]
    Sse(#[source] SseError),
    /// Streamable HTTP's `initialize` was refused with a 4xx, and the legacy SSE transport at
    /// the same URL failed too.
    #[error("initialize failed: {http} (and the legacy SSE transport failed too: {sse})")]
    NoFallback {
        /// Streamable HTTP's failure.
        #[source]
        http: Box<rmcp::service::ClientInitializeError>,
        /// The legacy transport's.
        sse: Box<StartError>,
    },
    /// The MCP handshake failed.
    #[error("initialize failed: {0}")]
    Initialize(#[source] Box<rmcp::service::ClientInitializeError>),
    /// The server asks for sign-in (a 401, a 403 `insufficient_scope`, or tokens that can no
    /// longer be refreshed): not a failure of the server, and no backoff.
    #[error("it needs sign-in")]
    AuthRequired,
    /// The remote server's answer asks for sign-in (with the scopes a step-up asks for):
    /// `Starter::start` notes it in the token store and answers [`StartError::AuthRequired`].
    #[error("it asks for sign-in")]
    SignInAsked(Option<String>),
    /// The stored sign-in could not be used (the token store, or discovery).
    #[error("OAuth: {0}")]
    OAuth(#[source] super::oauth::OAuthError),
    /// Another failure whose text held a value a `headersHelper` gave, with it replaced by
    /// `[redacted]`.
    #[error("{0}")]
    Redacted(String),
    /// Its tool list could not be checked against its pins (`pins/`).
    #[error("{0}")]
    Pins(#[source] Box<super::pins::PinError>),
    /// Listing its tools failed.
    #[error("tools/list failed: {0}")]
    ListTools(#[source] rmcp::ServiceError),
}

impl StartError {
    /// `err`, or its text with every one of `secrets` replaced by `[redacted]` when it holds one.
    pub(super) fn without(err: StartError, secrets: &[String]) -> StartError {
        let text = err.to_string();
        if !secrets.iter().any(|s| text.contains(s.as_str())) {
            return err;
        }
        let mut text = text;
        for s in secrets {
            text = text.replace(s.as_str(), "[redacted]");
        }
        StartError::Redacted(text)
    }
}
