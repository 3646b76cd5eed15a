//! Telling a dead sandbox from a lost engine.
//!
//! A session learns of its container's end from the engine: the exit code from a long `wait`
//! request, and the end of the attach stream. Both also end when the engine itself goes away
//! (its API service killed, its socket removed). So when `wait` fails without an answer, the
//! engine is pinged on a fresh connection: if it answers, the wait is repeated; if not, the
//! engine is lost. The sandbox itself runs on (under conmon or containerd's shim), and on the
//! socket frame channel its frames do not pass through the engine at all, so such a session
//! carries on: the end of its attach stream is held back, and the socket channel's end decides
//! when it is over. The sandbox actor then replaces the session and reconnects.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::sync::watch;

use crate::container::{Chunk, ContainerRuntime, RuntimeError};

/// How often a broken `wait` is repeated while the engine still answers pings.
const WAIT_RETRIES: u32 = 3;
/// Pause before repeating a broken `wait`.
const WAIT_RETRY_MS: u64 = 100;

/// How the engine's watch over a container ended.
pub(super) enum Exit {
    /// The container exited with this code.
    Code(i64),
    /// The engine answered, but not with an exit code.
    Unknown,
    /// The engine no longer answers: why.
    EngineLost(String),
}

/// Waits for container `id` to exit, telling a broken connection from a lost engine.
pub(super) async fn watch_exit(runtime: &dyn ContainerRuntime, id: &str) -> Exit {
    let mut retries = 0;
    loop {
        let err = match runtime.wait(id).await {
            Ok(code) => return Exit::Code(code),
            Err(err) => err,
        };
        if !err.is_transport() {
            tracing::debug!(container = %id, cause = %err, "wait for the sandbox failed");
            return Exit::Unknown;
        }
        if let Err(ping) = runtime.ping().await {
            tracing::warn!(container = %id, cause = %ping, "the container engine is gone");
            return Exit::EngineLost(ping.to_string());
        }
        if retries == WAIT_RETRIES {
            tracing::debug!(container = %id, cause = %err, "wait for the sandbox keeps failing");
            return Exit::Unknown;
        }
        retries += 1;
        tracing::debug!(container = %id, cause = %err, "wait for the sandbox broke; the engine answers, waiting again");
        tokio::time::sleep(Duration::from_millis(WAIT_RETRY_MS)).await;
    }
}

/// A session's view of its engine: whether frames can do without it, and whether it was lost.
pub(super) struct EngineLink {
    on_socket: AtomicBool,
    lost: Mutex<Option<String>>,
    /// Set when the exit watch ends: `true` when it ended because the engine was lost.
    verdict: watch::Sender<Option<bool>>,
}

impl EngineLink {
    /// A link with frames on stdio and the engine there.
    pub(super) fn new() -> Arc<Self> {
        Arc::new(EngineLink {
            on_socket: AtomicBool::new(false),
            lost: Mutex::new(None),
            verdict: watch::channel(None).0,
        })
    }

    /// Frames moved to the socket channel: the session no longer needs the engine to run code.
    pub(super) fn set_on_socket(&self) {
        self.on_socket.store(true, Ordering::SeqCst);
    }

    /// True once frames use the socket channel (the attach stream's stdout is then stray output).
    pub(super) fn on_socket(&self) -> bool {
        self.on_socket.load(Ordering::SeqCst)
    }

    /// Why the engine was lost, once it was.
    pub(super) fn lost(&self) -> Option<String> {
        self.lost.lock().expect("engine link lock").clone()
    }

    /// Records the end of the exit watch; returns true when the session carries on without
    /// the engine (it was lost, and frames use the socket channel).
    pub(super) fn settle(&self, exit: &Exit) -> bool {
        let lost = match exit {
            Exit::EngineLost(cause) => {
                *self.lost.lock().expect("engine link lock") = Some(cause.clone());
                true
            }
            _ => false,
        };
        self.verdict.send_replace(Some(lost));
        lost && self.on_socket.load(Ordering::SeqCst)
    }

    /// Whether the end of the attach stream must be ignored: the engine is lost and frames
    /// flow on the socket channel. Waits for the exit watch to decide.
    async fn outlives_attach(&self) -> bool {
        if !self.on_socket.load(Ordering::SeqCst) {
            return false;
        }
        let mut verdict = self.verdict.subscribe();
        let seen = verdict.wait_for(Option::is_some).await.map(|v| *v);
        matches!(seen, Ok(Some(true)))
    }
}

/// The attach output, whose end (or failure) is held back for good when the engine was lost
/// while frames flow on the socket channel.
pub(super) fn hold_output(
    output: BoxStream<'static, Result<Chunk, RuntimeError>>,
    link: Arc<EngineLink>,
) -> BoxStream<'static, Result<Chunk, RuntimeError>> {
    futures::stream::unfold(Some(output), move |state| {
        let link = link.clone();
        async move {
            let mut output = state?;
            match output.next().await {
                Some(Ok(chunk)) => Some((Ok(chunk), Some(output))),
                end => {
                    if link.outlives_attach().await {
                        tracing::info!("the engine is gone; frames go on over the socket channel");
                        std::future::pending::<()>().await;
                    }
                    end.map(|item| (item, None))
                }
            }
        }
    })
    .boxed()
}
