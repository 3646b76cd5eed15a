//! [`Engine`]: the sandbox actor's connection to the container engine, and what the bridge
//! knows about that engine: which frame channel works on it, whether it was lost, and whether
//! sandboxes of ours may be left on it.
//!
//! The actor asks it for a new sandbox ([`Engine::start_sandbox`], in `start.rs`), tells it
//! when a run found the engine lost ([`Engine::note_lost`]), and lets it go at exit
//! ([`Engine::close`]). Losing the engine (see `sandbox/session/engine_loss.rs` for how a session tells)
//! closes the connection; the next sandbox reconnects, and first removes the orphans: this
//! bridge's containers the lost engine could not remove (`orphans.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{orphans, Connector};
use crate::config::{ChannelMode, Settings};
use crate::container::{remove_leftovers, Connection, ContainerRuntime, Owner, RuntimeError};
use crate::image::{Provisioner, Requested};
use crate::outbox::Outbox;
use crate::sandbox::error::BridgeError;

/// How long the bridge, when exiting, may spend reconnecting to remove sandboxes it could not
/// remove while the engine was gone.
const EXIT_SWEEP_SECS: u64 = 5;

/// Which frame channel new sandboxes are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FrameChannel {
    /// The socket channel, where the engine can mount it (stdio stays the fallback).
    Socket,
    /// Stdio only: configured so, or the engine refused the socket's mount once.
    Stdio,
}

/// The engine connection and its state; owned by the sandbox actor.
pub(super) struct Engine {
    pub(super) settings: Arc<Settings>,
    connector: Connector,
    /// Builds the image when it is missing.
    provisioner: Provisioner,
    pub(super) owner: Owner,
    /// The bridge's tasks (a sandbox's request tasks go on it too).
    pub(super) tracker: TaskTracker,
    conn: Option<Connection>,
    /// Which frame channel new sandboxes are offered.
    pub(super) channel: FrameChannel,
    /// The connection was closed (the engine went away, or stopped answering): containers of
    /// ours may be left on it, to be removed once it answers again.
    orphans_due: bool,
    /// A run found the engine lost: why. The actor forgets the engine after that run.
    lost: Option<String>,
    /// Sandboxes started so far (part of their names).
    pub(super) generation: u64,
    /// Where sandboxes' files go.
    pub(super) outbox: Arc<Outbox>,
    /// The background removal of dead bridges' leftovers on the current connection.
    sweep: Option<Sweep>,
}

/// A background removal of dead bridges' leftovers, ended before its connection closes: a
/// removal cut off by this bridge's own exit (its podman service stopped) is no failure to
/// warn of, and what it did not remove is the next bridge's to remove.
struct Sweep {
    stop: CancellationToken,
    done: tokio::task::JoinHandle<()>,
}

impl Sweep {
    /// Stops the removal (quietly) and waits for its task to end.
    async fn end(self) {
        self.stop.cancel();
        let _ = self.done.await;
    }
}

impl Engine {
    /// Not yet connected: the first sandbox connects.
    pub(super) fn new(
        settings: Arc<Settings>,
        connector: Connector,
        provisioner: Provisioner,
        tracker: TaskTracker,
        outbox: Arc<Outbox>,
        slot: Option<&str>,
    ) -> Self {
        let channel = match settings.channel {
            ChannelMode::Stdio => FrameChannel::Stdio,
            ChannelMode::Auto => FrameChannel::Socket,
        };
        Engine {
            settings,
            connector,
            provisioner,
            owner: Owner::current().with_slot(slot),
            tracker,
            conn: None,
            channel,
            orphans_due: false,
            lost: None,
            generation: 0,
            outbox,
            sweep: None,
        }
    }

    /// The connected engine, connecting first when there is no connection or the engine no
    /// longer answers: image check, then (in the background) removal of this bridge's orphans
    /// and of dead bridges' leftovers.
    ///
    /// # Errors
    /// [`BridgeError::Runtime`] when no engine answers, or it lacks the image and builds are
    /// off; [`BridgeError::ImageBuilding`] when it lacks the image and a build runs (started
    /// here when none did); [`BridgeError::ImageBuildFailed`] when the last build failed recently.
    pub(super) async fn connected(&mut self) -> Result<Arc<dyn ContainerRuntime>, BridgeError> {
        if let Some(c) = &self.conn {
            // A new sandbox is due: make sure the engine still answers (a podman service of
            // ours may have died while no sandbox was there to notice).
            match c.runtime.ping().await {
                Ok(()) => return Ok(c.runtime.clone()),
                Err(err) => {
                    tracing::warn!(endpoint = %c.endpoint, cause = %err, "the container engine no longer answers; reconnecting");
                    self.disconnect().await;
                }
            }
        }
        let began = Instant::now();
        let conn = (self.connector)().await?;
        tracing::debug!(ms = began.elapsed().as_millis() as u64, endpoint = %conn.endpoint, "engine connected");
        if !conn.runtime.image_present(&self.settings.image).await? {
            let engine = conn.runtime.engine().to_string();
            conn.close().await;
            let image = self.settings.image.clone();
            return Err(match self.provisioner.request() {
                Requested::Building => BridgeError::ImageBuilding,
                Requested::Failed(error) => BridgeError::ImageBuildFailed { image, error },
                Requested::Off => RuntimeError::ImageMissing { image, engine }.into(),
            });
        }
        if self.orphans_due && orphans::sweep(&conn.runtime, &self.owner, &self.tracker).await {
            self.orphans_due = false;
        }
        // In the background: a container stuck in the engine must not delay this call.
        let (runtime, owner) = (conn.runtime.clone(), self.owner.clone());
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let done = self.tracker.spawn(async move {
            tokio::select! {
                biased;
                () = stopped.cancelled() => {
                    tracing::debug!("the removal of sandboxes of bridges that are gone was cut short by this bridge's exit; the next bridge removes the rest");
                }
                removed = remove_leftovers(runtime.as_ref(), &owner) => match removed {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(removed = n, "cleaned up sandboxes of bridges that are gone")
                    }
                    Err(err) => tracing::warn!(cause = %err, "could not list leftover sandboxes"),
                },
            }
        });
        if let Some(earlier) = self.sweep.replace(Sweep { stop, done }) {
            earlier.end().await;
        }
        let runtime = conn.runtime.clone();
        self.conn = Some(conn);
        Ok(runtime)
    }

    /// Closes the connection (stopping a podman service of ours); containers left on that
    /// engine are removed after the next connect.
    pub(super) async fn disconnect(&mut self) {
        if let Some(sweep) = self.sweep.take() {
            sweep.end().await;
        }
        if let Some(c) = self.conn.take() {
            c.close().await;
            self.orphans_due = true;
        }
    }

    /// Records that a run found the engine lost, for [`forget_if_lost`](Self::forget_if_lost).
    pub(super) fn note_lost(&mut self, cause: String) {
        self.lost = Some(cause);
    }

    /// When a run (noted) or the session (`session_lost`) found the engine lost: closes the
    /// connection and returns the endpoint, for the notice to the next call.
    pub(super) async fn forget_if_lost(&mut self, session_lost: Option<String>) -> Option<String> {
        let cause = self.lost.take().or(session_lost)?;
        let endpoint = self.conn.as_ref().map(|c| c.endpoint.clone());
        let endpoint = endpoint.unwrap_or_else(|| "the container engine".into());
        tracing::warn!(%endpoint, cause, "lost the container engine; the next call reconnects");
        self.disconnect().await;
        Some(endpoint)
    }

    /// At the actor's exit (its session closed): removes orphans left on an engine that went
    /// away, reconnecting for up to [`EXIT_SWEEP_SECS`] (whatever stays is removed by the next
    /// bridge on this host), then closes the connection.
    pub(super) async fn close(mut self) {
        if self.orphans_due && self.conn.is_none() {
            let limit = Duration::from_secs(EXIT_SWEEP_SECS);
            match tokio::time::timeout(limit, (self.connector)()).await {
                Ok(Ok(conn)) => self.conn = Some(conn),
                Ok(Err(err)) => {
                    tracing::warn!(cause = %err, "sandboxes of this bridge may remain on the engine that went away")
                }
                Err(_) => {
                    tracing::warn!("reconnecting to remove sandboxes left on the engine timed out")
                }
            }
        }
        if let Some(sweep) = self.sweep.take() {
            sweep.end().await;
        }
        if let Some(conn) = self.conn.take() {
            if self.orphans_due {
                orphans::remove_now(conn.runtime.as_ref(), &self.owner).await;
            }
            conn.close().await;
        }
    }
}
