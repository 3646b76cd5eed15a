//! `mcp-code-bridge serve --http ADDR`: one bridge for many agents over MCP's streamable HTTP
//! transport (rmcp's server: 2025-11-25 clients get sessions, 2026-07-28 clients are served
//! statelessly). `front.rs` admits requests (tokens, per-token requests in flight, the
//! protected-resource metadata), `listen.rs` accepts connections, `hub.rs` gives each client
//! its own sandbox (`pool.rs`: the warm pool; `handle.rs`: the handles of stateless clients),
//! `tokens.rs` reads the tokens file, `peer.rs` tells whose a loopback connection is
//! (`sock_diag.rs`: asking the kernel over netlink),
//! `gate.rs` bounds the connections not yet admitted, `origin.rs` the browser origins served.
//! This file wires them, reloads the tokens on SIGHUP and drains on SIGTERM.

mod front;
mod gate;
mod handle;
mod hub;
mod listen;
mod origin;
mod peer;
mod pool;
mod room;
mod sessions;
mod sock_diag;
mod tokens;

pub use front::{LOCAL_TOKEN, MCP_PATH};
pub use hub::{Hub, LIMIT_CODE};
pub use tokens::{TokenFileError, Tokens};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::App;
use crate::audit::AuditLog;
use crate::config::Settings;
use crate::server::BridgeServer;
use crate::shown::ShownPath;
use front::Front;
use gate::Gate;
use origin::Origins;

/// How `serve` was asked to run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The tokens file; required unless `addr` is loopback.
    pub token_file: Option<PathBuf>,
}

/// Why `serve` did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without tokens.
    #[error(
        "{0} is not a loopback address: serving it needs --token-file (bearer tokens); \
         or listen on 127.0.0.1 / [::1]"
    )]
    NeedsTokens(SocketAddr),
    /// The tokens file was refused.
    #[error(transparent)]
    Tokens(#[from] TokenFileError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Serves until SIGTERM or SIGINT, then drains: new runs are refused, runs in flight get
/// `MCP_BRIDGE_DRAIN_TIMEOUT`, then every sandbox is removed and every server closed.
///
/// # Errors
/// [`ServeError`] when it cannot start; nothing after it started.
pub async fn serve(
    settings: Arc<Settings>,
    audit: Option<AuditLog>,
    opts: ServeOptions,
) -> Result<(), ServeError> {
    if opts.token_file.is_none() && !opts.addr.ip().is_loopback() {
        return Err(ServeError::NeedsTokens(opts.addr));
    }
    let tokens = match &opts.token_file {
        Some(path) => Some(Tokens::load(path)?),
        None => None,
    };
    let listener = TcpListener::bind(opts.addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: opts.addr,
            source,
        })?;
    let local = listener.local_addr().unwrap_or(opts.addr);
    let app = App::for_serving(settings.clone(), audit);
    app.index_in_background();
    let tracker = TaskTracker::new();
    let departed = app.pool.clone().map(|pool| Departed {
        pool,
        tokens: crate::upstream::oauth::store::TokenFile::new(&settings.state_dir),
        tracker: tracker.clone(),
    });
    if let (Some(d), Some(t)) = (&departed, &tokens) {
        // Tokens removed while the bridge was down: their callers' sign-ins go before any
        // request is served (revoked in the background).
        d.forget(t).await;
    }
    let hub = Hub::new(app.maker.clone(), settings.serve.clone());
    if let Some(pool) = app.pool.clone() {
        // A forgotten client's own processes of its `perClient` servers close with it.
        let tracker = tracker.clone();
        hub.on_release(Arc::new(move |sandbox: &str| {
            let (pool, sandbox) = (pool.clone(), sandbox.to_string());
            tracker.spawn(async move { pool.release_caller(&sandbox).await });
        }));
    }
    let template = BridgeServer::many(Arc::new(hub.clone()), settings.clone());
    let mcp_ct = CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(mcp_ct.clone())
        .with_max_request_body_bytes(settings.serve.http_max_body);
    if !local.ip().is_loopback() {
        // Reached by name through a proxy or DNS: the bearer token, not the Host header,
        // admits a request.
        config = config.disable_allowed_hosts();
    }
    let mut sessions = LocalSessionManager::default();
    // A session lives as long as its sandbox may (its container stops earlier when idle).
    sessions.session_config.keep_alive = Some(settings.serve.sandbox_ttl);
    let sessions = Arc::new(sessions);
    let mcp = StreamableHttpService::new(move || Ok(template.fresh()), sessions.clone(), config);
    let resource = format!("http://{local}{MCP_PATH}");
    let front = Arc::new(
        Front::new(
            tokens.clone(),
            settings.serve.requests_per_token,
            mcp,
            sessions,
            Origins::new(local, &settings.serve.allowed_origins),
            resource.clone(),
        )
        .with_public_callback(app.pool.as_ref().and_then(|p| p.public_callback().cloned())),
    );
    let stops = (CancellationToken::new(), CancellationToken::new());
    tracker.spawn(listen::accept(
        listener,
        front.clone(),
        listen::Admission {
            own_user_only: tokens.is_none(),
            gate: Gate::new(settings.serve.connections_per_peer),
            unadmitted_for: settings.serve.unauth_timeout,
        },
        listen::Stops {
            accepting: stops.0.clone(),
            connections: stops.1.clone(),
        },
        tracker.clone(),
    ));
    tracker.spawn(reap(hub.clone(), stops.0.clone()));
    if let Some(path) = opts.token_file.clone() {
        tracker.spawn(reload_on_hangup(
            path,
            front,
            hub.clone(),
            departed,
            stops.0.clone(),
        ));
    }
    tracing::info!(
        tokens = tokens.as_ref().map_or(0, |t| t.names().len()),
        warm_pool = settings.serve.warm_pool,
        "serving MCP on {resource}"
    );
    crate::shutdown::signalled().await;
    tracing::info!(
        runs = hub.inflight(),
        "draining: new runs are refused; runs in flight get {} s",
        settings.serve.drain_timeout.as_secs()
    );
    stops.0.cancel();
    if !hub.drain(settings.serve.drain_timeout).await {
        tracing::warn!(
            runs = hub.inflight(),
            "drain time is up; stopping the runs left"
        );
    }
    mcp_ct.cancel();
    stops.1.cancel();
    tracker.close();
    app.shutdown().await;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), tracker.wait()).await;
    tracing::info!("stopped");
    Ok(())
}

/// What forgetting the upstream sign-ins of departed callers needs.
struct Departed {
    pool: Arc<crate::upstream::UpstreamPool>,
    tokens: crate::upstream::oauth::store::TokenFile,
    /// Where the revocations run (each bounded; the reload and the start do not wait).
    tracker: TaskTracker,
}

impl Departed {
    /// Forgets the sign-ins of callers whose token is not in `tokens`.
    async fn forget(&self, tokens: &Tokens) {
        self.forget_keys(tokens.identity_keys()).await;
    }

    /// Forgets the sign-ins of callers whose identity key is not in `keys`.
    async fn forget_keys(&self, keys: std::collections::HashSet<String>) {
        use crate::upstream::oauth::departed::{forget_departed, revoke_departed};
        match forget_departed(&self.tokens, keys).await {
            Ok(gone) if gone.is_empty() => {}
            Ok(gone) => {
                tracing::info!(
                    callers = gone.len(),
                    "forgot the upstream sign-ins of tokens no longer in the tokens file"
                );
                let pool = self.pool.clone();
                self.tracker
                    .spawn(async move { revoke_departed(gone, pool.servers()).await });
            }
            Err(e) => tracing::warn!("could not forget departed callers' sign-ins: {e}"),
        }
    }
}

/// Forgets unused sandboxes every so often until `stop`.
async fn reap(hub: Arc<Hub>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(hub.reap_every());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {
                let n = hub.reap();
                if n > 0 {
                    tracing::info!(forgotten = n, "forgot client sandboxes unused for MCP_BRIDGE_SANDBOX_TTL");
                }
            }
        }
    }
}

/// Re-reads the tokens file on each SIGHUP: a good file replaces the tokens (the sandboxes,
/// sessions and handles of tokens no longer in it, or whose secret changed under the same
/// name, are released); a bad one is reported and the old tokens stay.
async fn reload_on_hangup(
    path: PathBuf,
    front: Arc<Front>,
    hub: Arc<Hub>,
    departed: Option<Departed>,
    stop: CancellationToken,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: the tokens file is read once");
        return;
    };
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            got = hangups.recv() => if got.is_none() { return },
        }
        match Tokens::load(&path) {
            Ok(tokens) => {
                let count = tokens.names().len();
                let keys = departed.as_ref().map(|_| tokens.identity_keys());
                let ended = front.set_tokens(tokens);
                // Their sandboxes go, and with them their own handles of remote servers.
                let released = hub.revoke(&ended);
                if let (Some(d), Some(keys)) = (&departed, keys) {
                    d.forget_keys(keys).await;
                }
                tracing::info!(
                    tokens = count,
                    ended = ended.len(),
                    released,
                    "reloaded the tokens file {}",
                    ShownPath(&path)
                );
            }
            Err(err) => tracing::error!("SIGHUP: kept the old tokens: {err}"),
        }
    }
}
