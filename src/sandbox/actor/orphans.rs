//! Orphans: this bridge's own containers left on an engine whose connection it closed.
//!
//! When the engine goes away (or stops answering), the session's container runs on (or has
//! exited) but cannot be removed through it. Once an engine answers again, and before a new
//! sandbox is created, every container labelled with this very process is such an orphan.

use std::sync::Arc;

use tokio_util::task::TaskTracker;

use crate::container::{list_own, remove_each, ContainerRuntime, Owner};

/// Lists this bridge's containers on a fresh connection (none is a live session: there is none
/// yet) and removes them in the background; false (logged) when the engine cannot list them.
pub(super) async fn sweep(
    runtime: &Arc<dyn ContainerRuntime>,
    me: &Owner,
    tracker: &TaskTracker,
) -> bool {
    let Some(ids) = list(runtime.as_ref(), me).await else {
        return false;
    };
    let runtime = runtime.clone();
    tracker.spawn(async move { remove(runtime.as_ref(), &ids).await });
    true
}

/// Lists and removes this bridge's containers now (at exit, its session already closed).
pub(super) async fn remove_now(runtime: &dyn ContainerRuntime, me: &Owner) {
    if let Some(ids) = list(runtime, me).await {
        remove(runtime, &ids).await;
    }
}

/// Ids of this bridge's containers, or `None` (logged) when the engine cannot list them.
async fn list(runtime: &dyn ContainerRuntime, me: &Owner) -> Option<Vec<String>> {
    match list_own(runtime, me).await {
        Ok(ids) => Some(ids),
        Err(err) => {
            tracing::warn!(cause = %err, "could not list this bridge's sandboxes");
            None
        }
    }
}

/// Removes the orphans `ids`.
async fn remove(runtime: &dyn ContainerRuntime, ids: &[String]) {
    if !ids.is_empty() {
        let n = remove_each(runtime, ids, "this bridge when the engine went away").await;
        tracing::info!(
            removed = n,
            of = ids.len(),
            "removed sandboxes left on the engine that went away"
        );
    }
}
