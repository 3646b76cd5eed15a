//! [`Sandbox`]: the cheap handle callers hold to the sandbox actor. It spawns the actor, queues
//! runs on its channel, and waits in the caller's task for an image being built, so the actor
//! goes on serving meanwhile.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::engine::Engine;
use super::{image_wait, Actor, Command, Connector, Outcome, RunRequest};
use crate::calls::Dispatcher;
use crate::config::Settings;
use crate::image::{self, BuildSpec, EngineBuild, ImageBuild, Provisioner};
use crate::outbox::Outbox;
use crate::report::{RunReport, RunStatus};
use crate::sandbox::session::FrameIds;
use crate::sandbox::snapshot::Snapshots;

/// How many times a run goes back to wait for an image that went missing again.
const IMAGE_ROUNDS: usize = 3;

/// Handle to the sandbox actor; cheap to clone.
#[derive(Clone)]
pub struct Sandbox {
    tx: mpsc::Sender<Command>,
    provisioner: Provisioner,
    settings: Arc<Settings>,
    /// Hears when each run ends (for the policy hook).
    dispatcher: Dispatcher,
    /// What a run is told when the actor is gone.
    closed: &'static str,
}

/// What a run is told when the bridge's one sandbox has stopped.
const CLOSED: &str = "the bridge is shutting down";
/// What a run is told when a client sandbox of `serve --http` has stopped.
const CLOSED_SLOT: &str = "this client's sandbox was closed: its MCP session ended, its token \
     was revoked, or the bridge is shutting down";

impl Sandbox {
    /// Spawns the actor on `tracker`; it stops (removing its container) when `ct` is cancelled.
    /// Files the sandbox delivers go to `outbox`. `slot` marks one of many client sandboxes in
    /// this process (`serve --http`): its containers and its snapshot's name, so that neither is
    /// taken for another client's; `None` for the one sandbox of `run` and `exec`.
    pub fn spawn(
        settings: Arc<Settings>,
        connector: Connector,
        dispatcher: Dispatcher,
        ct: CancellationToken,
        tracker: &TaskTracker,
        outbox: Arc<Outbox>,
        slot: Option<&str>,
    ) -> Sandbox {
        let (tx, rx) = mpsc::channel(64);
        let builder = BuildSpec::from_settings(&settings)
            .map(|spec| EngineBuild::new(spec, connector.clone()) as Arc<dyn ImageBuild>);
        let provisioner = Provisioner::new(
            builder,
            image::lock::path(&settings.cache_dir),
            tracker.clone(),
            ct.clone(),
        );
        let snapshots = Snapshots::new(settings.clone(), ct.clone(), slot);
        let actor = Actor {
            engine: Engine::new(
                settings.clone(),
                connector,
                provisioner.clone(),
                tracker.clone(),
                outbox,
                slot,
            ),
            settings: settings.clone(),
            dispatcher: dispatcher.clone().with_saved(snapshots.saved_namespace()),
            session: None,
            notice: None,
            snapshots,
            ids: FrameIds::new(),
            respawn_due: false,
            last_used: Instant::now(),
            ct,
            tracker: tracker.clone(),
        };
        tracker.spawn(actor.run(rx));
        Sandbox {
            tx,
            provisioner,
            settings,
            dispatcher,
            closed: if slot.is_some() { CLOSED_SLOT } else { CLOSED },
        }
    }

    /// Starts the sandbox in the background if none is running, so the first call does not
    /// wait for it, and has it import `MCP_BRIDGE_PRELOAD`'s modules ahead (a run arriving
    /// meanwhile waits for them). A failure is only logged: the next call reports it.
    pub fn prewarm(&self) {
        let _ = self.tx.try_send(Command::Prewarm);
    }

    /// Counts as use, so an unassigned sandbox is not stopped as idle.
    pub fn touch(&self) {
        let _ = self.tx.try_send(Command::Touch);
    }

    /// Stops the container now, as the idle stop does: its namespace is saved and the next
    /// run restores it into a fresh one (`serve`'s hub making room for another client). After
    /// the runs already queued.
    pub fn evict(&self) {
        let _ = self.tx.try_send(Command::Evict);
    }

    /// Runs code in the sandbox. Never fails: every failure is a report with an error status.
    /// While the image is being built the run waits for it here, in the caller's task, so the
    /// actor goes on serving (`image/provision/`).
    pub async fn run(&self, req: RunRequest) -> RunReport {
        let scope = req.scope.clone();
        let code_bytes = req.code.len();
        let mut report = self.run_queued(req).await;
        scope.finished.cancel();
        let (trace, tokens) = self.dispatcher.trace(&scope, code_bytes, &report);
        report.trace = Some(trace);
        report.tokens = Some(tokens);
        self.dispatcher.run_ended(&scope, &report);
        report
    }

    /// Queues `req` on the actor, waiting here for an image being built.
    async fn run_queued(&self, mut req: RunRequest) -> RunReport {
        let shutting_down = || RunReport::failed(RunStatus::SandboxError, self.closed);
        for _ in 0..IMAGE_ROUNDS {
            if self.provisioner.is_building() {
                if let Some(report) =
                    image_wait::await_image(&self.provisioner, &self.settings, &mut req).await
                {
                    return report;
                }
            }
            let (tx, rx) = oneshot::channel();
            if self.tx.send(Command::Run(req, tx)).await.is_err() {
                return shutting_down();
            }
            match rx.await {
                Ok(Outcome::Done(report)) => return report,
                Ok(Outcome::AwaitImage(back)) => req = back,
                Err(_) => return shutting_down(),
            }
        }
        RunReport::failed(
            RunStatus::SandboxError,
            format!(
                "the sandbox image '{}' went missing again after each build; check what removes it",
                self.settings.image
            ),
        )
    }
}
