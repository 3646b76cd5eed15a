//! The sandbox actor when the engine goes away: forgetting the session and connection, and
//! removing the containers the lost engine could not remove.
//!
//! When the engine's connection is lost, the session's container runs on (or has exited) but
//! cannot be removed through it. Once an engine answers again, and before a new sandbox is
//! created, every container labelled with this very process is such an orphan.

use std::time::Duration;

use super::{Actor, Session, CLOSE_GRACE_MS};
use crate::container::{list_own, remove_each, Connection, ContainerRuntime, Owner};

/// How long the bridge, when exiting, may spend reconnecting to remove sandboxes it could not
/// remove while the engine was gone.
const EXIT_SWEEP_SECS: u64 = 5;

impl Actor {
    /// The engine went away: the session is let go (asked to exit over its socket channel; its
    /// container is removed once an engine answers again), the connection (and a podman
    /// service of ours) is closed, and the next call reconnects to a fresh sandbox.
    pub(super) async fn forget_engine(&mut self, cause: &str) {
        if let Some(s) = self.session.take() {
            self.tracker
                .spawn(s.close(Duration::from_millis(CLOSE_GRACE_MS)));
        }
        let endpoint = self.conn.as_ref().map(|c| c.endpoint.clone());
        let endpoint = endpoint.unwrap_or_else(|| "the container engine".into());
        tracing::warn!(%endpoint, cause, "lost the container engine; the next call reconnects");
        self.drop_conn().await;
        self.respawn_due = true;
        self.notice = Some(format!(
            "The connection to the container engine ({endpoint}) was lost, so the sandbox was replaced: variables and imports from earlier calls are gone."
        ));
    }

    /// Forgets the engine if the last run, or the current session, found it gone.
    pub(super) async fn forget_engine_if_lost(&mut self) {
        let lost = self.engine_lost.take();
        if let Some(cause) = lost.or_else(|| self.session.as_ref().and_then(Session::engine_lost)) {
            self.forget_engine(&cause).await;
        }
    }

    /// Closes the engine connection (stopping a podman service of ours); sandboxes left on that
    /// engine are removed after the next connect.
    pub(super) async fn drop_conn(&mut self) {
        if let Some(c) = self.conn.take() {
            c.close().await;
            self.sweep_due = true;
        }
    }

    /// Lists this bridge's containers on a fresh connection (none is a live session: there is
    /// none yet) and removes them in the background.
    pub(super) async fn sweep_orphans(&mut self, conn: &Connection) {
        if let Some(ids) = list_orphans(conn.runtime.as_ref(), &self.owner).await {
            self.sweep_due = false;
            let runtime = conn.runtime.clone();
            self.tracker
                .spawn(async move { remove_orphans(runtime.as_ref(), &ids).await });
        }
    }

    /// At exit, with sandboxes possibly left on an engine that went away: reconnect (bounded)
    /// and remove them. Whatever stays is removed by the next bridge on this host.
    pub(super) async fn sweep_at_exit(&mut self) {
        if self.conn.is_none() {
            let limit = Duration::from_secs(EXIT_SWEEP_SECS);
            match tokio::time::timeout(limit, (self.connector)()).await {
                Ok(Ok(conn)) => self.conn = Some(conn),
                Ok(Err(err)) => {
                    tracing::warn!(cause = %err, "sandboxes of this bridge may remain on the engine that went away")
                }
                Err(_) => {
                    tracing::warn!("reconnecting to remove sandboxes left on the engine timed out")
                }
            }
        }
        if let Some(conn) = &self.conn {
            if let Some(ids) = list_orphans(conn.runtime.as_ref(), &self.owner).await {
                remove_orphans(conn.runtime.as_ref(), &ids).await;
            }
        }
    }
}

/// Ids of this bridge's containers, or `None` (logged) when the engine cannot list them.
async fn list_orphans(runtime: &dyn ContainerRuntime, me: &Owner) -> Option<Vec<String>> {
    match list_own(runtime, me).await {
        Ok(ids) => Some(ids),
        Err(err) => {
            tracing::warn!(cause = %err, "could not list this bridge's sandboxes");
            None
        }
    }
}

/// Removes the orphans `ids`.
async fn remove_orphans(runtime: &dyn ContainerRuntime, ids: &[String]) {
    if !ids.is_empty() {
        let n = remove_each(runtime, ids, "this bridge when the engine went away").await;
        tracing::info!(
            removed = n,
            of = ids.len(),
            "removed sandboxes left on the engine that went away"
        );
    }
}
