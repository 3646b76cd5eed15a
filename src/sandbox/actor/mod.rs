//! [`Sandbox`]: the actor owning the one persistent sandbox session (and, through
//! `sandbox/engine.rs`, the engine connection).
//!
//! Runs are queued FIFO on the actor's channel and executed one at a time; a queued run's wait
//! counts against its timeout. The actor creates the sandbox lazily, interrupts code that
//! overruns its deadline (killing the sandbox if the interrupt is ignored), replaces a dead
//! sandbox on the next run and tells that run its state was reset, and stops the sandbox when
//! idle, saving the user's namespace first and restoring it into the next sandbox (through
//! `snapshot::Snapshots`, the feature's one owner). While a cell runs for a client that asked for progress, it polls the
//! cell's output. Callers hold a cheap [`Sandbox`] handle (`handle.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::error::{explain_exit, BridgeError};
use super::progress::Progress;
use super::session::{FrameIds, Session};
use super::snapshot::{AfterRestore, Snapshots};
use crate::calls::Dispatcher;
use crate::calls::RunScope;
use crate::config::Settings;
use crate::report::{RunReport, RunStatus};
use engine::Engine;

mod engine;
mod exec;
mod handle;
mod image_wait;
mod orphans;
mod output;
mod start;

/// How long interrupted code gets to stop before the sandbox is killed.
pub const INTERRUPT_GRACE_MS: u64 = 1000;
/// How long a closing sandbox gets to exit by itself before it is removed.
pub const CLOSE_GRACE_MS: u64 = 500;
/// Characters of each output stream's end a progress poll asks for.
const PROGRESS_TAIL: usize = 1024;

pub use crate::container::Connector;
pub use handle::Sandbox;

/// One `run_python` request.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Python source.
    pub code: String,
    /// Servers to load (shared with the report and the exec frame, never copied).
    pub servers: Arc<[String]>,
    /// Time allowed, counted from `arrived` (sandbox startup excluded).
    pub timeout: Duration,
    /// When the request arrived.
    pub arrived: Instant,
    /// Trips when the client cancels the request.
    pub cancel: CancellationToken,
    /// Where the run reports that it is alive (MCP progress notifications).
    pub progress: Progress,
    /// The run's scope (id, `allowed_tools`, who to ask for approval, tallies).
    pub scope: Arc<RunScope>,
}

/// What to do after an exec attempt.
enum Retry {
    /// Done: report this.
    No(RunReport),
    /// The sandbox died before the code started; run it again on a fresh sandbox.
    OnFreshSandbox(BridgeError),
}

/// How the actor answers a run.
enum Outcome {
    /// It ran (or failed): report this.
    Done(RunReport),
    /// The image is missing and a build runs: wait for it, then send the run again.
    AwaitImage(RunRequest),
}

enum Command {
    Run(RunRequest, oneshot::Sender<Outcome>),
    Prewarm,
    /// Counts as use: the idle stop waits again (a warm pool's unassigned sandboxes).
    Touch,
    /// Stop now as when idle (namespace saved, restored by the next run): `serve`'s hub
    /// needs the room for another client.
    Evict,
}

struct Actor {
    settings: Arc<Settings>,
    engine: Engine,
    dispatcher: Dispatcher,
    session: Option<Session>,
    /// Why the sandbox the next run gets is a fresh one (its notice says so).
    notice: Option<String>,
    /// The snapshot of the user's namespace (saved at an idle stop, restored after).
    snapshots: Snapshots,
    /// Ids of the exec, save and restore frames.
    ids: FrameIds,
    /// A sandbox was lost (killed after a timeout, died): start its replacement as soon as
    /// no call is waiting, so the next call does not pay for it (`MCP_BRIDGE_PREWARM`).
    respawn_due: bool,
    last_used: Instant,
    ct: CancellationToken,
    tracker: TaskTracker,
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        self.snapshots.remove_dead();
        loop {
            let idle_deadline = match (&self.session, self.settings.idle_timeout) {
                (Some(_), Some(idle)) => Some(self.last_used + idle),
                _ => None,
            };
            tokio::select! {
                biased;
                _ = self.ct.cancelled() => break,
                cmd = rx.recv() => match cmd {
                    None => break,
                    Some(Command::Run(req, reply)) => {
                        let outcome = self.run_one(req).await;
                        self.last_used = Instant::now();
                        let _ = reply.send(outcome);
                    }
                    Some(Command::Prewarm) => self.prewarm(true).await,
                    Some(Command::Touch) => self.last_used = Instant::now(),
                    Some(Command::Evict) => {
                        if let Some(s) = self.session.take() {
                            let why = "The sandbox was stopped to make room for another client's \
                                 (MCP_BRIDGE_SANDBOXES_PER_TOKEN, MCP_BRIDGE_MAX_SANDBOXES) and \
                                 started afresh";
                            self.stop_idle(s, why.to_string()).await;
                        }
                    }
                },
                // A replacement does not import ahead: the modules may be what broke its
                // predecessor (a hang, a crash), and a run may be on its way.
                _ = std::future::ready(()), if self.respawn_due && self.settings.prewarm => {
                    self.prewarm(false).await;
                }
                _ = sleep_until_opt(idle_deadline) => {
                    if let Some(s) = self.session.take() {
                        let idle = self.settings.idle_timeout.unwrap_or_default().as_secs();
                        let why = format!("The sandbox was stopped after {idle} s idle and started afresh");
                        self.stop_idle(s, why).await;
                    }
                }
            }
        }
        self.forget_engine_if_lost().await;
        if let Some(s) = self.session.take() {
            s.close(Duration::from_millis(CLOSE_GRACE_MS)).await;
        }
        self.engine.close().await;
        // The snapshot is the user's data, and a new bridge is a new conversation: not kept.
        self.snapshots.discard();
        tracing::debug!("sandbox actor stopped");
    }

    /// Stops the idle sandbox `s`, saving its namespace first; `why` starts the next run's
    /// notice. One that already died is treated as a death: nothing to save, and a snapshot
    /// from before stays for its successor.
    async fn stop_idle(&mut self, s: Session, why: String) {
        if s.has_ended() {
            self.notice = Some(self.stopped_since_last_call(&s));
            self.tracker.spawn(s.kill());
            return;
        }
        tracing::info!("stopping the idle sandbox");
        self.notice = Some(match self.snapshots.save(&s, &mut self.ids).await {
            Ok(()) => why,
            Err(reason) => format!("{why}; its variables could not be saved ({reason})"),
        });
        s.close(Duration::from_millis(CLOSE_GRACE_MS)).await;
    }

    /// Starts a sandbox ahead of use when none is running; with `preload`, it then imports
    /// `MCP_BRIDGE_PRELOAD`'s modules (in the sandbox, while the actor goes on serving: an exec
    /// sent meanwhile runs after them).
    async fn prewarm(&mut self, preload: bool) {
        self.respawn_due = false;
        if self.session.is_some() {
            return;
        }
        let started = Instant::now();
        match self.ensure_session().await {
            Ok(()) => tracing::debug!(
                ms = started.elapsed().as_millis() as u64,
                "sandbox started ahead of use"
            ),
            Err(err) => tracing::info!(cause = %err, "could not start the sandbox ahead of use"),
        }
        let modules = &self.settings.serve.preload;
        if let Some(s) = self
            .session
            .as_ref()
            .filter(|_| preload && !modules.is_empty())
        {
            if let Err(err) = s.preload(modules).await {
                tracing::info!(cause = %err, "could not ask the sandbox to import modules ahead");
            }
        }
        self.last_used = Instant::now();
    }

    async fn run_one(&mut self, req: RunRequest) -> Outcome {
        let servers = req.servers.clone();
        match self.run_inner(req).await {
            Ok(mut report) => {
                report.servers = servers;
                Outcome::Done(report)
            }
            Err(req) => Outcome::AwaitImage(req),
        }
    }

    /// Runs `req`; `Err(req)` hands it back when the image is missing and being built.
    async fn run_inner(&mut self, req: RunRequest) -> Result<RunReport, RunRequest> {
        let secs = req.timeout.as_secs();
        if req.cancel.is_cancelled() {
            return Ok(RunReport::failed(
                RunStatus::Cancelled,
                "cancelled by the client before it started",
            ));
        }
        let mut deadline = req.arrived + req.timeout;
        if Instant::now() >= deadline {
            return Ok(RunReport::failed(
                RunStatus::Timeout,
                format!("timed out after {secs} s while waiting for earlier calls to finish; the code did not run"),
            ));
        }
        let startup = Instant::now();
        if self.session.is_none() {
            req.progress.report(if self.snapshots.is_kept() {
                "starting the sandbox and restoring saved variables"
            } else {
                "starting the sandbox"
            });
        }
        match self.ensure_session().await {
            Ok(()) => {}
            Err(BridgeError::ImageBuilding) => return Err(req),
            Err(err) => return Ok(RunReport::failed(RunStatus::SandboxError, err.to_string())),
        }
        deadline += startup.elapsed();
        let mut notice = self.notice.take();
        let mut report = match self.exec(&req, deadline).await {
            Retry::No(report) => report,
            Retry::OnFreshSandbox(_) => {
                // The sandbox died before it started this code (e.g. it was killed just before
                // the call): the code never ran, so running it on a fresh sandbox is safe.
                tracing::info!("sandbox died before the code started; retrying on a fresh one");
                if let Err(err) = self.ensure_session().await {
                    return Ok(RunReport::failed(RunStatus::SandboxError, err.to_string()));
                }
                notice = notice.or(Some(
                    "The sandbox had stopped before this call and was started afresh".into(),
                ));
                match self.exec(&req, deadline).await {
                    Retry::No(report) => report,
                    // Twice in a row before the code was acknowledged: on the stdio channel
                    // (lazy `started`) that is most likely the code ending the process itself.
                    Retry::OnFreshSandbox(err) => {
                        let mut report = self.sandbox_died(err);
                        if let Some(e) = report.error.as_mut() {
                            e.push_str("\nIt died the same way on a fresh sandbox: the code itself probably ends the sandbox process.");
                        }
                        report
                    }
                }
            }
        };
        let fresh = self.snapshots.notice(notice.as_deref());
        if report.notice.is_none() {
            report.notice = fresh;
        }
        self.forget_engine_if_lost().await;
        Ok(report)
    }

    /// Makes sure a live session exists, replacing a dead one.
    async fn ensure_session(&mut self) -> Result<(), BridgeError> {
        self.forget_engine_if_lost().await;
        if let Some(s) = &self.session {
            if !s.has_ended() {
                return Ok(());
            }
            self.notice = Some(self.stopped_since_last_call(s));
            if let Some(s) = self.session.take() {
                self.tracker.spawn(s.kill());
            }
        }
        self.session = Some(self.engine.start_sandbox(&self.dispatcher).await?);
        self.restore_namespace().await
    }

    /// Restores the kept snapshot into the sandbox just started; when that sandbox dies or
    /// hangs while restoring, it is replaced by one without the snapshot.
    ///
    /// # Errors
    /// Only when starting the replacement sandbox fails.
    async fn restore_namespace(&mut self) -> Result<(), BridgeError> {
        let session = self.session.as_ref().expect("a session was just started");
        if self.snapshots.restore(session, &mut self.ids).await == AfterRestore::Keep {
            return Ok(());
        }
        if let Some(s) = self.session.take() {
            s.kill().await;
        }
        self.session = Some(self.engine.start_sandbox(&self.dispatcher).await?);
        Ok(())
    }

    /// Why a sandbox that ended between calls was replaced (the start of its notice).
    fn stopped_since_last_call(&self, s: &Session) -> String {
        let reason = match s.death() {
            Some(d) => explain_exit(d.code, self.settings.memory_bytes),
            None => "it exited".to_string(),
        };
        format!("The sandbox had stopped since the last call ({reason}) and was started afresh")
    }

    /// When a run or the session found the engine lost: the session is let go (asked to exit
    /// over its socket channel; its container is removed once an engine answers again), the
    /// connection (and a podman service of ours) is closed, and the next call gets a fresh
    /// sandbox on a new connection.
    async fn forget_engine_if_lost(&mut self) {
        let session_lost = self.session.as_ref().and_then(Session::engine_lost);
        let Some(endpoint) = self.engine.forget_if_lost(session_lost).await else {
            return;
        };
        if let Some(s) = self.session.take() {
            self.tracker
                .spawn(s.close(Duration::from_millis(CLOSE_GRACE_MS)));
        }
        self.respawn_due = true;
        self.notice = Some(format!(
            "The connection to the container engine ({endpoint}) was lost, so the sandbox was replaced"
        ));
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
