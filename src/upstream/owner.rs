//! [`Owner`]: the one task that owns a server's connection.
//!
//! Handles ([`super::client::Upstream`]) send it connect requests; it starts, restarts and backs
//! off, and publishes the state and the live connection in a [`Status`] that handles read
//! without waiting, so a start in progress blocks neither a warm call, nor a status query, nor
//! shutdown. It owns rmcp's `RunningService`, notices the connection's end, and on cancellation
//! (shutdown) abandons a start in progress (its process group killed) and closes the connection:
//! stdin closed, [`CLOSE_GRACE_MS`] to exit, then the process group killed.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::handshake::Service;
use super::live::{Live, START_TIMEOUT_SECS};
use super::start::{Started, Starter};
use super::start_error::StartError;
use super::transport::ProcessGroup;

/// How long a server may take to exit once its connection is closed before its process group
/// is killed (shutdown, restart).
pub const CLOSE_GRACE_MS: u64 = 300;
/// How long the owner waits for rmcp's loop to end after killing the process group.
const KILLED_WAIT_MS: u64 = 500;
/// First retry delay after a failed start; doubles per failure.
pub const BACKOFF_START_MS: u64 = 250;
/// Longest retry delay.
pub const BACKOFF_MAX_SECS: u64 = 30;

/// What handles see of a server, written only by its owner.
pub(super) enum Status {
    /// Never started, or stopped.
    Idle,
    /// Connected (or the connection just ended: see [`Live::is_closed`]).
    Live(Arc<Live>),
    /// The last start failed.
    Failed,
    /// The last start met the server asking for sign-in.
    SignIn,
}

/// A request to the owner: the connection, started if needed by `deadline`.
pub(super) struct Connect {
    /// The caller's deadline (a start also stops at [`START_TIMEOUT_SECS`]).
    pub deadline: Instant,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<Live, Refusal>>,
}

/// Why the owner gave no connection; the handle turns it into an `UpstreamError::Start`.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The start failed now (the reason is redacted).
    Failed(String),
    /// The last start failed and the backoff is not over.
    Backoff {
        /// Why the last start failed.
        reason: String,
        /// Until the next try.
        left: Duration,
    },
    /// The bridge is shutting down.
    Stopped,
    /// The server needs sign-in (`mcp-code-bridge login NAME`).
    AuthRequired,
}

/// The state and resources of one server, all owned by its task.
pub(super) struct Owner {
    /// What a start needs (the spec, the stderr tail, the tasks).
    pub starter: Starter,
    /// Published for the handles: the live connection or why there is none.
    pub status: Arc<Mutex<Status>>,
    /// Failed starts in a row, and when the last one failed.
    pub failures: (u32, Option<(Instant, String)>),
}

/// The live connection as its owner holds it.
struct Conn {
    live: Arc<Live>,
    /// rmcp's loop ending (the connection closed).
    done: Pin<Box<dyn Future<Output = ()> + Send>>,
    group: Option<ProcessGroup>,
}

impl Owner {
    /// The owner's loop: answers requests until its token is cancelled or every handle is
    /// gone, then closes the connection.
    pub(super) async fn run(mut self, mut requests: mpsc::Receiver<Connect>) {
        let mut conn: Option<Conn> = None;
        loop {
            tokio::select! {
                biased;
                _ = self.starter.ct.cancelled() => break,
                () = ended(&mut conn) => {
                    if let Some(c) = conn.take() {
                        c.live.closed.cancel();
                    }
                }
                req = requests.recv() => match req {
                    // Boxed: a start's state (kilobytes) is held only while one runs.
                    Some(req) => Box::pin(self.serve(req, &mut conn)).await,
                    None => break,
                },
            }
        }
        requests.close();
        while let Ok(req) = requests.try_recv() {
            let _ = req.reply.send(Err(Refusal::Stopped));
        }
        if let Some(c) = conn.take() {
            close(c).await;
        }
    }

    /// Answers one request: the live connection, a backoff refusal, or a (re)start.
    async fn serve(&mut self, req: Connect, conn: &mut Option<Conn>) {
        if let Some(c) = conn.as_ref().filter(|c| !c.live.is_closed()) {
            let _ = req.reply.send(Ok((*c.live).clone()));
            return;
        }
        if let (failures, Some((at, reason))) = &self.failures {
            let wait = backoff(*failures);
            if at.elapsed() < wait {
                let left = wait - at.elapsed();
                let reason = reason.clone();
                let _ = req.reply.send(Err(Refusal::Backoff { reason, left }));
                return;
            }
        }
        if let Some(old) = conn.take() {
            close(old).await;
        }
        let began = Instant::now();
        let limit = req
            .deadline
            .min(began + Duration::from_secs(START_TIMEOUT_SECS));
        let group = OnceLock::new();
        let result = tokio::select! {
            r = tokio::time::timeout_at(limit, self.starter.start(&group)) => r,
            _ = self.starter.ct.cancelled() => {
                // Abandoned: rmcp's loop, if the handshake got that far, would close the
                // transport on its own time; the process group goes now.
                if let Some(g) = group.get() {
                    g.kill();
                }
                let _ = req.reply.send(Err(Refusal::Stopped));
                return;
            }
        };
        match result {
            Ok(Ok(Started { service, live })) => {
                let live = Arc::new(live);
                let done = Box::pin(run_until_stopped(
                    service,
                    live.stop.clone(),
                    self.starter.spec.name.clone(),
                ));
                *conn = Some(Conn {
                    live: live.clone(),
                    done,
                    group: group.get().copied(),
                });
                self.failures = (0, None);
                *self.status.lock().expect("status lock") = Status::Live(live.clone());
                let _ = req.reply.send(Ok((*live).clone()));
            }
            // Not a failure: no backoff, so a call right after `login` connects.
            Ok(Err(StartError::AuthRequired)) => {
                *self.status.lock().expect("status lock") = Status::SignIn;
                let _ = req.reply.send(Err(Refusal::AuthRequired));
            }
            result => {
                if let Some(g) = group.get() {
                    g.kill();
                }
                let reason = match result {
                    Ok(Err(reason)) => reason.to_string(),
                    _ => format!("no answer within {:.1} s", began.elapsed().as_secs_f64()),
                };
                tokio::time::sleep(Duration::from_millis(50)).await; // let the stderr reader catch up
                let reason = self.starter.spec.redact(&reason);
                self.failures = (self.failures.0 + 1, Some((Instant::now(), reason.clone())));
                *self.status.lock().expect("status lock") = Status::Failed;
                let _ = req.reply.send(Err(Refusal::Failed(reason)));
            }
        }
    }
}

/// Waits for rmcp's loop to end, ending it when `stop` is cancelled (a caller saw the
/// connection break, or the owner closes it): polled by the owner, not a task of its own.
async fn run_until_stopped(service: Service, stop: CancellationToken, server: String) {
    let cancel = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    let reason = tokio::select! {
        r = &mut waiting => r,
        _ = stop.cancelled() => {
            cancel.cancel();
            waiting.await
        }
    };
    tracing::info!(server = %crate::shown::Shown(&server), reason = ?reason.ok(), "MCP server connection ended");
}

/// Resolves when the connection in `conn` ends; never when there is none.
async fn ended(conn: &mut Option<Conn>) {
    match conn {
        Some(c) => (&mut c.done).await,
        None => std::future::pending().await,
    }
}

/// Closes a connection: rmcp's loop is stopped (the server's stdin closes), the server gets
/// [`CLOSE_GRACE_MS`] to exit, then its process group is killed.
async fn close(mut c: Conn) {
    c.live.stop.cancel();
    let grace = Duration::from_millis(CLOSE_GRACE_MS);
    if tokio::time::timeout(grace, &mut c.done).await.is_err() {
        if let Some(g) = c.group {
            g.kill();
        }
        let killed = Duration::from_millis(KILLED_WAIT_MS);
        let _ = tokio::time::timeout(killed, &mut c.done).await;
    }
    c.live.closed.cancel();
}

/// The wait before the next start after `failures` failed ones.
pub(super) fn backoff(failures: u32) -> Duration {
    let ms = BACKOFF_START_MS.saturating_mul(1u64 << failures.saturating_sub(1).min(16));
    Duration::from_millis(ms).min(Duration::from_secs(BACKOFF_MAX_SECS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_millis(1000));
        assert_eq!(backoff(40), Duration::from_secs(BACKOFF_MAX_SECS));
    }
}
