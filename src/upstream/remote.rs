//! Connecting to a remote server: streamable HTTP, the legacy HTTP+SSE transport (`sse/`), and
//! the fallback from the first to the second that the 2025-11-25 spec describes for servers
//! that speak only the old one. Headers come from one [`RemoteHeaders`] for both.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex};

use rmcp::transport::auth::AuthClient;
use rmcp::ServiceExt;

use super::elicit::{BridgeClient, Flights};
use super::handshake::Service;
use super::lane::http_lane::{HttpLane, Poster};
use super::lane::inject::Injected;
use super::lane::recording::{Recording, SessionSeen};
use super::remote_headers::RemoteHeaders;
use super::sse::{wants_legacy, SseTransport};
use super::start_error::StartError;
use super::transport::EndReason;

/// The most URLs [`LEGACY`] remembers.
const LEGACY_MAX: usize = 1024;

/// The `"type": "http"` URLs found to speak only the legacy transport in this process: their
/// next starts (after indexing, a crash, an idle close) go straight to it, and the fallback is
/// logged once. Forgotten when the legacy transport fails there.
static LEGACY: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

fn known_legacy(url: &str) -> bool {
    LEGACY.lock().expect("legacy URLs lock").contains(url)
}

fn remember_legacy(url: &str, legacy: bool) {
    let mut known = LEGACY.lock().expect("legacy URLs lock");
    if !legacy {
        known.remove(url);
    } else if known.len() < LEGACY_MAX {
        known.insert(url.to_string());
    }
}

/// What a remote connection needs besides its URL and headers.
pub(super) struct RemoteStart<'a> {
    /// The server's name (for log lines).
    pub server: &'a str,
    /// Why the connection ended, set by the SSE transport.
    pub ended: &'a EndReason,
    /// The largest message accepted from the server.
    pub max_message: usize,
    /// The calls in flight, whose runs the server's questions go to.
    pub flights: &'a Arc<Flights>,
    /// How long a relayed question waits for the user.
    pub question_timeout: std::time::Duration,
    /// With the lane on: the tracker its tasks run on.
    pub lane: Option<tokio_util::task::TaskTracker>,
}

impl RemoteStart<'_> {
    /// The bridge's client for one connection (its name and version; questions relayed).
    fn client(&self) -> BridgeClient {
        BridgeClient::new(self.server, self.flights.clone(), self.question_timeout)
    }

    /// Connects over streamable HTTP; when the server answers the `initialize` POST with a 4xx
    /// (not 401/403), tries the legacy SSE transport at the same URL, and logs which one is used.
    /// With `authorized`, the streamable HTTP requests go through rmcp's authorizing client; an
    /// answer that asks for sign-in is [`StartError::SignInAsked`], never a fallback. A
    /// streamable HTTP connection comes with its lane when the lane is on.
    pub(super) async fn http(
        &self,
        url: &str,
        headers: RemoteHeaders,
        authorized: Option<AuthClient<reqwest::Client>>,
    ) -> Result<(Service, Option<Arc<HttpLane>>), StartError> {
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        if known_legacy(url) {
            match self.sse_service(url, headers.clone()).await {
                Ok(service) => return Ok((service, None)),
                Err(_) => remember_legacy(url, false), // changed: try both again
            }
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(url);
        for (name, value) in headers.fixed() {
            config.custom_headers.insert(name.clone(), value.clone());
        }
        let (uri, max_event) = (config.uri.clone(), config.max_sse_event_size);
        let seen = Arc::new(SessionSeen::default());
        use rmcp::transport::StreamableHttpClientTransport as T;
        let (served, lane) = match authorized {
            Some(client) => {
                let poster: Arc<dyn Poster> = Arc::new(client.clone());
                let recording = Recording::new(client, seen.clone());
                let (transport, to_rmcp) = Injected::new(T::with_client(recording, config));
                (self.client().serve(transport).await, (poster, to_rmcp))
            }
            None => {
                let client = super::oauth::transport_client();
                let poster: Arc<dyn Poster> = Arc::new(client.clone());
                let recording = Recording::new(client, seen.clone());
                let (transport, to_rmcp) = Injected::new(T::with_client(recording, config));
                (self.client().serve(transport).await, (poster, to_rmcp))
            }
        };
        let err = match served {
            Ok(service) => {
                let lane = self.lane.clone().map(|tasks| {
                    let (poster, to_rmcp) = lane;
                    Arc::new(HttpLane::new(poster, uri, seen, to_rmcp, max_event, tasks))
                });
                return Ok((service, lane));
            }
            Err(e) => e,
        };
        if let Some(step_up) = super::oauth::sign_in_challenge(&err) {
            return Err(StartError::SignInAsked(step_up));
        }
        if !wants_legacy(&err) {
            return Err(StartError::Initialize(Box::new(err)));
        }
        match self.sse_service(url, headers).await {
            Ok(service) => {
                remember_legacy(url, true);
                tracing::info!(
                    server = %crate::shown::Shown(self.server),
                    "the server refused streamable HTTP's initialize; connected over the legacy \
                     HTTP+SSE transport"
                );
                Ok((service, None))
            }
            Err(sse) => Err(StartError::NoFallback {
                http: Box::new(err),
                sse: Box::new(sse),
            }),
        }
    }

    /// Connects over the legacy SSE transport (a `"type": "sse"` entry).
    pub(super) async fn sse(
        &self,
        url: &str,
        headers: RemoteHeaders,
    ) -> Result<Service, StartError> {
        let service = self.sse_service(url, headers).await?;
        tracing::info!(
            server = %crate::shown::Shown(self.server),
            "connected over the legacy HTTP+SSE transport"
        );
        Ok(service)
    }

    async fn sse_service(&self, url: &str, headers: RemoteHeaders) -> Result<Service, StartError> {
        let transport = SseTransport::connect(
            url,
            headers,
            self.server,
            self.ended.clone(),
            self.max_message,
        )
        .await
        .map_err(StartError::Sse)?;
        self.client()
            .serve(transport)
            .await
            .map_err(|e| StartError::Initialize(Box::new(e)))
    }
}
