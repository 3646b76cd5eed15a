//! The writer task: the only code that writes to the sandbox (its stdin, or the socket
//! channel once frames use it), batching queued frames before each flush.

use std::pin::Pin;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// A frame queued for the sandbox, with the share of the reply budget it holds until written.
pub(super) struct Outgoing {
    pub(super) line: Vec<u8>,
    pub(super) _budget: Option<OwnedSemaphorePermit>,
}

impl From<Vec<u8>> for Outgoing {
    fn from(line: Vec<u8>) -> Self {
        Outgoing {
            line,
            _budget: None,
        }
    }
}

/// Writes one line and flushes it (the boot frame, before the writer task runs).
pub(super) async fn write_line(
    out: &mut Pin<Box<dyn AsyncWrite + Send>>,
    line: &[u8],
) -> std::io::Result<()> {
    out.write_all(line).await?;
    out.flush().await
}

/// Writes queued frames until the queue closes or the sandbox stops reading.
pub(super) async fn write_loop(
    mut input: Pin<Box<dyn AsyncWrite + Send>>,
    mut rx: mpsc::Receiver<Outgoing>,
) {
    while let Some(out) = rx.recv().await {
        if let Err(err) = input.write_all(&out.line).await {
            tracing::debug!(cause = %err, "sandbox stdin closed");
            return;
        }
        drop(out); // written: its share of the reply budget is free again
                   // Batch what is already queued before flushing.
        while let Ok(more) = rx.try_recv() {
            if input.write_all(&more.line).await.is_err() {
                return;
            }
        }
        if input.flush().await.is_err() {
            return;
        }
    }
    let _ = input.shutdown().await;
}
