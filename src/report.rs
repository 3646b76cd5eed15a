//! [`RunReport`]: the outcome of one `run_python` call, as data. Produced by `bridge`,
//! rendered by `format`, returned as `structuredContent` by `server`.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

/// No server was loaded (the report then leaves `servers` out).
fn no_servers(servers: &Arc<[String]>) -> bool {
    servers.is_empty()
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The code ran to completion.
    #[default]
    Ok,
    /// The code raised an exception.
    Error,
    /// The run hit its timeout.
    Timeout,
    /// The client cancelled the call.
    Cancelled,
    /// The sandbox could not run the code (no runtime, image missing, sandbox died, ...).
    SandboxError,
}

/// The outcome of one run. Empty fields are omitted when serialized.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RunReport {
    /// How the run ended.
    pub status: RunStatus,
    /// What the code printed (cut with a marker if over the output limit).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    /// What the code wrote to stderr.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stderr: String,
    /// Traceback or bridge error message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Something the caller must know, e.g. that the sandbox was restarted and state lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// MCP servers loaded for this run (the request's own list, shared, not copied).
    #[serde(skip_serializing_if = "no_servers")]
    pub servers: Arc<[String]>,
    /// Files the run delivered to the host (the outbox, `runtime.save`, pictures).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<SavedFile>,
    /// Files the run wrote but that were not delivered, or pictures not shown, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files_refused: Vec<String>,
    /// Set when the code raised `SystemExit` (the status is then `Error`). Read by `exec`
    /// only: not serialized, so `run_python`'s results stay as they were.
    #[serde(skip)]
    pub exit: Option<SystemExit>,
    /// What the run did through the bridge (`calls::Trace`), for the result's `_meta`; not
    /// serialized with the report.
    #[serde(skip)]
    pub trace: Option<serde_json::Value>,
    /// The trace's token estimate, for the audit log's run line.
    #[serde(skip)]
    pub tokens: Option<Tokens>,
}

/// A run's token estimate (`calls::Trace::tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokens {
    /// The same work as direct tool calls: the listings, the arguments, the raw results.
    pub direct: u64,
    /// What the run cost: its code and its output.
    pub run: u64,
}

/// A file copied out of the sandbox into this session's folder on the host.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SavedFile {
    /// Its file name (chosen by the host).
    pub name: String,
    /// Where it is on the host.
    pub path: PathBuf,
    /// Its URI: `resources/read` serves it.
    pub uri: String,
    /// Its MIME type (by extension).
    pub mime: String,
    /// Its size in bytes.
    pub size: u64,
    /// The picture to show as image content (a PNG within the image budget).
    #[serde(skip)]
    pub picture: Option<Picture>,
}

/// A PNG to return as MCP image content, checked by the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    /// The PNG bytes.
    pub png: Arc<[u8]>,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// How `python3` would have exited on the `SystemExit` the code raised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemExit {
    /// The exit status: `sys.exit()` → 0, `sys.exit(n)` → n's low byte, anything else → 1.
    pub code: u8,
    /// What `python3` would have printed: the exit argument when it was not an int.
    pub message: Option<String>,
}

impl RunReport {
    /// A report for a run that failed before or around the code, with `status` and `message`.
    pub fn failed(status: RunStatus, message: impl Into<String>) -> Self {
        RunReport {
            status,
            error: Some(message.into()),
            ..Default::default()
        }
    }

    /// Puts `note` before any notice the run already has.
    pub fn add_notice(&mut self, note: String) {
        self.notice = Some(match self.notice.take() {
            Some(other) => format!("{note}. {other}"),
            None => note,
        });
    }

    /// True unless the run completed normally.
    pub fn is_error(&self) -> bool {
        self.status != RunStatus::Ok
    }
}
