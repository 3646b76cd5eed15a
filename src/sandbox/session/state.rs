//! [`Shared`]: the one place a session's state lives that its tasks (reader, writer, waiter)
//! and the [`Session`](super::Session) handle all see: the running exec, the ready handshake,
//! the stderr tail and the container's death. Every lock here is a std mutex held for a copy
//! or a swap, never across an `.await`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, watch};

use super::cell_progress::CellProgress;
use super::engine_loss::EngineLink;
use super::keeping::Keeping;
use super::limits::{STDERR_LINE_MAX, STDERR_TAIL_LINES};
use super::preload::Preloading;
use crate::lines::LineTail;
use crate::log_limit::LogLimit;
use crate::outbox::{CellFiles, Outbox};
use crate::sandbox::error::{explain_exit, BridgeError};
use crate::sandbox::protocol::ResultFrame;

/// Why and how a sandbox ended.
#[derive(Debug, Clone)]
pub struct Death {
    /// Exit code, when the engine told it.
    pub code: Option<i64>,
}

/// Where an exec's result (or the error that ended it) goes.
pub(super) type ExecReply = oneshot::Sender<Result<ResultFrame, BridgeError>>;

/// Where the `ready` frame's posture report (or why boot failed) goes.
pub(super) type ReadyReply = oneshot::Sender<Result<serde_json::Value, String>>;

/// The exec the sandbox is running.
pub(super) struct Running {
    pub(super) id: u64,
    pub(super) started: bool,
    pub(super) servers: Arc<[String]>,
    pub(super) deadline: tokio::time::Instant,
    /// The run's scope, handed to every host call it makes.
    pub(super) scope: Arc<crate::calls::RunScope>,
    pub(super) done: ExecReply,
    /// Where its output is reported while it runs, when the client asked for progress.
    pub(super) progress: Option<CellProgress>,
}

/// State shared by a session's tasks and its handle.
pub(super) struct Shared {
    /// Set the moment the output stream ends, before the exit code is known.
    ended: AtomicBool,
    pub(super) running: Mutex<Option<Running>>,
    /// Answered by the `ready` frame with the sandbox's posture report.
    pub(super) ready: Mutex<Option<ReadyReply>>,
    pub(super) stderr_tail: LineTail,
    pub(super) death: watch::Sender<Option<Death>>,
    pub(super) memory_bytes: u64,
    /// Whether the engine is still there, and whether frames can do without it.
    pub(super) engine: Arc<EngineLink>,
    /// Where the files execs deliver go.
    pub(super) outbox: Arc<Outbox>,
    /// The running exec's files as they arrive (only the read loop writes to disk here).
    pub(super) files: Mutex<Option<CellFiles>>,
    /// A snapshot save or restore in progress.
    pub(super) keeping: Keeping,
    /// The modules asked to be imported ahead, until the answer comes.
    pub(super) preload: Preloading,
    /// The log lines this sandbox's frames and output cause, rate-limited.
    pub(super) log: LogLimit,
    /// Frames dropped (stray, unasked for, over a limit) since the last result took the count.
    dropped: AtomicU64,
    /// The newest exec id sent to this sandbox (ids increase).
    pub(super) last_exec: AtomicU64,
}

impl Shared {
    /// State for a session whose container has `memory_bytes`; `ready` is answered by the
    /// `ready` frame, `death` is sent once when the container ends.
    pub(super) fn new(
        memory_bytes: u64,
        ready: ReadyReply,
        death: watch::Sender<Option<Death>>,
        outbox: Arc<Outbox>,
    ) -> Arc<Self> {
        Arc::new(Shared {
            ended: AtomicBool::new(false),
            running: Mutex::new(None),
            ready: Mutex::new(Some(ready)),
            stderr_tail: LineTail::new(STDERR_TAIL_LINES, STDERR_LINE_MAX),
            death,
            memory_bytes,
            engine: EngineLink::new(),
            outbox,
            files: Mutex::new(None),
            keeping: Keeping::default(),
            preload: Preloading::default(),
            log: LogLimit::new(),
            dropped: AtomicU64::new(0),
            last_exec: AtomicU64::new(0),
        })
    }

    /// The container's last stderr lines.
    pub(super) fn tail(&self) -> String {
        self.stderr_tail.joined()
    }

    /// Counts one frame dropped.
    pub(super) fn drop_frame(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a frame about exec `id` that is not running, unless `id` is one this sandbox
    /// was sent (an honest frame can trail its exec's result: `started`, `output`).
    pub(super) fn drop_stray(&self, id: u64) {
        if id > self.last_exec.load(Ordering::Relaxed) {
            self.drop_frame();
        }
    }

    /// Frames dropped since the last call of this; the count starts again from zero.
    pub(super) fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    /// Records that the output stream ended (the exit code may not be known yet).
    pub(super) fn set_ended(&self) {
        self.ended.store(true, Ordering::SeqCst);
    }

    /// True once the output stream ended.
    pub(super) fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Ends the running exec, if any, with `err`.
    pub(super) fn fail_running(&self, mut err: BridgeError) {
        if let Some(r) = self.running.lock().expect("running lock").take() {
            if let BridgeError::Died { before_start, .. } = &mut err {
                *before_start = !r.started;
            }
            let _ = r.done.send(Err(err));
        }
    }

    /// Records the container's end (once): fails the boot handshake and the running exec.
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
            self.keeping.end();
            let suppressed = self.log.flush();
            if suppressed > 0 {
                tracing::warn!(
                    suppressed,
                    "log lines caused by this sandbox were left out (rate limit)"
                );
            }
        }
    }
}
