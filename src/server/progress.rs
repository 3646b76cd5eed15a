//! Turns a run's [`Progress`] reports into MCP `notifications/progress` for the request's
//! progress token: at most one notification per interval (the newest report wins), with a
//! `progress` value that only grows, and none once the run has finished (the spec forbids
//! progress after the response).

use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::RoleServer;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::sandbox::Progress;

/// Shortest time between two progress notifications of one request.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// A running forwarder; [`Forwarder::finish`] stops it before the response goes out.
pub struct Forwarder {
    task: Option<JoinHandle<()>>,
}

impl Forwarder {
    /// A sink for the run and its forwarder: a real one when the client sent `token`, else one
    /// that drops everything.
    pub fn start(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> (Progress, Forwarder) {
        let Some(token) = token else {
            return (Progress::none(), Forwarder { task: None });
        };
        let (progress, rx) = Progress::channel();
        let task = tokio::spawn(forward(peer, token, rx, MIN_INTERVAL));
        (progress, Forwarder { task: Some(task) })
    }

    /// Stops forwarding; no notification is sent after this returns.
    pub async fn finish(self) {
        if let Some(task) = self.task {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Sends the newest report at most once per `interval` until the sink is dropped.
async fn forward(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut rx: mpsc::Receiver<String>,
    interval: Duration,
) {
    let mut sent = 0u64;
    while let Some(mut message) = rx.recv().await {
        // Coalesce: whatever arrived meanwhile, only the newest is worth showing.
        while let Ok(newer) = rx.try_recv() {
            message = newer;
        }
        sent += 1;
        let note = ProgressNotificationParam::new(token.clone(), sent as f64).with_message(message);
        if peer.notify_progress(note).await.is_err() {
            return; // the client is gone
        }
        tokio::time::sleep(interval).await;
    }
}
