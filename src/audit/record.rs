//! The audit log's lines: [`CallRecord`] (one per tool call, admitted or refused) and
//! [`RunRecord`] (one per run), serialized as one JSON object per line. No secrets: arguments
//! appear as their SHA-256, and as values only when `MCP_BRIDGE_AUDIT_VALUES=1`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// When the call was answered (RFC 3339, UTC).
    pub time: String,
    /// The run's id.
    pub run: String,
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// SHA-256 of the arguments as JSON, hex.
    pub args_sha256: String,
    /// The argument values (only with `MCP_BRIDGE_AUDIT_VALUES=1`; secret-looking keys redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// Milliseconds from the request to its answer (the wait for approval included).
    pub duration_ms: f64,
    /// `ok`, `error` (the call failed) or `refused` (the policy refused it).
    pub outcome: String,
    /// The error kind, when it failed or was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// Bytes of the arguments sent.
    pub bytes_in: u64,
    /// Bytes of the result received.
    pub bytes_out: u64,
    /// The policy's verdict (`allow`, `approved`, `pre_approved`, `deny`, `limit`, `declined`,
    /// `unapproved`).
    pub decision: String,
    /// The rule that decided, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// When the run ended (RFC 3339, UTC).
    pub time: String,
    /// The run's id.
    pub run: String,
    /// SHA-256 of the code, hex.
    pub code_sha256: String,
    /// The run's status (`ok`, `error`, `timeout`, ...).
    pub status: String,
    /// Milliseconds from arrival to the report.
    pub duration_ms: f64,
    /// Tool calls admitted.
    pub calls: u64,
    /// Tool calls refused.
    pub refused: u64,
    /// Bytes of arguments sent.
    pub bytes_in: u64,
    /// Bytes of results received.
    pub bytes_out: u64,
    /// Audit lines dropped because the queue was full since the last run line.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A tool call.
    Call(CallRecord),
    /// A run.
    Run(RunRecord),
}
