//! [`SharedEngine`]: one engine connection shared by many sandbox actors (`serve --http` runs a
//! sandbox per client). Each actor's [`Connector`] gets a borrowed [`Connection`] of the same
//! runtime; a podman service the bridge had to start is started once, owned here, and stopped
//! by [`SharedEngine::close`] after every actor is done. An engine that stops answering is
//! connected to anew by the next actor that asks.

use std::sync::Arc;

use futures::FutureExt;

use super::connect::{connect, Connection, Connector};
use super::{list_own, remove_each, Owner, RuntimeError};
use crate::config::Settings;

/// The shared connection; the one owner of a podman service started for it.
pub struct SharedEngine {
    settings: Arc<Settings>,
    current: tokio::sync::Mutex<Option<Connection>>,
}

impl SharedEngine {
    /// Not connected yet: the first actor that needs the engine connects.
    pub fn new(settings: Arc<Settings>) -> Arc<Self> {
        Arc::new(SharedEngine {
            settings,
            current: tokio::sync::Mutex::new(None),
        })
    }

    /// A connector handing out borrowed connections to the shared engine.
    pub fn connector(self: &Arc<Self>) -> Connector {
        let me = self.clone();
        Arc::new(move || {
            let me = me.clone();
            async move { me.borrow().await }.boxed()
        })
    }

    /// A borrowed connection: the live one, or a new one when there is none or it stopped
    /// answering (the old one closed first).
    async fn borrow(&self) -> Result<Connection, RuntimeError> {
        let mut current = self.current.lock().await;
        if let Some(conn) = current.as_ref() {
            if conn.runtime.ping().await.is_ok() {
                return Ok(Connection::from_runtime(
                    conn.runtime.clone(),
                    conn.endpoint.clone(),
                ));
            }
            if let Some(dead) = current.take() {
                dead.close().await;
            }
        }
        let conn = connect(&self.settings).await?;
        let borrowed = Connection::from_runtime(conn.runtime.clone(), conn.endpoint.clone());
        *current = Some(conn);
        Ok(borrowed)
    }

    /// Closes the connection, stopping a podman service of ours (after the actors are done).
    /// First, every container of this process still on the engine (one a sandbox's own
    /// removal failed for, under load) is removed: nothing of ours outlives the bridge.
    pub async fn close(&self) {
        if let Some(conn) = self.current.lock().await.take() {
            let me = Owner::current();
            match list_own(conn.runtime.as_ref(), &me).await {
                Ok(ids) if !ids.is_empty() => {
                    let n = remove_each(conn.runtime.as_ref(), &ids, "this bridge's clients").await;
                    tracing::info!(
                        removed = n,
                        of = ids.len(),
                        "removed sandboxes left at exit"
                    );
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(cause = %err, "could not list this bridge's sandboxes at exit")
                }
            }
            conn.close().await;
        }
    }
}
