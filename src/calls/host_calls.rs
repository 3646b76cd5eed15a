//! The host side of the call contract: what a backend answering sandbox requests implements
//! ([`HostCalls`]), what every call carries ([`CallContext`]), and what the policy needs to
//! know of a tool ([`ToolFacts`]).

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::error::{CallError, LoadError};
use super::loaded::LoadedTools;
use super::request::BackendCall;
use super::run_scope::RunScope;
use crate::config::ServerPolicy;

/// What the host knows about the exec a request came from.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// Servers the run loaded (`servers` argument of `run_python`).
    pub servers: Arc<[String]>,
    /// When the run's time is up; every downstream call must finish by then.
    pub deadline: Instant,
    /// The run's scope: its id, narrowing, asker and tallies.
    pub run: Arc<RunScope>,
}

/// A backend answering host methods (MCP servers, discovery helpers).
#[async_trait::async_trait]
pub trait HostCalls: Send + Sync + 'static {
    /// Starts (if needed) the servers the run of `scope` names and returns their tools,
    /// without those outside the run's narrowing (its `allowed_tools`). A backend may keep
    /// things for the run's client ([`RunScope::caller`]): its own processes of
    /// `"perClient"` servers.
    ///
    /// # Errors
    /// The [`LoadError`] naming the server that could not be loaded.
    async fn load(
        &self,
        servers: &[String],
        scope: &RunScope,
        deadline: Instant,
    ) -> Result<LoadedTools, LoadError>;
    /// Answers `call`, parsed and passed by the dispatcher.
    ///
    /// # Errors
    /// A [`CallError`] raised in the sandbox as an exception of its kind.
    async fn call(&self, ctx: &CallContext, call: BackendCall) -> Result<Value, CallError>;

    /// What the backend knows of `server`'s `tool` that the policy needs, for a run of
    /// `caller` (its own handle of a server when it has one): the operator's rules for the
    /// server and the tool's behaviour hints. Nothing by default.
    fn facts(&self, server: &str, tool: &str, caller: Option<&super::Caller>) -> ToolFacts {
        let _ = (server, tool, caller);
        ToolFacts::default()
    }

    /// Bytes of `server`'s `tools/list` result as JSON, as a client connected to it directly
    /// would read it (the run trace's estimate); 0 when the list is not known. 0 by default.
    fn listing_bytes(&self, server: &str) -> u64 {
        let _ = server;
        0
    }

    /// Signs in to `server`, which needs it, for `ctx`'s call (the person asked through the
    /// run's client, or the link opened): whether it is signed in and connected now. `false`
    /// by default.
    async fn sign_in(&self, ctx: &CallContext, server: &str) -> bool {
        let _ = (ctx, server);
        false
    }
}

/// What the policy needs to know of one tool ([`HostCalls::facts`]).
#[derive(Debug, Clone, Default)]
pub struct ToolFacts {
    /// The operator's policy for the server; `None` for an unknown server.
    pub policy: Option<Arc<ServerPolicy>>,
    /// The config file that defines the server (for messages naming a rule).
    pub file: Arc<str>,
    /// The tool says `destructiveHint: true` (in the running server's list).
    pub destructive: bool,
    /// The tool says `readOnlyHint: true`.
    pub read_only: bool,
    /// The hints come from the server's tool list (live, or cached when it last connected);
    /// `false`: nothing is known of the tool, and a call is treated as needing approval.
    pub hints_known: bool,
    /// The server needs sign-in (its last start met a 401): the message naming the command,
    /// raised as `AuthRequiredError` before approval is asked for a call that cannot run.
    pub sign_in: Option<String>,
    /// The tool changed (or appeared) since its server's tools were pinned and is refused
    /// until approved: the message naming the command, raised as `ToolChangedError` before
    /// approval is asked for a call that cannot run.
    pub changed: Option<String>,
    /// Whose credentials a call to a remote server uses (the audit line's `creds`): the
    /// caller's token name, or `operator`; `None` for a local (stdio) server.
    pub creds: Option<String>,
}

/// A backend with no servers and no methods beyond the built-ins.
pub struct NoHostCalls;

#[async_trait::async_trait]
impl HostCalls for NoHostCalls {
    async fn load(
        &self,
        servers: &[String],
        _scope: &RunScope,
        _deadline: Instant,
    ) -> Result<LoadedTools, LoadError> {
        match servers.first() {
            None => Ok(LoadedTools::default()),
            Some(s) => Err(LoadError::NoServers { server: s.clone() }),
        }
    }

    async fn call(&self, _ctx: &CallContext, call: BackendCall) -> Result<Value, CallError> {
        Err(CallError::bad_request(format!(
            "unknown host method '{}'",
            call.method().name()
        )))
    }
}
