//! [`App`]: wires settings, the engine connector, the host-call backend and the sandbox actor,
//! and shuts them down in order. Shared by `run` (MCP server) and `exec` (one snippet).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::audit::{self, AuditLog};
use crate::calls::{Dispatcher, HostCalls};
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};
use crate::config::{self, Settings};
use crate::container::{self, SharedEngine};
use crate::outbox::Outbox;
use crate::policy::Policy;
use crate::sandbox::{Connector, Sandbox};
use crate::upstream::client::UpstreamTasks;
use crate::upstream::{UpstreamHostCalls, UpstreamPool};

pub mod runtime_dir;

/// Checks the folders a bridge keeps things in before it starts, making the missing ones: the
/// state folder, those of its own folders that exist (outbox, snapshots, tool cache), and the
/// private runtime folder (frame-channel and podman sockets), which is chosen here: the
/// per-user name, or when another user holds it a private folder of a random name recorded
/// in the state folder (`runtime_dir.rs`). Each is checked again where it is used; this only
/// refuses early, with the folder's name, owner and mode.
///
/// Returns the runtime folder to use, for [`Settings::runtime_folder`].
///
/// # Errors
/// The first folder refused (`checked_dir`).
pub fn check_folders(settings: &Settings) -> Result<std::path::PathBuf, DirError> {
    let state = CheckedDir::open(&settings.state_dir, Access::Shared, FIX_STATE)?;
    let inside = [
        ("outbox", Access::Private),
        ("snapshots", Access::Private),
        ("tool-cache", Access::Shared),
    ];
    for (name, access) in inside {
        if state.join(name).symlink_metadata().is_ok() {
            state.sub(name, access, FIX_STATE)?;
        }
    }
    runtime_dir::choose(&settings.named_private_dir(), &state)
}

/// The private runtime folder, chosen as [`check_folders`] chooses it, for the commands that
/// run no code but may start a podman service (`doctor`, `image`).
///
/// # Errors
/// The state folder or the runtime folder refused (`checked_dir`).
pub fn runtime_folder(settings: &Settings) -> Result<std::path::PathBuf, DirError> {
    let state = CheckedDir::open(&settings.state_dir, Access::Shared, FIX_STATE)?;
    runtime_dir::choose(&settings.named_private_dir(), &state)
}

/// How long shutdown may take before the process exits anyway.
pub const SHUTDOWN_TIMEOUT_SECS: u64 = 10;

/// A running bridge: settings, the sandbox actor and the tasks behind it.
pub struct App {
    /// Validated settings.
    pub settings: Arc<Settings>,
    /// Handle to the sandbox actor.
    pub sandbox: Sandbox,
    /// Root cancellation: cancelling it stops everything.
    pub ct: CancellationToken,
    /// The user's MCP servers, when configured through [`App::with_engine`].
    pub pool: Option<Arc<UpstreamPool>>,
    /// This session's files copied out of the sandbox.
    pub outbox: Arc<Outbox>,
    tracker: TaskTracker,
    /// The audit log, closed (queue written out, file synced) last at shutdown.
    audit: Option<AuditLog>,
    /// Makes more sandboxes like [`App::sandbox`] (`serve --http`: one per client).
    pub maker: SandboxMaker,
    /// The engine connection the sandboxes share (`serve --http`).
    engine: Option<Arc<SharedEngine>>,
}

/// Makes client sandboxes for `serve --http`: each with its own container, outbox, snapshot
/// and cancellation, sharing the engine connector, the dispatcher (policy, upstream servers)
/// and the bridge's task tracker (so shutdown waits for them). Cheap to clone.
#[derive(Clone)]
pub struct SandboxMaker {
    settings: Arc<Settings>,
    connector: Connector,
    dispatcher: Dispatcher,
    ct: CancellationToken,
    tracker: TaskTracker,
}

/// A sandbox made by [`SandboxMaker`], with what the client's results are served from.
pub struct MadeSandbox {
    /// The sandbox actor's handle.
    pub sandbox: Sandbox,
    /// Its files copied out.
    pub outbox: Arc<Outbox>,
    /// Cancelling it stops the actor: the container is removed, the snapshot deleted.
    pub ct: CancellationToken,
}

impl SandboxMaker {
    /// A new sandbox actor (no container until it is prewarmed or used) for the client
    /// sandbox `slot`.
    pub fn make(&self, slot: &str) -> MadeSandbox {
        let ct = self.ct.child_token();
        let outbox = Outbox::new(&self.settings);
        let sandbox = Sandbox::spawn(
            self.settings.clone(),
            self.connector.clone(),
            self.dispatcher.clone(),
            ct.clone(),
            &self.tracker,
            outbox.clone(),
            Some(slot),
        );
        MadeSandbox {
            sandbox,
            outbox,
            ct,
        }
    }
}

impl App {
    /// A bridge that finds a real container engine on first use and serves the MCP servers
    /// found in the configured sources.
    pub fn with_engine(settings: Arc<Settings>) -> App {
        App::with_engine_audited(settings, None)
    }

    /// [`App::with_engine`] writing every call and run to `audit` (opened by the caller from
    /// `settings.policy`, so a log that cannot be opened stops the bridge before it starts).
    pub fn with_engine_audited(settings: Arc<Settings>, audit: Option<AuditLog>) -> App {
        let s = settings.clone();
        let connector: Connector = Arc::new(move || {
            let s = s.clone();
            async move { container::connect(&s).await }.boxed()
        });
        App::with_connector(settings, audit, connector)
    }

    /// [`App::with_engine_audited`] for `serve --http`: every sandbox it makes shares one
    /// engine connection ([`SharedEngine`], closed at shutdown after the sandboxes).
    pub fn for_serving(settings: Arc<Settings>, audit: Option<AuditLog>) -> App {
        let engine = SharedEngine::new(settings.clone());
        let mut app = App::with_connector(settings, audit, engine.connector());
        app.engine = Some(engine);
        app
    }

    fn with_connector(
        settings: Arc<Settings>,
        audit: Option<AuditLog>,
        connector: Connector,
    ) -> App {
        let servers = Arc::new(config::discover(&settings.server_sources));
        tracing::info!(
            servers = servers.specs.len(),
            problems = servers.issues.len(),
            "MCP servers discovered"
        );
        let waiting: Vec<String> = servers
            .specs
            .iter()
            .filter(|s| s.consent == crate::config::Consent::Needed)
            .map(|s| crate::shown::Shown(&s.name).to_string())
            .collect();
        if !waiting.is_empty() {
            tracing::info!(
                "project servers not started until you approve them: {} (see `mcp-code-bridge servers`)",
                waiting.join(", ")
            );
        }
        let (ct, tracker) = (CancellationToken::new(), TaskTracker::new());
        let tasks = UpstreamTasks {
            tracker: tracker.clone(),
            ct: ct.clone(),
            call_lane: settings.call_lane,
            max_message: settings.data.max_server_message,
            tokens: None,
            question_timeout: settings.policy.question_timeout,
            login: crate::upstream::oauth::login::LoginOptions {
                timeout: settings.oauth.login_timeout,
                client_metadata_url: settings.oauth.client_metadata_url.clone(),
                public: None,
            },
            pins: Some(crate::upstream::pins::Pins::new(
                &settings.state_dir,
                settings.pin_tools,
            )),
        };
        let pool = Arc::new(
            UpstreamPool::with_tasks(servers, &settings.state_dir, tasks)
                .with_max_clients(settings.serve.max_sandboxes)
                .with_public_callback(
                    settings
                        .oauth
                        .public_url
                        .as_deref()
                        .map(crate::upstream::oauth::public::PublicCallback::new),
                ),
        );
        let backend = Arc::new(
            UpstreamHostCalls::new(pool.clone())
                .with_skills(crate::skills::SkillStore::new(&settings.state_dir)),
        );
        let mut app = App::assemble(settings, connector, backend, ct, tracker, audit);
        app.pool = Some(pool);
        app
    }

    /// Indexes, in the background, the tools of servers with no cached tool list.
    pub fn index_in_background(&self) {
        if let Some(pool) = self.pool.clone() {
            let ct = self.ct.clone();
            self.tracker.spawn(async move {
                tokio::select! {
                    _ = pool.ensure_indexed() => {}
                    _ = ct.cancelled() => {}
                }
            });
        }
    }

    /// A bridge with an explicit connector and host-call backend (tests use this).
    pub fn new(settings: Arc<Settings>, connector: Connector, backend: Arc<dyn HostCalls>) -> App {
        App::assemble(
            settings,
            connector,
            backend,
            CancellationToken::new(),
            TaskTracker::new(),
            None,
        )
    }

    fn assemble(
        settings: Arc<Settings>,
        connector: Connector,
        backend: Arc<dyn HostCalls>,
        ct: CancellationToken,
        tracker: TaskTracker,
        audit: Option<AuditLog>,
    ) -> App {
        let outbox = Outbox::new(&settings);
        let policy = Policy::new(&settings.policy, backend.clone(), audit.clone());
        let egress = crate::egress::EgressPolicy::new(&settings.net, audit.clone()).map(Arc::new);
        let dispatcher = Dispatcher::new(backend)
            .with_hook(Arc::new(policy))
            .with_egress(egress);
        let maker = SandboxMaker {
            settings: settings.clone(),
            connector: connector.clone(),
            dispatcher: dispatcher.clone(),
            ct: ct.clone(),
            tracker: tracker.clone(),
        };
        let sandbox = Sandbox::spawn(
            settings.clone(),
            connector,
            dispatcher,
            ct.child_token(),
            &tracker,
            outbox.clone(),
            None,
        );
        App {
            engine: None,
            maker,
            settings,
            sandbox,
            ct,
            pool: None,
            outbox,
            tracker,
            audit,
        }
    }

    /// Stops everything: the sandbox container is removed, any podman service we started is
    /// stopped, and every MCP server is closed (starts in progress abandoned, process groups
    /// killed after a short grace), all at once. Bounded by [`SHUTDOWN_TIMEOUT_SECS`]. Then the
    /// audit log's queue is written out and the file synced, within [`audit::FLUSH_TIMEOUT`]
    /// (the runs that ended in the shutdown have their lines by then).
    pub async fn shutdown(self) {
        self.ct.cancel();
        self.tracker.close();
        let everything = async {
            if let Some(pool) = &self.pool {
                pool.shutdown().await;
            }
            self.tracker.wait().await;
            if let Some(engine) = &self.engine {
                engine.close().await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(SHUTDOWN_TIMEOUT_SECS), everything)
            .await
            .is_err()
        {
            tracing::warn!("shutdown did not finish within {SHUTDOWN_TIMEOUT_SECS} s");
        }
        if let Some(audit) = &self.audit {
            audit.close(audit::FLUSH_TIMEOUT).await;
        }
    }
}
