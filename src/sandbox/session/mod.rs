//! [`Session`]: one live sandbox container and the tasks that serve it.
//!
//! A session owns the container id and its tasks: a writer (`writer.rs`, the only one
//! writing to the sandbox), the read loops (`reader.rs`: attach stream and socket channel;
//! `inbound.rs` handles each frame, `calls.rs` the sandbox's requests, `preload.rs` the answer
//! to the imports asked for ahead) and a waiter
//! (`waiter.rs`, learns the exit code). `boot.rs` starts them and waits for `ready`; `state.rs`
//! is the one place their shared state lives; `limits.rs` holds the bounds. The tasks run in a
//! `session{container=…}` span. The sandbox actor owns the session; nothing else holds it.
//! Everything read from the container is untrusted: see `crate::lines` and `protocol.rs` for
//! the limits applied.

mod boot;
mod calls;
mod cell_progress;
mod engine_loss;
mod inbound;
pub mod json_cost;
mod keeping;
mod limits;
mod preload;
mod reader;
mod state;
mod waiter;
mod writer;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use base64::Engine as _;

use super::channel::ChannelListener;
use super::error::{explain_exit, BridgeError};
use super::posture::Expected;
use super::progress::Progress;
use super::protocol::{ExecServers, ExecTools, Outbound, RestoredFrame, ResultFrame, SentTools};
use crate::calls::{Language, LoadedTools};
use crate::container::{ContainerRuntime, SandboxSpec};
use crate::outbox::{CellFiles, Outbox};
use cell_progress::CellProgress;
use state::{Running, Shared};
use writer::Outgoing;

pub use calls::CallRoute;
pub use keeping::SaveEvent;
pub use limits::SessionLimits;
pub use state::Death;

/// Ids of the exec, save and restore frames sent to the actor's sessions: each one new.
#[derive(Debug)]
pub struct FrameIds(u64);

impl FrameIds {
    /// Ids from 1.
    pub fn new() -> Self {
        FrameIds(1)
    }

    /// The next id.
    pub fn next(&mut self) -> u64 {
        self.0 += 1;
        self.0 - 1
    }
}

impl Default for FrameIds {
    fn default() -> Self {
        FrameIds::new()
    }
}

/// Characters of the container id shown in the session's span.
const SPAN_ID_CHARS: usize = 12;

/// A running sandbox container.
pub struct Session {
    id: String,
    runtime: Arc<dyn ContainerRuntime>,
    writer: mpsc::Sender<Outgoing>,
    shared: Arc<Shared>,
    death: watch::Receiver<Option<Death>>,
    /// The container's stdin, held open while frames use the socket channel.
    _stdin: Mutex<Option<Pin<Box<dyn AsyncWrite + Send>>>>,
    _tasks: Vec<AbortOnDropHandle<()>>,
    /// Ends the tasks answering the sandbox's requests when the session goes.
    _calls_end: tokio_util::sync::DropGuard,
    /// Per server: the tool entries this sandbox was last sent (later execs leave the server out
    /// of `tools` while they are unchanged).
    sent_tools: Mutex<SentTools>,
    /// Bytes of restore chunks queued but not yet written (see [`Session::restore_chunk`]).
    restore_budget: Arc<Semaphore>,
    /// The network budget, reset at each exec, when the sandbox has a way out.
    egress: Option<Arc<crate::egress::RunBudget>>,
}

/// Bytes of snapshot chunks a restore may have queued for the sandbox at once.
pub const RESTORE_IN_FLIGHT: usize = 4 << 20;

/// How long before the run's deadline its tool calls are given up, at most: a call still
/// running then is cancelled downstream (`notifications/cancelled`) and raises in the sandbox,
/// whose code can still act on it before the run's own timeout interrupts the cell.
pub const CALL_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Who an exec runs for: the servers its run loaded, its calls' deadline and its run's scope.
pub struct ExecTarget {
    /// Servers the run loaded.
    pub servers: Arc<[String]>,
    /// When its tool calls' time is up ([`ExecTarget::calls_deadline`]).
    pub deadline: tokio::time::Instant,
    /// The run's scope.
    pub scope: Arc<crate::calls::RunScope>,
}

impl ExecTarget {
    /// The deadline of the tool calls of a run ending at `run`: [`CALL_MARGIN`] before it, or
    /// a tenth of the time left when that is less. Every call of the run shares it: none has
    /// a timeout of its own that starts when it is sent.
    pub fn calls_deadline(run: tokio::time::Instant) -> tokio::time::Instant {
        let left = run.saturating_duration_since(tokio::time::Instant::now());
        run - CALL_MARGIN.min(left / 10)
    }
}

impl Session {
    /// Creates, attaches and starts a container for `spec`, boots the entrypoint and waits
    /// until it is ready. With `channel` (and `spec.channel_dir` naming where it is mounted),
    /// frames move to that socket once the entrypoint connects; otherwise they stay on stdio.
    /// Files the execs deliver go to `outbox`.
    ///
    /// # Errors
    /// [`BridgeError::Runtime`] when the engine refuses; [`BridgeError::Boot`] when the
    /// entrypoint does not answer. The container is removed on failure.
    pub async fn start(
        runtime: Arc<dyn ContainerRuntime>,
        spec: &SandboxSpec,
        route: CallRoute,
        limits: SessionLimits,
        channel: Option<ChannelListener>,
        expected: Option<&Expected>,
        outbox: Arc<Outbox>,
    ) -> Result<Session, BridgeError> {
        let began = tokio::time::Instant::now();
        let id = runtime.create(spec).await?;
        tracing::debug!(
            ms = began.elapsed().as_millis() as u64,
            "sandbox container created"
        );
        let channel = channel.zip(spec.channel_dir.as_ref().map(|(_, inside)| inside.clone()));
        let span = tracing::info_span!(
            "session",
            container = id.get(..SPAN_ID_CHARS).unwrap_or(&id)
        );
        let booted = boot::boot(&runtime, &id, route, limits, channel, expected, outbox)
            .instrument(span)
            .await;
        match booted {
            Ok(b) => Ok(Session {
                id,
                runtime,
                writer: b.writer,
                shared: b.shared,
                death: b.death,
                _stdin: Mutex::new(b.stdin),
                _tasks: b.tasks,
                _calls_end: b.calls_end,
                sent_tools: Mutex::new(SentTools::default()),
                restore_budget: Arc::new(Semaphore::new(RESTORE_IN_FLIGHT)),
                egress: b.egress,
            }),
            Err(e) => {
                if let Err(err) = runtime.remove(&id).await {
                    tracing::warn!(container = %id, cause = %err, "could not remove a sandbox that failed to start");
                }
                Err(e)
            }
        }
    }

    /// The engine's container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    async fn send(&self, line: Vec<u8>) -> Result<(), BridgeError> {
        self.send_out(line.into()).await
    }

    async fn send_out(&self, out: Outgoing) -> Result<(), BridgeError> {
        self.writer.send(out).await.map_err(|_| BridgeError::Died {
            reason: "its stdin is closed".into(),
            stderr_tail: self.shared.tail(),
            before_start: true,
        })
    }

    /// Starts exec `id` for `target`; the receiver yields its result, or the error that ended
    /// it.
    ///
    /// # Errors
    /// [`BridgeError::Died`] when the sandbox is already gone.
    pub async fn exec(
        &self,
        id: u64,
        code: &str,
        tools: &LoadedTools,
        target: ExecTarget,
        output_limit: usize,
    ) -> Result<oneshot::Receiver<Result<ResultFrame, BridgeError>>, BridgeError> {
        let (tx, rx) = oneshot::channel();
        let ExecTarget {
            servers,
            deadline,
            scope,
        } = target;
        if let Some(budget) = &self.egress {
            budget.begin_run(&scope.id);
        }
        let line = {
            let mut sent = self.sent_tools.lock().expect("sent tools lock");
            let frame_tools = ExecTools::for_exec(&mut sent, tools);
            Outbound::Exec {
                id,
                code,
                servers: ExecServers::for_exec(&mut sent, &servers),
                tools: &frame_tools,
                output_limit,
                language: (scope.language != Language::Python).then(|| scope.language.name()),
            }
            .to_line()
        };
        *self.shared.files.lock().expect("files lock") =
            Some(CellFiles::new(self.shared.outbox.clone(), id));
        self.shared
            .last_exec
            .store(id, std::sync::atomic::Ordering::Relaxed);
        *self.shared.running.lock().expect("running lock") = Some(Running {
            id,
            started: false,
            servers,
            deadline,
            scope,
            done: tx,
            progress: None,
        });
        if let Some(d) = self.death.borrow().clone() {
            self.shared.fail_running(BridgeError::Died {
                reason: explain_exit(d.code, self.shared.memory_bytes),
                stderr_tail: self.shared.tail(),
                before_start: true,
            });
        }
        self.send(line).await?;
        Ok(rx)
    }

    /// Reports exec `id`'s output to `sink` whenever it answers [`Session::poll_output`].
    pub fn report_output(&self, id: u64, sink: Progress) {
        if let Some(r) = self
            .shared
            .running
            .lock()
            .expect("running lock")
            .as_mut()
            .filter(|r| r.id == id)
        {
            r.progress = Some(CellProgress::new(sink));
        }
    }

    /// Asks the entrypoint for exec `id`'s output so far (the last `tail` characters of each
    /// stream); it comes back as progress. Never waits: a full queue skips this poll.
    pub fn poll_output(&self, id: u64, tail: usize) {
        let _ = self
            .writer
            .try_send(Outbound::Progress { id, tail }.to_line().into());
    }

    /// Asks the entrypoint for a snapshot of the user's namespace of at most `limit` bytes, in
    /// frames of `chunk` bytes; the receiver yields it as it arrives (it closes if the sandbox
    /// ends first).
    ///
    /// # Errors
    /// [`BridgeError::Died`] when the sandbox is gone.
    pub async fn save(
        &self,
        id: u64,
        limit: usize,
        chunk: usize,
    ) -> Result<mpsc::UnboundedReceiver<SaveEvent>, BridgeError> {
        let rx = self.shared.keeping.begin_save(id, limit, chunk);
        self.send(Outbound::SaveNamespace { id, limit, chunk }.to_line())
            .await?;
        Ok(rx)
    }

    /// Expects the report of restore `id` (before its chunks are sent).
    pub fn expect_restored(&self, id: u64) -> oneshot::Receiver<RestoredFrame> {
        self.shared.keeping.begin_restore(id)
    }

    /// Sends the next `bytes` of the snapshot restore `id` puts back; `done` on the last.
    /// Waits while [`RESTORE_IN_FLIGHT`] bytes of earlier chunks are not written yet, so a
    /// restore never holds the whole snapshot in memory.
    ///
    /// # Errors
    /// [`BridgeError::Died`] when the sandbox is gone.
    pub async fn restore_chunk(
        &self,
        id: u64,
        bytes: &[u8],
        done: bool,
    ) -> Result<(), BridgeError> {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        let line = Outbound::RestoreNamespace {
            id,
            data: &data,
            done,
        }
        .to_line();
        let share = u32::try_from(line.len().min(RESTORE_IN_FLIGHT)).unwrap_or(u32::MAX);
        let permit = self.restore_budget.clone().acquire_many_owned(share).await;
        self.send_out(Outgoing {
            line,
            _budget: permit.ok(),
        })
        .await
    }

    /// Asks the entrypoint to import `modules` ahead, before the next exec, into `sys.modules`
    /// only (`MCP_BRIDGE_PRELOAD`); an exec sent meanwhile waits for the imports. The answer is
    /// logged as it comes (`preload.rs`).
    ///
    /// # Errors
    /// [`BridgeError::Died`] when the sandbox is gone.
    pub async fn preload(&self, modules: &[String]) -> Result<(), BridgeError> {
        self.shared.preload.ask(modules);
        self.send(Outbound::Preload { modules }.to_line()).await
    }

    /// Asks the entrypoint to interrupt exec `id`.
    pub async fn interrupt(&self, id: u64) {
        let _ = self.send(Outbound::Interrupt { id }.to_line()).await;
    }

    /// Why the engine was lost while this session ran, if it was. Frames on the socket
    /// channel may still flow, but the container can no longer be watched or removed through
    /// this connection.
    pub fn engine_lost(&self) -> Option<String> {
        self.shared.engine.lost()
    }

    /// The exit of the container, once known.
    pub fn death(&self) -> Option<Death> {
        self.death.borrow().clone()
    }

    /// True once the container's output has ended (it is dead or dying), even before
    /// its exit code is known.
    pub fn has_ended(&self) -> bool {
        self.death().is_some() || self.shared.ended()
    }

    /// Waits until the container has ended.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes a watch channel.
    pub async fn died(&self) -> Death {
        let mut rx = self.death.clone();
        let guard = rx.wait_for(|d| d.is_some()).await;
        match guard {
            Ok(d) => d.clone().unwrap_or(Death { code: None }),
            Err(_) => Death { code: None },
        }
    }

    /// Kills and removes the container at once.
    pub async fn kill(self) {
        if let Err(err) = self.runtime.remove(&self.id).await {
            tracing::warn!(container = %self.id, cause = %err, "could not remove the sandbox");
        }
    }

    /// Asks the entrypoint to exit, waits up to `grace`, then removes the container.
    pub async fn close(self, grace: Duration) {
        if self.death().is_none() {
            let _ = self.send(Outbound::Shutdown.to_line()).await;
            let _ = tokio::time::timeout(grace, self.died()).await;
        }
        self.kill().await;
    }
}
