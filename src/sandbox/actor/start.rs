//! Starting a sandbox on the engine: its name and spec, the socket frame channel (with stdio
//! as the fallback, for good, when the engine refuses to mount the socket's directory), and
//! the session's limits.

use std::sync::atomic::{AtomicU64, Ordering};

use super::engine::{Engine, FrameChannel};
use crate::calls::Dispatcher;
use crate::checked_dir::{Access, CheckedDir, FIX_RUNTIME};
use crate::container::{private_dir, ContainerRuntime, SandboxSpec};
use crate::sandbox::channel::ChannelListener;
use crate::sandbox::entrypoint;
use crate::sandbox::error::BridgeError;
use crate::sandbox::posture::Expected;
use crate::sandbox::session::{CallRoute, Session, SessionLimits};
use crate::shown::ShownPath;

impl Engine {
    /// Starts a sandbox session, connecting first when needed.
    ///
    /// # Errors
    /// The engine's or the boot's failure; a broken connection is closed (the next sandbox
    /// reconnects).
    pub(super) async fn start_sandbox(
        &mut self,
        dispatcher: &Dispatcher,
    ) -> Result<Session, BridgeError> {
        let runtime = self.connected().await?;
        if !self.settings.data.mounts.is_empty() && !runtime.sees_host_folders() {
            return Err(BridgeError::Mounts(format!(
                "{} is a remote engine (DOCKER_HOST={}): it cannot see this machine's folders. \
                 Use a local engine, or unset MCP_BRIDGE_MOUNTS",
                runtime.engine(),
                self.settings.docker_host.as_deref().unwrap_or("?")
            )));
        }
        self.generation += 1;
        let name = format!(
            "mcp-code-bridge-{}-{}-{}",
            self.owner.pid,
            self.generation,
            nonce()
        );
        let mut spec = SandboxSpec::new(
            &self.settings,
            name,
            entrypoint::command(),
            self.owner.labels(),
        );
        let channel = self.channel_for(runtime.as_ref());
        if self.settings.net.enabled() && channel.is_none() {
            return Err(BridgeError::Network(if !runtime.sees_host_folders() {
                format!(
                    "{} is a remote engine (DOCKER_HOST={}): the sandbox's way out is a socket \
                     the engine must mount from this machine. Use a local engine, or unset \
                     MCP_BRIDGE_NETWORK_ALLOW",
                    runtime.engine(),
                    self.settings.docker_host.as_deref().unwrap_or("?")
                )
            } else {
                "the sandbox's way out is a socket in the frame channel's folder, and this \
                 engine got none (MCP_BRIDGE_CHANNEL=stdio, or the engine refused the mount)"
                    .to_string()
            }));
        }
        spec.channel_dir = channel
            .as_ref()
            .map(|(l, inside)| (l.host_dir().to_path_buf(), inside.clone()));
        let expected = (runtime.isolates() && !self.settings.allow_weak_sandbox)
            .then(|| Expected::from_settings(&self.settings));
        let limits = SessionLimits {
            max_frame: self.settings.max_frame,
            memory_bytes: self.settings.memory_bytes,
            max_pending_results: self.settings.max_pending_results,
        };
        let mut started = Session::start(
            runtime.clone(),
            &spec,
            CallRoute {
                dispatcher: dispatcher.clone(),
                tracker: self.tracker.clone(),
            },
            limits,
            channel.map(|(l, _)| l),
            expected.as_ref(),
            self.outbox.clone(),
        )
        .await;
        let refused = match (&started, &spec.channel_dir) {
            (Err(BridgeError::Runtime(err)), Some((dir, _))) => err.refuses_mount_of(dir),
            _ => false,
        };
        if refused {
            // E.g. an engine that cannot see this machine's files: go on without the socket,
            // for this sandbox and every later one. Any other engine error is just this start's.
            tracing::info!("the engine refused the frame-channel mount; frames use stdio");
            self.channel = FrameChannel::Stdio;
            if self.settings.net.enabled() {
                return Err(BridgeError::Network(
                    "the engine refused to mount the frame channel's folder, where the \
                     sandbox's way out is"
                        .into(),
                ));
            }
            spec.channel_dir = None;
            started = Session::start(
                runtime.clone(),
                &spec,
                CallRoute {
                    dispatcher: dispatcher.clone(),
                    tracker: self.tracker.clone(),
                },
                limits,
                None,
                expected.as_ref(),
                self.outbox.clone(),
            )
            .await;
        }
        if let Err(BridgeError::Runtime(err)) = &started {
            if let Some(m) = spec.mounts.iter().find(|m| err.refuses_mount_of(&m.host)) {
                return Err(BridgeError::Mounts(format!(
                    "{} could not mount {} at {}: {err}. An engine in a VM (podman machine, \
                     Docker Desktop) sees only the folders shared with the VM",
                    runtime.engine(),
                    m.host.display(),
                    m.inside
                )));
            }
        }
        match started {
            Ok(s) => {
                tracing::info!(container = %s.id(), "sandbox started");
                Ok(s)
            }
            Err(err) => {
                if matches!(&err, BridgeError::Runtime(e) if e.is_transport())
                    || matches!(err, BridgeError::EngineLost { .. })
                {
                    // The engine connection itself may be broken: reconnect next time.
                    self.disconnect().await;
                }
                Err(err)
            }
        }
    }

    /// A socket channel for the next sandbox and where it appears inside, when the settings
    /// and the engine allow one.
    fn channel_for(&self, runtime: &dyn ContainerRuntime) -> Option<(ChannelListener, String)> {
        if self.channel == FrameChannel::Stdio {
            return None;
        }
        let path = private_dir(&self.settings);
        let base = match CheckedDir::open(&path, Access::Private, FIX_RUNTIME) {
            Ok(base) => base,
            Err(err) => {
                tracing::warn!(cause = %err, "no frame channel socket; frames use stdio");
                return None;
            }
        };
        ChannelListener::remove_stale(&base);
        // Unique per process, even with several bridges in one process (tests).
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("ch-{}-{n}", self.owner.pid);
        match ChannelListener::bind(&base, &name) {
            Ok(listener) => {
                let inside = runtime.channel_target(listener.host_dir())?;
                Some((listener, inside))
            }
            Err(err) => {
                tracing::warn!(cause = %err, dir = %ShownPath(base.path()), "no frame channel socket; frames use stdio");
                None
            }
        }
    }
}

fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{t:08x}")
}
