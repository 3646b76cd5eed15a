//! [`Session`]: one live sandbox container and the tasks that serve its stdio.
//!
//! A session owns the container id and three tasks: a writer (the only one touching the
//! container's stdin), a reader (reassembles frames from stdout, answers `call`s, logs stderr
//! and keeps its tail) and a waiter (learns the exit code). The sandbox actor owns the session;
//! nothing else holds it. Everything read from the container is untrusted: see `crate::lines` and
//! `protocol.rs` for the limits applied.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::pin::Pin;

use serde_json::value::RawValue;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::task::AbortOnDropHandle;

use super::channel::{ChannelListener, SOCKET_NAME};
use super::dispatch::Dispatcher;
use super::engine_loss::{self, EngineLink};
use super::entrypoint;
use super::error::{explain_exit, BridgeError};
use super::posture::{self, Expected};
use super::protocol::{ChannelOffer, ExecTools, Outbound, ResultFrame};
use super::reader::FrameSink;
use crate::container::{ContainerRuntime, SandboxSpec};
use crate::lines::LineTail;

/// How long the entrypoint may take to answer the boot frame.
pub const BOOT_TIMEOUT_SECS: u64 = 30;
/// How long to wait for the exit code once the output stream has ended.
pub const EXIT_CODE_WAIT_MS: u64 = 1500;
/// Sandbox requests in flight at once per session; more are refused with an error reply.
pub const MAX_IN_FLIGHT_CALLS: usize = 256;
/// Stderr lines kept for error messages.
pub const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line kept (longer ones are cut).
pub const STDERR_LINE_MAX: usize = 2000;
/// Frames queued for the container's stdin before writers wait.
const WRITE_QUEUE: usize = 256;

/// Bounds a session applies to what the sandbox sends and asks for.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Largest frame accepted from the sandbox, in bytes.
    pub max_frame: usize,
    /// The container's memory limit in bytes (to explain an exit 137).
    pub memory_bytes: u64,
    /// Bytes of replies queued for the sandbox before further replies become errors.
    pub max_pending_results: usize,
}

/// A frame queued for the sandbox, with the share of the reply budget it holds until written.
pub(super) struct Outgoing {
    pub(super) line: Vec<u8>,
    pub(super) _budget: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl From<Vec<u8>> for Outgoing {
    fn from(line: Vec<u8>) -> Self {
        Outgoing {
            line,
            _budget: None,
        }
    }
}

/// Why and how a sandbox ended.
#[derive(Debug, Clone)]
pub struct Death {
    /// Exit code, when the engine told it.
    pub code: Option<i64>,
}

pub(super) type ExecReply = oneshot::Sender<Result<ResultFrame, BridgeError>>;

pub(super) struct Running {
    pub(super) id: u64,
    pub(super) started: bool,
    pub(super) servers: Arc<[String]>,
    pub(super) deadline: tokio::time::Instant,
    pub(super) done: ExecReply,
}

pub(super) struct Shared {
    /// Set the moment the output stream ends, before the exit code is known.
    pub(super) ended: std::sync::atomic::AtomicBool,
    pub(super) running: Mutex<Option<Running>>,
    /// Answered by the `ready` frame with the sandbox's posture report.
    pub(super) ready: Mutex<Option<oneshot::Sender<Result<serde_json::Value, String>>>>,
    pub(super) stderr_tail: LineTail,
    pub(super) death: watch::Sender<Option<Death>>,
    pub(super) memory_bytes: u64,
    /// Whether the engine is still there, and whether frames can do without it.
    pub(super) engine: Arc<EngineLink>,
}

impl Shared {
    pub(super) fn tail(&self) -> String {
        self.stderr_tail.joined()
    }

    pub(super) fn fail_running(&self, mut err: BridgeError) {
        if let Some(r) = self.running.lock().expect("running lock").take() {
            if let BridgeError::Died { before_start, .. } = &mut err {
                *before_start = !r.started;
            }
            let _ = r.done.send(Err(err));
        }
    }

    pub(super) fn mark_dead(&self, code: Option<i64>) {
        let first = self.death.send_if_modified(|d| {
            if d.is_none() {
                *d = Some(Death { code });
                true
            } else {
                false
            }
        });
        if first {
            let reason = explain_exit(code, self.memory_bytes);
            let lost = self.engine.lost();
            if code == Some(0) {
                tracing::debug!("sandbox exited cleanly");
            } else if lost.is_none() {
                tracing::warn!(exit_code = ?code, "sandbox ended: {reason}");
            }
            let err = match lost {
                Some(cause) => BridgeError::EngineLost { cause },
                None => BridgeError::Died {
                    reason: reason.clone(),
                    stderr_tail: self.tail(),
                    before_start: false,
                },
            };
            if let Some(tx) = self.ready.lock().expect("ready lock").take() {
                let why = match &err {
                    BridgeError::EngineLost { .. } => err.to_string(),
                    _ => reason,
                };
                let _ = tx.send(Err(why));
            }
            self.fail_running(err);
        }
    }
}

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
    /// Per server: the tool entries this sandbox was last sent (later execs send `true` while
    /// they are unchanged).
    sent_tools: std::sync::Mutex<std::collections::HashMap<String, Arc<RawValue>>>,
}

impl Session {
    /// Creates, attaches and starts a container for `spec`, boots the entrypoint and waits
    /// until it is ready. With `channel` (and `spec.channel_dir` naming where it is mounted),
    /// frames move to that socket once the entrypoint connects; otherwise they stay on stdio.
    ///
    /// # Errors
    /// [`BridgeError::Runtime`] when the engine refuses; [`BridgeError::Boot`] when the
    /// entrypoint does not answer. The container is removed on failure.
    pub async fn start(
        runtime: Arc<dyn ContainerRuntime>,
        spec: &SandboxSpec,
        dispatcher: Dispatcher,
        limits: SessionLimits,
        channel: Option<ChannelListener>,
        expected: Option<&Expected>,
    ) -> Result<Session, BridgeError> {
        let began = tokio::time::Instant::now();
        let id = runtime.create(spec).await?;
        tracing::debug!(
            ms = began.elapsed().as_millis() as u64,
            "sandbox container created"
        );
        let channel = channel.zip(spec.channel_dir.as_ref().map(|(_, inside)| inside.clone()));
        match Self::boot(
            runtime.clone(),
            id.clone(),
            dispatcher,
            limits,
            channel,
            expected,
        )
        .await
        {
            Ok(s) => Ok(s),
            Err(e) => {
                if let Err(err) = runtime.remove(&id).await {
                    tracing::warn!(container = %id, cause = %err, "could not remove a sandbox that failed to start");
                }
                Err(e)
            }
        }
    }

    async fn boot(
        runtime: Arc<dyn ContainerRuntime>,
        id: String,
        dispatcher: Dispatcher,
        limits: SessionLimits,
        channel: Option<(ChannelListener, String)>,
        expected: Option<&Expected>,
    ) -> Result<Session, BridgeError> {
        let began = tokio::time::Instant::now();
        let attached = runtime.attach(&id).await?;
        runtime.start(&id).await?;
        tracing::debug!(
            ms = began.elapsed().as_millis() as u64,
            "sandbox attached and started"
        );
        let (death_tx, death) = watch::channel(None);
        let (ready_tx, mut ready_rx) = oneshot::channel();
        let shared = Arc::new(Shared {
            ended: std::sync::atomic::AtomicBool::new(false),
            running: Mutex::new(None),
            ready: Mutex::new(Some(ready_tx)),
            stderr_tail: LineTail::new(STDERR_TAIL_LINES, STDERR_LINE_MAX),
            death: death_tx,
            memory_bytes: limits.memory_bytes,
            engine: EngineLink::new(),
        });
        let (writer, write_rx) = mpsc::channel(WRITE_QUEUE);
        let (exit_tx, exit_rx) = watch::channel(None);
        let sink = FrameSink::new(shared.clone(), writer.clone(), dispatcher, limits);
        let mut tasks = vec![
            AbortOnDropHandle::new(tokio::spawn(wait_loop(
                runtime.clone(),
                id.clone(),
                exit_tx,
                shared.clone(),
            ))),
            AbortOnDropHandle::new(tokio::spawn(super::reader::read_loop(
                engine_loss::hold_output(attached.output, shared.engine.clone()),
                sink.clone(),
                exit_rx,
            ))),
        ];
        let boot_err = |reason: String| BridgeError::Boot {
            reason,
            stderr_tail: shared.tail(),
        };
        let mut stdin = attached.input;
        let offer = channel
            .as_ref()
            .map(|(listener, dir)| (listener, format!("{dir}/{SOCKET_NAME}")));
        let frame = entrypoint::boot_frame(offer.as_ref().map(|(l, path)| ChannelOffer {
            path,
            token: l.token(),
        }));
        if let Err(err) = write_line(&mut stdin, &frame).await {
            return Err(boot_err(format!("could not send the boot frame: {err}")));
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(BOOT_TIMEOUT_SECS);
        // The entrypoint either connects to the channel and sends `ready` there, or gives up
        // and sends `ready` on stdout.
        let mut early_ready = None;
        let mut socket = None;
        if let Some((listener, _)) = &channel {
            tokio::select! {
                r = &mut ready_rx => early_ready = Some(r),
                r = tokio::time::timeout_at(deadline, listener.accept()) => match r {
                    Ok(Ok(stream)) => socket = Some(stream),
                    Ok(Err(err)) => tracing::warn!(cause = %err, "the frame channel failed; using stdio"),
                    Err(_) => {}
                },
            }
        }
        drop(channel); // the socket file and its directory are no longer needed
        let (output, keep_stdin): (Pin<Box<dyn AsyncWrite + Send>>, _) = match socket {
            Some(stream) => {
                shared.engine.set_on_socket();
                let (rd, wr) = stream.into_split();
                tasks.push(AbortOnDropHandle::new(tokio::spawn(
                    super::reader::socket_read_loop(rd, sink),
                )));
                (Box::pin(wr), Some(stdin))
            }
            None => (stdin, None),
        };
        tasks.push(AbortOnDropHandle::new(tokio::spawn(write_loop(
            output, write_rx,
        ))));
        let ready = match early_ready {
            Some(r) => Ok(r),
            None => tokio::time::timeout_at(deadline, ready_rx).await,
        };
        let session = Session {
            id,
            runtime,
            writer,
            shared: shared.clone(),
            death,
            _stdin: Mutex::new(keep_stdin),
            _tasks: tasks,
            sent_tools: std::sync::Mutex::new(std::collections::HashMap::new()),
        };
        tracing::debug!(
            ms = began.elapsed().as_millis() as u64,
            "boot frame answered"
        );
        match ready {
            Ok(Ok(Ok(posture))) => {
                let checks = posture::evaluate(&posture, expected.unwrap_or(&Expected::default()));
                match (expected, posture::failures(&checks)) {
                    (Some(_), Some(weak)) => Err(BridgeError::Weak(weak)),
                    (None, Some(weak)) => {
                        tracing::debug!("sandbox posture not enforced: {weak}");
                        Ok(session)
                    }
                    (_, None) => Ok(session),
                }
            }
            Ok(Ok(Err(reason))) => Err(boot_err(reason)),
            Ok(Err(_)) => Err(boot_err("the session ended during boot".into())),
            Err(_) => Err(boot_err(format!(
                "no ready frame within {BOOT_TIMEOUT_SECS} s"
            ))),
        }
    }

    /// The engine's container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    async fn send(&self, line: Vec<u8>) -> Result<(), BridgeError> {
        self.writer
            .send(line.into())
            .await
            .map_err(|_| BridgeError::Died {
                reason: "its stdin is closed".into(),
                stderr_tail: self.shared.tail(),
                before_start: true,
            })
    }

    /// Starts exec `id`; the receiver yields its result, or the error that ended it.
    ///
    /// # Errors
    /// [`BridgeError::Died`] when the sandbox is already gone.
    pub async fn exec(
        &self,
        id: u64,
        code: &str,
        servers: Arc<[String]>,
        tools: &super::dispatch::LoadedTools,
        deadline: tokio::time::Instant,
        output_limit: usize,
    ) -> Result<oneshot::Receiver<Result<ResultFrame, BridgeError>>, BridgeError> {
        let (tx, rx) = oneshot::channel();
        let line = {
            let mut sent = self.sent_tools.lock().expect("sent tools lock");
            let frame_tools = ExecTools::for_exec(&mut sent, tools);
            Outbound::Exec {
                id,
                code,
                servers: &servers,
                tools: &frame_tools,
                output_limit,
            }
            .to_line()
        };
        *self.shared.running.lock().expect("running lock") = Some(Running {
            id,
            started: false,
            servers,
            deadline,
            done: tx,
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
        self.death().is_some() || self.shared.ended.load(std::sync::atomic::Ordering::SeqCst)
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

async fn write_line(out: &mut Pin<Box<dyn AsyncWrite + Send>>, line: &[u8]) -> std::io::Result<()> {
    out.write_all(line).await?;
    out.flush().await
}

async fn write_loop(mut input: Pin<Box<dyn AsyncWrite + Send>>, mut rx: mpsc::Receiver<Outgoing>) {
    while let Some(out) = rx.recv().await {
        if let Err(err) = input.write_all(&out.line).await {
            tracing::debug!(cause = %err, "sandbox stdin closed");
            return;
        }
        drop(out); // written: its share of the reply budget is free again
                   // Batch what is already queued before flushing.
        while let Ok(more) = rx.try_recv() {
            if input.write_all(&more.line).await.is_err() {
                return;
            }
        }
        if input.flush().await.is_err() {
            return;
        }
    }
    let _ = input.shutdown().await;
}

async fn wait_loop(
    runtime: Arc<dyn ContainerRuntime>,
    id: String,
    exit_tx: watch::Sender<Option<i64>>,
    shared: Arc<Shared>,
) {
    let exit = engine_loss::watch_exit(runtime.as_ref(), &id).await;
    if shared.engine.settle(&exit) {
        return; // frames flow on the socket channel without the engine: its end decides
    }
    let code = match exit {
        engine_loss::Exit::Code(code) => Some(code),
        _ => None,
    };
    let _ = exit_tx.send(Some(code.unwrap_or(-1)));
    // The output stream normally ends first; if the engine keeps it open, decide here.
    tokio::time::sleep(Duration::from_millis(EXIT_CODE_WAIT_MS)).await;
    shared.mark_dead(code);
}
