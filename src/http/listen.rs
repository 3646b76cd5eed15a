//! The accept loop of `serve --http`: HTTP/1.1 connections on the listening socket, each
//! served by [`Front`]. Connections are capped, a client gets a bounded time to send its
//! headers, and on shutdown every connection is asked to finish its request and close.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::front::Front;
use super::peer::peer_uid;

/// Connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 1024;
/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection gets to finish after shutdown asked it to.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// When the accept loop stops, and when its connections close.
pub struct Stops {
    /// Stops accepting (the drain begins).
    pub accepting: CancellationToken,
    /// Asks every connection to finish its request and close (after the drain).
    pub connections: CancellationToken,
}

/// Accepts connections on `listener` until `stops.accepting` is cancelled; `own_user_only`
/// (no tokens file) asks the kernel whose each connection is. Connection tasks go on
/// `tracker`.
pub async fn accept(
    listener: TcpListener,
    front: Arc<Front>,
    own_user_only: bool,
    stops: Stops,
    tracker: TaskTracker,
) {
    let Stops {
        accepting: stop,
        connections,
    } = stops;
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = stop.cancelled() => return,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok(pair) => pair,
                Err(err) => {
                    tracing::warn!(cause = %err, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let local = stream.local_addr().ok();
        let (front, stop) = (front.clone(), connections.clone());
        tracker.spawn(async move {
            let _permit = permit;
            let own_user = match (own_user_only, local) {
                (true, Some(local)) => {
                    tokio::task::spawn_blocking(move || peer_uid(local, peer))
                        .await
                        .ok()
                        .flatten()
                        == Some(crate::checked_dir::euid())
                }
                _ => false,
            };
            let service = hyper::service::service_fn(move |req| {
                let front = front.clone();
                async move { Ok::<_, Infallible>(front.handle(req, own_user).await) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(err) = r {
                        tracing::debug!(cause = %err, "HTTP connection ended with an error");
                    }
                }
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
                }
            }
        });
    }
}
