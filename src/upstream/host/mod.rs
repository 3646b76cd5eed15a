//! [`UpstreamHostCalls`]: the host methods sandbox code calls, answered over the upstream
//! pool. The dispatcher hands each one over parsed ([`BackendCall`]); each method has its own
//! handler: `call_tool.rs` (proxied calls, with the policy that a run only calls tools of the
//! servers it loaded), `servers.rs` (what servers there are), `tool_docs.rs` (a server's
//! tools and their docs), `search_docs.rs` (the search over every known tool), and `load.rs`
//! (the servers a run loads, as its exec frame carries them).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::validate::Validators;
use super::{UpstreamError, UpstreamPool};
use crate::calls::{
    BackendCall, CallContext, CallError, Caller, HostCalls, LoadError, LoadedTools, RunScope,
    ToolFacts,
};

mod call_tool;
mod last_load;
mod load;
mod search_docs;
mod servers;
mod skills;
mod tool_docs;

/// Host methods backed by the upstream pool.
pub struct UpstreamHostCalls {
    pool: Arc<UpstreamPool>,
    search: tokio::sync::Mutex<Option<Arc<search_docs::SearchIndex>>>,
    validators: Validators,
    /// Per server: the tool list last loaded and its exec-frame entries (rebuilt on change).
    proxy_entries: std::sync::Mutex<HashMap<String, load::ProxyEntries>>,
    /// The last load without a narrowing, handed back while nothing it depends on changed.
    last_load: last_load::LastLoad,
    /// Where skills are kept; `None`: none are (the skill methods say so).
    skills: Option<crate::skills::SkillStore>,
}

impl UpstreamHostCalls {
    /// A backend over `pool`.
    pub fn new(pool: Arc<UpstreamPool>) -> Self {
        UpstreamHostCalls {
            pool,
            search: tokio::sync::Mutex::new(None),
            validators: Validators::new(),
            proxy_entries: std::sync::Mutex::new(HashMap::new()),
            last_load: last_load::LastLoad::default(),
            skills: None,
        }
    }

    /// The backend keeping skills in `store`.
    #[must_use]
    pub fn with_skills(mut self, store: crate::skills::SkillStore) -> Self {
        self.skills = Some(store);
        self
    }
}

/// The client the run of `ctx` came from, if any (`serve --http`).
fn caller(ctx: &CallContext) -> Option<&Caller> {
    ctx.run.caller.as_deref()
}

/// Whether the run of `ctx` may see `server`'s `tool`: inside its `allowed_tools`, when it has
/// one. (Tools the config refuses are never in a tool list at all.)
fn visible(ctx: &CallContext, server: &str, tool: &str) -> bool {
    ctx.run
        .narrowing
        .as_ref()
        .is_none_or(|n| n.allows(server, tool))
}

impl From<UpstreamError> for CallError {
    fn from(e: UpstreamError) -> Self {
        CallError {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

#[async_trait::async_trait]
impl HostCalls for UpstreamHostCalls {
    async fn load(
        &self,
        servers: &[String],
        scope: &RunScope,
        deadline: Instant,
    ) -> Result<LoadedTools, LoadError> {
        let caller = scope.caller.as_deref();
        let narrowing = scope.narrowing.as_ref();
        self.load_servers(servers, narrowing, caller, deadline)
            .await
    }

    async fn call(&self, ctx: &CallContext, call: BackendCall) -> Result<Value, CallError> {
        // The other methods' futures are boxed: they may start servers, and their state
        // (kilobytes) would otherwise be part of, and be copied with, every `call_tool`.
        match call {
            BackendCall::CallTool(call) => self.call_tool(ctx, call).await,
            BackendCall::ListServers => Ok(self.list_servers()),
            BackendCall::DiscoveredServers => self.discovered_servers(ctx),
            BackendCall::ListTools { server } => Box::pin(self.list_tools(ctx, &server)).await,
            BackendCall::QueryToolDocs {
                server,
                tool,
                detail,
            } => Box::pin(self.query_tool_docs(ctx, &server, tool.as_deref(), detail)).await,
            BackendCall::Stubs { server } => Box::pin(self.stubs(ctx, &server)).await,
            call @ (BackendCall::SaveSkill { .. }
            | BackendCall::ListSkills
            | BackendCall::LoadSkill { .. }) => Box::pin(self.skill_call(ctx, call)).await,
            BackendCall::SearchToolDocs {
                query,
                limit,
                detail,
            } => Ok(Box::pin(self.search_tool_docs(ctx, &query, limit, detail)).await),
            BackendCall::DescribeServer { name } => {
                Box::pin(self.describe_server(ctx, &name)).await
            }
            BackendCall::ListLoadedServerMetadata => self.list_loaded_server_metadata(ctx),
            BackendCall::CapabilitySummary => Ok(self.capability_summary(ctx)),
        }
    }

    async fn sign_in(&self, ctx: &CallContext, server: &str) -> bool {
        let Ok(shared) = self.pool.get(server) else {
            return false;
        };
        let Ok(up) = self.pool.for_caller(shared, caller(ctx)) else {
            return false;
        };
        up.sign_in_for(&ctx.run).await.is_ok()
            && up
                .connect(ctx.run.waits.extended(ctx.deadline))
                .await
                .is_ok()
    }

    fn listing_bytes(&self, server: &str) -> u64 {
        // As `tools/list` answers: `{"tools": [...]}`.
        self.pool
            .tools_now(server)
            .map_or(0, |tools| crate::calls::json_bytes(&*tools) + 11)
    }

    fn facts(&self, server: &str, tool: &str, caller: Option<&Caller>) -> ToolFacts {
        let Ok(shared) = self.pool.get(server) else {
            return ToolFacts::default();
        };
        // The caller's own handle (made now if it has none yet: a run loads it anyway), so
        // what it says of sign-in is the caller's; the shared one if none can be made.
        let up = self
            .pool
            .for_caller(shared, caller)
            .unwrap_or_else(|_| shared.clone());
        let creds = crate::upstream::oauth::remote_url(&up.spec)
            .is_ok()
            .then(
                || match up.tasks.tokens.as_ref().and_then(|t| t.caller_name()) {
                    Some(name) => name.to_string(),
                    None => OPERATOR.to_string(),
                },
            );
        // The running server's list; when it is not running (it stopped since the run loaded
        // it, and the call will restart it), the list cached when it last connected. Neither:
        // the hints are unknown and the policy treats the call as one that needs approval.
        let hints = up
            .hints(tool)
            .or_else(|| self.pool.cached_hints(&up.spec, tool));
        let (destructive, read_only) = hints.unwrap_or_default();
        ToolFacts {
            policy: Some(up.spec.policy.clone()),
            file: up.spec.source.display().to_string().into(),
            destructive,
            read_only,
            hints_known: hints.is_some(),
            sign_in: up.needs_sign_in().then(|| up.sign_in_refusal().to_string()),
            // Held to its pin (`pins/`; the file read only for a held tool).
            changed: up
                .live_handle()
                .filter(|l| l.held.holds(tool) && l.held.still_held_now(tool))
                .map(|_| {
                    UpstreamError::ToolChanged {
                        server: server.into(),
                        tool: tool.into(),
                    }
                    .to_string()
                }),
            creds,
        }
    }
}

/// The audit's `creds` for a call made with the operator's own sign-in.
pub const OPERATOR: &str = "operator";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::ToolCall;

    #[test]
    fn hints_of_a_stopped_server_come_from_its_cached_list() {
        use rmcp::model::{Tool, ToolAnnotations};
        let stdio = crate::config::Transport::Stdio {
            command: "db-server".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        };
        let spec = crate::config::ServerSpec::new("db", stdio, std::path::Path::new("/x.json"));
        let dir = tempfile::tempdir().expect("tempdir");
        let mut drop_table = Tool::new("drop_table", "Drop", Arc::new(serde_json::Map::new()));
        drop_table.annotations = Some(ToolAnnotations::new().destructive(true));
        super::super::cache::ToolCache::new(dir.path()).put(&spec, Arc::new(vec![drop_table]));
        let servers = Arc::new(crate::config::Servers {
            specs: vec![spec],
            ..Default::default()
        });
        let calls = UpstreamHostCalls::new(Arc::new(UpstreamPool::new(servers, dir.path())));
        let f = calls.facts("db", "drop_table", None);
        assert!(f.hints_known && f.destructive && !f.read_only, "{f:?}");
        // Nothing known of a tool the cached list lacks: the policy asks.
        assert!(!calls.facts("db", "new_tool", None).hints_known);
        assert!(calls.facts("nope", "x", None).policy.is_none());
        assert!(
            f.creds.is_none(),
            "a local process uses nobody's credentials"
        );
    }

    #[test]
    fn a_call_tool_future_is_small() {
        // The discovery methods may start servers; their state must not ride along (and be
        // copied) on every proxied call.
        let servers = Arc::new(crate::config::Servers::default());
        let dir = tempfile::tempdir().expect("tempdir");
        let calls = UpstreamHostCalls::new(Arc::new(UpstreamPool::new(servers, dir.path())));
        let ctx = CallContext {
            servers: Arc::from(Vec::new()),
            deadline: Instant::now(),
            run: crate::calls::RunScope::plain("test"),
        };
        let call = calls.call(
            &ctx,
            BackendCall::CallTool(ToolCall {
                server: String::new(),
                tool: String::new(),
                arguments: serde_json::Map::new(),
            }),
        );
        assert!(
            std::mem::size_of_val(&*call) <= 2048,
            "{} bytes",
            std::mem::size_of_val(&*call)
        );
    }

    #[test]
    fn aliases() {
        assert_eq!(super::super::pytypes::alias("my-server.v2"), "my_server_v2");
        assert_eq!(super::super::pytypes::alias("1st"), "_1st");
    }
}
