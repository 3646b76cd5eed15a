//! Requests from sandbox code to the host: the single place every `call` frame passes.
//!
//! [`Dispatcher::handle`] is the policy hook: it sees the exec's loaded servers, the method and
//! its parameters before anything is routed, and is where allowlists, argument validation and
//! audit belong. Built-in methods are answered here; the rest go to a [`HostCalls`] backend.

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::error_kind::ErrorKind;
use super::log_limit::{clipped, LogLimit};
use super::snapshot::SnapshotStore;
use crate::shown::is_unsafe;

mod host_method;

use super::protocol::LoadedTools;
pub use host_method::HostMethod;

/// What the host knows about the exec a request came from.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// Servers the run loaded (`servers` argument of `run_python`).
    pub servers: Arc<[String]>,
    /// When the run's time is up; every downstream call must finish by then.
    pub deadline: Instant,
}

/// A failed host call, as raised in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// Error class for the sandbox; see ARCHITECTURE.md.
    pub kind: ErrorKind,
    /// The message.
    pub message: String,
}

impl CallError {
    /// A `bad_request` error.
    pub fn bad_request(message: impl Into<String>) -> Self {
        CallError {
            kind: ErrorKind::BadRequest,
            message: message.into(),
        }
    }
}

/// A backend answering host methods (MCP servers, discovery helpers).
#[async_trait::async_trait]
pub trait HostCalls: Send + Sync + 'static {
    /// Starts (if needed) the servers a run names and returns their tool names.
    async fn load(&self, servers: &[String], deadline: Instant) -> Result<LoadedTools, String>;
    /// Answers `method` with `params`.
    async fn call(
        &self,
        ctx: &CallContext,
        method: &str,
        params: Value,
    ) -> Result<Value, CallError>;
}

/// A backend with no servers and no methods beyond the built-ins.
pub struct NoHostCalls;

#[async_trait::async_trait]
impl HostCalls for NoHostCalls {
    async fn load(&self, servers: &[String], _deadline: Instant) -> Result<LoadedTools, String> {
        match servers.first() {
            None => Ok(LoadedTools::new()),
            Some(s) => Err(format!(
                "unknown MCP server '{s}': no servers are configured"
            )),
        }
    }

    async fn call(
        &self,
        _ctx: &CallContext,
        method: &str,
        _params: Value,
    ) -> Result<Value, CallError> {
        Err(CallError::bad_request(format!(
            "unknown host method '{method}'"
        )))
    }
}

/// Routes sandbox requests; cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    backend: Arc<dyn HostCalls>,
    /// The namespace snapshot `reset` drops.
    snapshots: Option<Arc<SnapshotStore>>,
}

impl Dispatcher {
    /// A dispatcher sending non-built-in methods to `backend`.
    pub fn new(backend: Arc<dyn HostCalls>) -> Self {
        Dispatcher {
            backend,
            snapshots: None,
        }
    }

    /// The same, with `store` as the snapshot `reset` drops.
    pub(super) fn with_snapshots(self, store: Arc<SnapshotStore>) -> Self {
        Dispatcher {
            snapshots: Some(store),
            ..self
        }
    }

    /// Loads the servers a run names; see [`HostCalls::load`].
    ///
    /// # Errors
    /// A message naming the server that could not be loaded.
    pub async fn load(&self, servers: &[String], deadline: Instant) -> Result<LoadedTools, String> {
        self.backend.load(servers, deadline).await
    }

    /// Handles one request from sandbox code.
    ///
    /// # Errors
    /// A [`CallError`] raised in the sandbox as an exception of its kind.
    pub async fn handle(
        &self,
        ctx: &CallContext,
        method: &str,
        params: Value,
    ) -> Result<Value, CallError> {
        if method == HostMethod::Ping.name() {
            return Ok(params);
        }
        unsafe_names(method, &params)?;
        if method == HostMethod::Reset.name() {
            // The sandbox empties its namespace once this answer arrives.
            let dropped = self.snapshots.as_ref().is_some_and(|s| s.discard());
            return Ok(serde_json::json!({ "snapshot_dropped": dropped }));
        }
        self.backend.call(ctx, method, params).await
    }
}

/// Log lines about refused requests, rate-limited across sessions.
static REFUSED_LOG: LogLimit = LogLimit::new();

/// Longest server, tool or method name a request may carry, in bytes.
const NAME_MAX: usize = 256;

/// Refuses a request whose method or server, tool or name parameter holds a character that
/// must not reach a terminal (`crate::shown::is_unsafe`) or is over [`NAME_MAX`] bytes: no
/// configured name is like that, and such a name would otherwise be echoed into messages
/// and logs. The refusal shows the names escaped and cut.
fn unsafe_names(method: &str, params: &Value) -> Result<(), CallError> {
    let named = ["server", "tool", "name"]
        .into_iter()
        .filter_map(|key| Some((key, params.get(key)?.as_str()?)));
    let bad = std::iter::once(("method", method))
        .chain(named)
        .find(|(_, v)| v.len() > NAME_MAX || v.chars().any(is_unsafe));
    let Some((key, value)) = bad else {
        return Ok(());
    };
    let shown = clipped(value);
    crate::limited!(REFUSED_LOG, tracing::Level::INFO,
        "refused a host request whose {key} has control or invisible characters or is too long: \"{shown}\""
    );
    Err(CallError::bad_request(format!(
        "the {key} \"{shown}\" has control, bidirectional or invisible characters, or is longer \
         than {NAME_MAX} bytes: no server, tool or host method is named like that"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn builtins_and_unknown_methods() {
        let d = Dispatcher::new(Arc::new(NoHostCalls));
        let ctx = CallContext {
            servers: Arc::from(Vec::new()),
            deadline: Instant::now(),
        };
        let echoed = d.handle(&ctx, "ping", serde_json::json!({"x": 1})).await;
        assert_eq!(echoed, Ok(serde_json::json!({"x": 1})));
        let err = d
            .handle(&ctx, "rm_rf", Value::Null)
            .await
            .expect_err("unknown");
        assert!(err.message.contains("rm_rf") && err.kind.as_str() == "bad_request");
        for (method, params) in [
            (
                "call_tool",
                serde_json::json!({"server": "gh\x1b[2K", "tool": "t"}),
            ),
            ("list_tools", serde_json::json!({"server": "a\u{202E}b"})),
            (
                "call_tool",
                serde_json::json!({"server": "gh", "tool": "x".repeat(300)}),
            ),
            ("evil\rmethod", Value::Null),
        ] {
            let err = d.handle(&ctx, method, params).await.expect_err("refused");
            assert_eq!(err.kind.as_str(), "bad_request");
            assert!(
                !err.message.chars().any(is_unsafe) && err.message.contains("invisible"),
                "{}",
                err.message
            );
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(SnapshotStore::new(dir.path()));
        let mut w = store.writer().expect("writer");
        w.write(b"x").await.expect("write");
        store.commit(w).await.expect("commit");
        let d = d.with_snapshots(store.clone());
        let r = d.handle(&ctx, "reset", Value::Null).await;
        assert_eq!(r, Ok(serde_json::json!({"snapshot_dropped": true})));
        assert!(store.open().is_none() && !store.path().exists());
        assert!(d.load(&["gh".to_string()], Instant::now()).await.is_err());
        assert!(d
            .load(&[], Instant::now())
            .await
            .expect("no servers")
            .is_empty());
    }
}
