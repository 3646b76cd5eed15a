//! The waiter task: learns the container's exit code from the engine (telling a dead sandbox
//! from a lost engine, see `engine_loss.rs`) and marks the session dead if the output stream
//! does not end first.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::engine_loss;
use super::limits::EXIT_CODE_WAIT_MS;
use super::state::Shared;
use crate::container::ContainerRuntime;

/// Waits for container `id` to exit; sends its code on `exit_tx` (-1 when unknown).
pub(super) async fn wait_loop(
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
