//! The accept loop of `serve --http`: HTTP/1.1 connections on the listening socket, each
//! served by [`Front`]. Connections are capped, a client gets a bounded time to send its
//! headers, and on shutdown every connection is asked to finish its request and close. With no
//! tokens file another user's connection is closed at accept, before a byte is read; with one,
//! a connection not yet admitted passes the [`Gate`] (a cap per peer) and is closed after
//! `MCP_BRIDGE_HTTP_UNAUTH_TIMEOUT` unless a request of it was admitted by then.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::front::Front;
use super::gate::{Conn, Gate, PeerKey};
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

/// Who a connection must be to be served before it sent a request.
pub struct Admission {
    /// No tokens file: only this user's own processes, the others closed at accept.
    pub own_user_only: bool,
    /// Unadmitted connections per peer.
    pub gate: Arc<Gate>,
    /// How long a connection may stay unadmitted.
    pub unadmitted_for: Duration,
}

/// Accepts connections on `listener` until `stops.accepting` is cancelled, admitting them by
/// `admission`. Connection tasks go on `tracker`.
pub async fn accept(
    listener: TcpListener,
    front: Arc<Front>,
    admission: Admission,
    stops: Stops,
    tracker: TaskTracker,
) {
    let admission = Arc::new(admission);
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
        let (front, stop, admission) = (front.clone(), connections.clone(), admission.clone());
        tracker.spawn(async move {
            let _permit = permit;
            let Some(conn) = admit(&admission, local, peer).await else {
                // Closed before a byte is read: another user's (no tokens file), or one
                // more unadmitted connection of a peer at its cap.
                drop(stream);
                return;
            };
            let conn = Arc::new(conn);
            let limit = (!conn.admitted()).then_some(admission.unadmitted_for);
            let watched = conn.clone();
            let service = hyper::service::service_fn(move |req| {
                let (front, conn) = (front.clone(), conn.clone());
                async move { Ok::<_, Infallible>(front.handle(req, &conn).await) }
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
                _ = unadmitted_after(&watched, limit) => {
                    tracing::debug!(%peer, "closed a connection with no admitted request (MCP_BRIDGE_HTTP_UNAUTH_TIMEOUT)");
                }
            }
        });
    }
}

/// How `peer`'s connection to `local` is served: `None` closes it now. With no tokens file
/// only this user's own are served (admitted at once); otherwise it waits at the gate.
async fn admit(admission: &Admission, local: Option<SocketAddr>, peer: SocketAddr) -> Option<Conn> {
    let uid = match local {
        Some(local) if admission.own_user_only || peer.ip().to_canonical().is_loopback() => {
            tokio::task::spawn_blocking(move || peer_uid(local, peer))
                .await
                .ok()
                .flatten()
        }
        _ => None,
    };
    if admission.own_user_only {
        return (uid == Some(crate::checked_dir::euid())).then(Conn::own);
    }
    let key = PeerKey::of(peer.ip(), uid);
    match admission.gate.enter(key) {
        Some(ticket) => Some(Conn::unadmitted(ticket)),
        None => {
            tracing::debug!(%peer, "closed a connection: its peer holds MCP_BRIDGE_HTTP_CONNECTIONS_PER_PEER unadmitted ones");
            None
        }
    }
}

/// Returns `limit` after now if `conn` has not been admitted by then; never otherwise.
async fn unadmitted_after(conn: &Conn, limit: Option<Duration>) {
    if let Some(limit) = limit {
        tokio::time::sleep(limit).await;
        if !conn.admitted() {
            return;
        }
    }
    std::future::pending::<()>().await
}
