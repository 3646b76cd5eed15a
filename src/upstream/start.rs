//! Starting one server for its owner (`owner.rs`): the process or HTTP connection, the MCP
//! handshake and the tool list, with `disabledTools` dropped. Every task it spawns (the stderr
//! reader) is on the bridge's tracker, in the server's span.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::elicit::{BridgeClient, Flights};
use super::handshake::Service;
use super::live::{drain_stderr, Live, SameList};
use super::remote::RemoteStart;
use super::remote_headers::RemoteHeaders;
use super::sse::SseError;
pub(super) use super::start_error::StartError;
use super::transport::{ChildTransport, EndReason, ProcessGroup};
use crate::config::{ServerSpec, Transport};
use crate::lines::LineTail;

/// How long the stderr reader goes on once the connection is closed (or the bridge stops):
/// the process group is killed by then, so this only bounds a pipe an escaped process holds.
const STDERR_AFTER_CLOSE: Duration = Duration::from_secs(1);

/// A started server: the connection (owned by the owner task) and the handle callers share.
pub(super) struct Started {
    /// rmcp's service: its loop runs until the connection ends or the owner stops it.
    pub service: Service,
    /// What callers use.
    pub live: Live,
}

/// What starting one server needs; the owner task holds it.
pub(super) struct Starter {
    /// The server's definition.
    pub spec: Arc<ServerSpec>,
    /// Its last stderr lines, filled by the stderr reader.
    pub stderr: Arc<LineTail>,
    /// Why its process's connection ended, set by the transport.
    pub ended: EndReason,
    /// How many times it was started.
    pub starts: Arc<AtomicU32>,
    /// The bridge's tracker: the stderr reader and the lane's tasks run on it.
    pub tracker: TaskTracker,
    /// The server's token: cancelled when the bridge stops.
    pub ct: CancellationToken,
    /// Whether calls to a stdio server take the lane.
    pub call_lane: bool,
    /// The largest message accepted from a stdio or legacy SSE server.
    pub max_message: usize,
    /// The tool list shared with the server's other processes.
    pub list: Arc<SameList>,
    /// The OAuth token store a remote server's sign-in is read from.
    pub tokens: Option<super::oauth::store::TokenFile>,
    /// The calls in flight, whose runs the server's questions go to.
    pub flights: Arc<Flights>,
    /// How long a relayed question waits for the user (`MCP_BRIDGE_QUESTION_TIMEOUT`).
    pub question_timeout: Duration,
    /// The pinned tool definitions, when pinning is on (`MCP_BRIDGE_PIN_TOOLS`).
    pub pins: Option<super::pins::Pins>,
}

impl Starter {
    /// The bridge's client for one connection of this server.
    fn client(&self) -> BridgeClient {
        BridgeClient::new(&self.spec.name, self.flights.clone(), self.question_timeout)
    }
}

impl Starter {
    /// Notes in the token store that this remote server asked for sign-in.
    async fn mark_sign_in(&self, step_up: Option<String>) {
        if let (Some(tokens), Ok(url)) = (&self.tokens, super::oauth::remote_url(&self.spec)) {
            super::oauth::mark_needs_sign_in(&self.spec, url, tokens, step_up).await;
        }
    }

    /// rmcp's authorizing client for `url` when the token store holds a sign-in for it.
    async fn authorized(
        &self,
        url: &str,
    ) -> Result<Option<rmcp::transport::auth::AuthClient<reqwest::Client>>, StartError> {
        match &self.tokens {
            Some(tokens) => super::oauth::authorized(&self.spec, url, tokens)
                .await
                .map_err(StartError::OAuth),
            None => Ok(None),
        }
    }

    /// A remote entry's headers for this connection: its static `headers`, with those of its
    /// `headersHelper` (run afresh now, as Claude Code runs it on every connection) over them.
    async fn entry_headers(
        &self,
        fixed: &std::collections::BTreeMap<String, String>,
        url: &str,
        helper_values: &mut Vec<String>,
    ) -> Result<RemoteHeaders, StartError> {
        let all = super::headers_helper::connection_headers(
            fixed,
            self.spec.headers_helper.as_deref(),
            &self.spec.name,
            url,
            helper_values,
        )
        .await
        .map_err(StartError::HeadersHelper)?;
        RemoteHeaders::from_entry(&all).map_err(StartError::Header)
    }

    /// What connecting to a remote server needs of this starter.
    fn remote(&self) -> RemoteStart<'_> {
        RemoteStart {
            server: &self.spec.name,
            ended: &self.ended,
            max_message: self.max_message,
            flights: &self.flights,
            question_timeout: self.question_timeout,
            lane: self.call_lane.then(|| self.tracker.clone()),
        }
    }

    /// Starts the server. The process group of a stdio server is put in `group` as soon as it
    /// exists, so an abandoned start can be killed. A failure's text never holds a value a
    /// `headersHelper` gave (a server may echo a header in its error body).
    pub(super) async fn start(
        &self,
        group: &OnceLock<ProcessGroup>,
    ) -> Result<Started, StartError> {
        let mut helper_values = Vec::new();
        self.start_with(group, &mut helper_values)
            .await
            .map_err(|e| StartError::without(e, &helper_values))
    }

    async fn start_with(
        &self,
        group: &OnceLock<ProcessGroup>,
        helper_values: &mut Vec<String>,
    ) -> Result<Started, StartError> {
        self.starts.fetch_add(1, Ordering::Relaxed);
        tracing::info!(server = %crate::shown::Shown(&self.spec.name), "starting MCP server");
        let mut lane = None;
        let mut http_lane = None;
        let closed = CancellationToken::new();
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
                let lane_tasks = self.call_lane.then(|| self.tracker.clone());
                let (transport, stderr) = ChildTransport::spawn(
                    cmd,
                    &self.spec.name,
                    self.ended.clone(),
                    lane_tasks,
                    self.max_message,
                )
                .map_err(|err| StartError::Spawn {
                    command: command.clone(),
                    err,
                })?;
                let _ = group.set(transport.group());
                lane = transport.lane();
                if let Some(stderr) = stderr {
                    let drain = drain_stderr(stderr, self.stderr.clone(), self.spec.clone());
                    // Not stopped with the token at once: a server still writing to a closed
                    // pipe would die of it before its grace to exit.
                    let (ct, closed) = (self.ct.clone(), closed.clone());
                    let backstop = async move {
                        tokio::select! {
                            _ = ct.cancelled() => {}
                            _ = closed.cancelled() => {}
                        }
                        tokio::time::sleep(STDERR_AFTER_CLOSE).await;
                    };
                    self.tracker.spawn(
                        async move {
                            tokio::select! {
                                _ = drain => {}
                                _ = backstop => {}
                            }
                        }
                        .in_current_span(),
                    );
                }
                self.client()
                    .serve(transport)
                    .await
                    .map_err(|e| StartError::Initialize(Box::new(e)))?
            }
            Transport::Http { url, headers } => {
                let headers = self.entry_headers(headers, url, helper_values).await?;
                // With stored credentials, rmcp's authorizing client (refresh ahead of expiry
                // and on a 401), also for the legacy transport a fallback may take; without, a
                // 401 means the server needs sign-in.
                let authorized = self.authorized(url).await?;
                let headers = match &authorized {
                    Some(client) => headers.with_authorizer(Arc::new(client.clone())),
                    None => headers,
                };
                match self.remote().http(url, headers, authorized).await {
                    Err(StartError::SignInAsked(step_up)) => {
                        self.mark_sign_in(step_up).await;
                        return Err(StartError::AuthRequired);
                    }
                    started => {
                        let (service, lane) = started?;
                        http_lane = lane;
                        service
                    }
                }
            }
            Transport::Sse { url, headers } => {
                let headers = self.entry_headers(headers, url, helper_values).await?;
                let headers = match self.authorized(url).await? {
                    Some(client) => headers.with_authorizer(Arc::new(client)),
                    None => headers,
                };
                match self.remote().sse(url, headers).await {
                    Err(StartError::Sse(SseError::AuthRequired { .. })) => {
                        self.mark_sign_in(None).await;
                        return Err(StartError::AuthRequired);
                    }
                    started => started?,
                }
            }
        };
        let peer = service.peer().clone();
        let info = peer.peer_info();
        // Servers that negotiated a protocol without `initialize` expect per-request metadata,
        // which only rmcp's own requests carry.
        let with_initialize = info
            .as_ref()
            .is_some_and(|i| i.protocol_version.has_initialize());
        let lane = lane.filter(|_| with_initialize);
        let http_lane = http_lane.filter(|_| with_initialize);
        let mut tools = match peer.list_all_tools().await {
            Ok(tools) => tools,
            Err(e) => match super::oauth::sign_in_challenge(&e) {
                Some(step_up) => {
                    self.mark_sign_in(step_up).await;
                    return Err(StartError::AuthRequired);
                }
                None => return Err(StartError::ListTools(e)),
            },
        };
        // `allowedTools` / `disabledTools`: refused tools are hidden from the sandbox, its
        // listings, its search and the tool cache.
        tools.retain(|t| self.spec.tool_refusal(&t.name).is_none());
        // Pinned definitions: a changed or new tool is held (`pins/`); the file work is
        // blocking, and a start is rare.
        let (tools, held) = match self.pins.clone().filter(|p| p.covers(&self.spec)) {
            None => (tools, Default::default()),
            Some(pins) => {
                let spec = self.spec.clone();
                let checked = tokio::task::spawn_blocking(move || pins.check(&spec, tools))
                    .await
                    .map_err(|e| StartError::Redacted(format!("checking the pinned tools: {e}")))?
                    .map_err(|e| StartError::Pins(Box::new(e)))?;
                (checked.tools, checked.held)
            }
        };
        let live = Live {
            peer,
            tools: self.list.share(tools),
            held,
            info,
            lane,
            http_lane,
            closed,
            stop: CancellationToken::new(),
        };
        Ok(Started { service, live })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starter(transport: Transport) -> Starter {
        let spec = ServerSpec::new("s", transport, std::path::Path::new("/s.json"));
        Starter {
            spec: Arc::new(spec),
            stderr: Arc::new(LineTail::new(2, 100)),
            ended: EndReason::default(),
            starts: Arc::default(),
            tracker: TaskTracker::new(),
            ct: CancellationToken::new(),
            call_lane: false,
            max_message: 1 << 20,
            list: Arc::default(),
            tokens: None,
            flights: Arc::default(),
            question_timeout: Duration::from_secs(1),
            pins: None,
        }
    }

    /// The `clientInfo` of an `initialize` request's JSON text.
    fn client_info_in(request: &str) -> (String, String) {
        let v: serde_json::Value = serde_json::from_str(request.trim()).expect("JSON");
        assert_eq!(v["method"], "initialize", "{v}");
        let info = &v["params"]["clientInfo"];
        let field = |k: &str| info[k].as_str().expect("a string").to_string();
        (field("name"), field("version"))
    }

    fn bridge() -> (String, String) {
        ("mcp-code-bridge".into(), env!("CARGO_PKG_VERSION").into())
    }

    #[tokio::test]
    async fn a_stdio_server_is_told_the_bridges_name_and_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let seen = dir.path().join("initialize.json");
        // A "server" that keeps the first message it gets, then exits.
        let server = starter(Transport::Stdio {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                "head -n 1 > \"$0\"".into(),
                seen.display().to_string(),
            ],
            env: Default::default(),
            cwd: None,
        });
        let group = OnceLock::new();
        let started = tokio::time::timeout(Duration::from_secs(20), server.start(&group));
        assert!(started.await.expect("ends").is_err(), "no server answered");
        let request = std::fs::read_to_string(&seen).expect("the request was kept");
        assert_eq!(client_info_in(&request), bridge());
    }

    #[tokio::test]
    async fn an_http_server_is_told_the_bridges_name_and_version() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        // A "server" that keeps the body of the first request, then refuses it.
        let kept = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.expect("accept");
            let (text, body, length) = crate::test_support::read_http_request(&mut conn).await;
            assert!(length > 0, "a content-length");
            let reply =
                "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
            conn.write_all(reply.as_bytes()).await.expect("write");
            text[body..body + length].to_string()
        });
        let server = starter(Transport::Http {
            url,
            headers: Default::default(),
        });
        let group = OnceLock::new();
        let started = tokio::time::timeout(Duration::from_secs(20), server.start(&group));
        assert!(started.await.expect("ends").is_err(), "no server answered");
        let request = kept.await.expect("the request was kept");
        assert_eq!(client_info_in(&request), bridge());
    }

    #[tokio::test]
    async fn a_failed_start_says_why_with_the_cause_as_its_source() {
        let missing = starter(Transport::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        });
        let Err(err) = missing.start(&OnceLock::new()).await else {
            panic!("started a missing program");
        };
        assert!(matches!(err, StartError::Spawn { .. }), "{err:?}");
        assert!(err
            .to_string()
            .starts_with("cannot run \"/nonexistent/mcp-server\": "));
        let source = std::error::Error::source(&err).expect("the spawn's error");
        assert!(source.downcast_ref::<std::io::Error>().is_some());

        let sse = starter(Transport::Sse {
            url: "http://127.0.0.1:9/sse".into(),
            headers: Default::default(),
        });
        let Err(err) = sse.start(&OnceLock::new()).await else {
            panic!("nothing listens there");
        };
        assert!(
            matches!(err, StartError::Sse(SseError::Request(_))),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("legacy SSE: "), "{err}");
        assert!(std::error::Error::source(&err).is_some());
    }
}
