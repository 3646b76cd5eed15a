//! The audit log's one writer: a plain thread that takes lines off the queue in order and
//! appends them to the [`AuditFile`] (which chains them), syncing the file after each run line and when told to
//! stop. A run line carries the count of lines dropped since the previous run line (a full
//! queue, or a failed write), taken when it is written.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::file::AuditFile;
use super::record::Record;

/// What the writer is handed.
pub enum Msg {
    /// A line to write.
    Line(Box<Record>),
    /// Write what came before, sync, answer, and stop.
    Stop(oneshot::Sender<()>),
}

/// What the handles and the writer share.
#[derive(Default)]
pub struct Shared {
    /// Lines lost since the last run line written.
    pub dropped: AtomicU64,
    /// Whether a full queue was logged already.
    pub warned_full: AtomicBool,
    warned_write: AtomicBool,
}

impl Shared {
    /// Counts one lost line.
    pub fn drop_one(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts the writer thread on `file`, reading `queue`.
///
/// # Errors
/// The thread could not be started.
pub fn spawn(
    file: AuditFile,
    queue: mpsc::Receiver<Msg>,
    shared: Arc<Shared>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("audit-log".into())
        .spawn(move || run(file, queue, &shared))
}

/// The writer's loop: until told to stop or every handle is gone.
pub fn run(mut file: AuditFile, mut queue: mpsc::Receiver<Msg>, shared: &Shared) {
    while let Some(msg) = queue.blocking_recv() {
        match msg {
            Msg::Line(record) => write(&mut file, *record, shared),
            Msg::Stop(done) => {
                sync(&file, shared);
                let _ = done.send(());
                return;
            }
        }
    }
    sync(&file, shared);
}

fn write(file: &mut AuditFile, mut record: Record, shared: &Shared) {
    let is_run = if let Record::Run(run) = &mut record {
        run.dropped += shared.dropped.swap(0, Ordering::Relaxed);
        true
    } else {
        false
    };
    let line = serde_json::to_vec(&record).unwrap_or_default();
    if let Err(e) = file.append(&line) {
        shared.drop_one();
        if let Record::Run(run) = &record {
            // Its own count is not lost: the next run line reports it.
            shared.dropped.fetch_add(run.dropped, Ordering::Relaxed);
        }
        if !shared.warned_write.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                file = %crate::shown::ShownPath(&file.path()),
                "cannot write the audit log: {e}; lines are counted as dropped until it works again"
            );
        }
        return;
    }
    if is_run {
        sync(file, shared);
    }
}

fn sync(file: &AuditFile, shared: &Shared) {
    if let Err(e) = file.sync() {
        if !shared.warned_write.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                file = %crate::shown::ShownPath(&file.path()),
                "cannot sync the audit log to disk: {e}"
            );
        }
    }
}
