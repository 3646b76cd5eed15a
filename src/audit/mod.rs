//! The audit log (`MCP_BRIDGE_AUDIT_LOG`): one JSON line per run and per tool call, written on
//! the host by one writer thread (`writer.rs`) to a checked file (`file.rs`). Callers never
//! wait for the disk: lines go through a bounded queue (`try_send`); a full queue is counted,
//! logged once, and reported in the next run line's `dropped`. `read.rs` reads the log back
//! for `mcp-code-bridge audit`. Lines are chained by HMAC-SHA256 (`mac.rs`) under a key in the
//! private state folder (`key.rs`), beside the last MAC written (`head.rs`); `verify.rs` checks
//! the chain for `audit --verify`.

mod dropped;
mod file;
pub mod head;
pub mod key;
pub mod mac;
mod net;
pub mod read;
mod record;
pub mod verify;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

pub use file::{FIX_AUDIT, ROTATED};
pub use net::NetRecord;
pub use record::{
    CallRecord, Record, RotatedRecord, RunRecord, MAX_ARGUMENTS, MAX_CODE, MAX_DROPPED_RUNS,
    MAX_NAME,
};

use crate::checked_dir::DirError;
use crate::config::PolicySettings;
use crate::shown::ShownPath;
use writer::{Msg, Shared};

/// Lines the queue holds before new ones are dropped (and counted).
pub const QUEUE_LINES: usize = 1024;

/// How long shutdown waits for the queue to be written and synced.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the audit log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log's folder is not safe (another user's, or writable by others).
    #[error("the audit log's folder: {0}")]
    Folder(#[from] DirError),
    /// The chain's key cannot be read or made.
    #[error(transparent)]
    Key(#[from] key::KeyError),
    /// The file itself is not safe, or cannot be opened.
    #[error(
        "cannot use {} as the audit log (MCP_BRIDGE_AUDIT_LOG): {cause}",
        ShownPath(path)
    )]
    File {
        /// The path.
        path: PathBuf,
        /// Why.
        cause: String,
    },
}

/// The audit log's handle; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    values: bool,
    queue: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
    writer: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
}

impl AuditLog {
    /// Opens the log `settings` name and starts its writer, its lines chained under the key
    /// kept in `state_dir` (made when missing); `None` when no log is set.
    ///
    /// # Errors
    /// [`AuditError`] when the file or the key cannot be had safely: the bridge must not run
    /// unaudited.
    pub fn open(
        settings: &PolicySettings,
        state_dir: &Path,
    ) -> Result<Option<AuditLog>, AuditError> {
        let Some(path) = &settings.audit_log else {
            return Ok(None);
        };
        let key = key::load_or_make(state_dir)?;
        let head = head::Head::open(state_dir, path)?;
        let file = file::AuditFile::open(path, settings.audit_max_bytes, key)?.with_head(head);
        let (log, queue) = AuditLog::queue(settings.audit_values, QUEUE_LINES);
        let handle =
            writer::spawn(file, queue, log.shared.clone()).map_err(|e| AuditError::File {
                path: path.clone(),
                cause: format!("cannot start its writer: {e}"),
            })?;
        *log.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(Some(log))
    }

    /// A handle and the queue its writer reads, holding `lines`.
    fn queue(values: bool, lines: usize) -> (AuditLog, mpsc::Receiver<Msg>) {
        let (tx, rx) = mpsc::channel(lines);
        let log = AuditLog {
            values,
            queue: tx,
            shared: Arc::new(Shared::default()),
            writer: Arc::new(Mutex::new(None)),
        };
        (log, rx)
    }

    /// Whether argument values are logged.
    pub fn values(&self) -> bool {
        self.values
    }

    /// Queues a call line (bounded first: [`CallRecord::bounded`]); never waits.
    pub fn call(&self, record: CallRecord) {
        self.send(Record::Call(record.bounded()));
    }

    /// Queues a run line (bounded first: [`RunRecord::bounded`]); the writer syncs the file to
    /// disk after it. Never waits.
    pub fn run(&self, record: RunRecord) {
        self.send(Record::Run(record.bounded()));
    }

    /// Queues an egress connection's line (bounded first: [`NetRecord::bounded`]); never waits.
    pub fn net(&self, record: NetRecord) {
        self.send(Record::Net(record.bounded()));
    }

    fn send(&self, record: Record) {
        if self.queue.try_send(Msg::Line(Box::new(record))).is_ok() {
            return;
        }
        self.shared.drop_one();
        if !self.shared.warned_full.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the audit log's queue is full (or its writer stopped): lines are dropped and \
                 counted in the next run line's `dropped`"
            );
        }
    }

    /// Writes what is queued, syncs the file and stops the writer, within `bound`. Lines
    /// queued later are counted as dropped.
    pub async fn close(&self, bound: Duration) {
        let (done, finished) = oneshot::channel();
        let stop = async {
            if self.queue.send(Msg::Stop(done)).await.is_ok() {
                let _ = finished.await;
            }
        };
        if tokio::time::timeout(bound, stop).await.is_err() {
            tracing::warn!(
                "the audit log was not written out within {} s of shutdown",
                bound.as_secs()
            );
            return;
        }
        let handle = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
        let lost = self.shared.dropped.load(Ordering::Relaxed);
        if lost > 0 {
            tracing::warn!("{lost} audit lines were dropped after the last run line");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(n: u32) -> CallRecord {
        CallRecord {
            time: "2026-11-25T04:00:00.000Z".into(),
            run: "r1".into(),
            token: None,
            creds: None,
            server: "stub".into(),
            tool: format!("echo{n}"),
            args_sha256: String::new(),
            arguments: None,
            arguments_cut: false,
            duration_ms: 1.0,
            outcome: "ok".into(),
            error_kind: None,
            bytes_in: 2,
            bytes_out: 3,
            decision: "allow".into(),
            rule: None,
            count: 1,
        }
    }

    fn run_line() -> RunRecord {
        RunRecord {
            time: "2026-11-25T04:00:01.000Z".into(),
            run: "r1".into(),
            token: None,
            code_sha256: "c".into(),
            language: None,
            status: "ok".into(),
            duration_ms: 5.0,
            calls: 5,
            refused: 0,
            bytes_in: 10,
            bytes_out: 15,
            tokens_direct: None,
            tokens_run: None,
            dropped: 0,
            code: None,
            code_cut: 0,
        }
    }

    fn lines(path: &std::path::Path) -> Vec<Record> {
        std::fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    #[tokio::test]
    async fn a_full_queue_is_counted_and_reported_in_the_next_run_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let file = file::AuditFile::open(&path, 1 << 20, mac::ChainKey([1; 32])).expect("open");
        // No writer yet: the queue of two fills, the other three calls are dropped.
        let (log, queue) = AuditLog::queue(false, 2);
        for n in 0..5 {
            log.call(call(n));
        }
        assert_eq!(log.shared.dropped.load(Ordering::Relaxed), 3);
        let handle = writer::spawn(file, queue, log.shared.clone()).expect("spawn");
        *log.writer.lock().expect("lock") = Some(handle);
        // Once the writer has emptied the queue, the run line has room.
        drop(log.queue.reserve_many(2).await.expect("open"));
        log.run(run_line());
        log.close(FLUSH_TIMEOUT).await;
        let got = lines(&path);
        assert_eq!(got.len(), 3, "{got:?}");
        let Record::Run(run) = &got[2] else {
            panic!("{got:?}")
        };
        assert_eq!(run.dropped, 3);
        assert_eq!(log.shared.dropped.load(Ordering::Relaxed), 0);
        // After close nothing is written, and what is lost is counted.
        log.call(call(9));
        assert_eq!(log.shared.dropped.load(Ordering::Relaxed), 1);
        assert_eq!(lines(&path).len(), 3);
    }

    #[tokio::test]
    async fn close_returns_once_every_queued_line_is_on_disk() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let file = file::AuditFile::open(&path, 1 << 20, mac::ChainKey([1; 32])).expect("open");
        let (log, queue) = AuditLog::queue(false, 8);
        for n in 0..3 {
            log.call(call(n));
        }
        log.run(run_line());
        // No writer yet: closing waits.
        let closing = tokio::spawn({
            let log = log.clone();
            async move { log.close(FLUSH_TIMEOUT).await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !closing.is_finished(),
            "close returned before the lines were written"
        );
        let handle = writer::spawn(file, queue, log.shared.clone()).expect("spawn");
        *log.writer.lock().expect("lock") = Some(handle);
        closing.await.expect("closed");
        assert_eq!(lines(&path).len(), 4);
    }

    #[tokio::test]
    async fn open_writes_lines_in_order_and_close_flushes_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("logs/audit.log");
        let settings = PolicySettings {
            audit_log: Some(path.clone()),
            ..crate::config::PolicySettings::from_lookup(&|_| None).expect("defaults")
        };
        let log = AuditLog::open(&settings, &dir.path().join("state"))
            .expect("open")
            .expect("set");
        for n in 0..50 {
            log.call(call(n));
        }
        log.run(run_line());
        log.close(FLUSH_TIMEOUT).await;
        let got = lines(&path);
        assert_eq!(got.len(), 51);
        let Record::Call(c) = &got[49] else {
            panic!("{got:?}")
        };
        assert_eq!(c.tool, "echo49");
        assert!(matches!(&got[50], Record::Run(r) if r.dropped == 0));
        // Unset: no log.
        let none = crate::config::PolicySettings::from_lookup(&|_| None).expect("defaults");
        assert!(AuditLog::open(&none, dir.path()).expect("unset").is_none());
    }
}
