//! [`UpstreamHostCalls`]: the host methods sandbox code calls (`call_tool` and the discovery
//! helpers), with the policy that a run may only call tools of the servers it loaded.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::docs::{self, alias, Detail};
use super::search::{self, Entry};
use super::validate::{Rejection, Validators};
use super::{result, UpstreamError, UpstreamPool};
use crate::bridge::{CallContext, CallError, HostCalls, HostMethod, LoadedTools};

/// Results returned by `search_tool_docs` at most.
const MAX_SEARCH_LIMIT: usize = 100;

/// Host methods backed by the upstream pool.
pub struct UpstreamHostCalls {
    pool: Arc<UpstreamPool>,
    search: tokio::sync::Mutex<Option<Arc<SearchIndex>>>,
    validators: Validators,
    /// Per server: the tool list last loaded and its exec-frame entries (rebuilt on change).
    proxy_entries: std::sync::Mutex<HashMap<String, ProxyEntries>>,
}

/// A server's tool list and its exec-frame entries (`docs::proxy_entry` per tool, serialized).
type ProxyEntries = (Arc<Vec<Tool>>, Arc<RawValue>);

/// The search index over every known tool list, with the lists it was built from.
struct SearchIndex {
    /// The tool lists, by server (identity is the cache key).
    lists: Vec<(String, Arc<Vec<Tool>>)>,
    /// Per index entry: (server, its tools, position in them).
    refs: Vec<(String, Arc<Vec<Tool>>, usize)>,
    index: search::Index,
}

impl UpstreamHostCalls {
    /// A backend over `pool`.
    pub fn new(pool: Arc<UpstreamPool>) -> Self {
        UpstreamHostCalls {
            pool,
            search: tokio::sync::Mutex::new(None),
            validators: Validators::new(),
            proxy_entries: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The index over the tools known now, rebuilt only when a tool list changed.
    async fn search_index(&self) -> Arc<SearchIndex> {
        let known = self.pool.known_tools();
        let mut slot = self.search.lock().await;
        if let Some(ix) = slot.as_ref() {
            let same = ix.lists.len() == known.len()
                && ix
                    .lists
                    .iter()
                    .zip(&known)
                    .all(|((a, x), (b, y))| a == b && Arc::ptr_eq(x, y));
            if same {
                return ix.clone();
            }
        }
        let mut refs = Vec::new();
        let mut entries = Vec::new();
        for (server, tools) in &known {
            for (i, t) in tools.iter().enumerate() {
                refs.push((server.clone(), tools.clone(), i));
                entries.push(Entry {
                    server: server.clone(),
                    tool: t.name.to_string(),
                    description: t.description.as_deref().unwrap_or("").to_string(),
                });
            }
        }
        let ix = Arc::new(SearchIndex {
            lists: known,
            refs,
            index: search::Index::build(&entries),
        });
        *slot = Some(ix.clone());
        ix
    }
}

/// A tool list as the exec frame carries it: one `docs::proxy_entry` per tool, serialized once.
fn proxy_entries(tools: &[Tool]) -> Arc<RawValue> {
    let list: Vec<Value> = tools.iter().map(docs::proxy_entry).collect();
    let text = serde_json::to_string(&list).expect("JSON values serialize");
    Arc::from(RawValue::from_string(text).expect("serde_json wrote valid JSON"))
}

/// How long before a run's deadline a search stops waiting for indexing.
const INDEX_WAIT_MARGIN: std::time::Duration = std::time::Duration::from_secs(1);

impl UpstreamHostCalls {
    /// Waits for the first indexing pass (starting it if nobody has: `exec`), until shortly
    /// before `deadline`; returns the configured servers whose tools a search cannot see yet,
    /// as `{"server", "reason"}`.
    async fn wait_for_index(&self, deadline: Instant) -> Vec<Value> {
        let pool = &self.pool;
        let until = deadline.checked_sub(INDEX_WAIT_MARGIN).unwrap_or(deadline);
        let failures = tokio::time::timeout_at(until, pool.ensure_indexed())
            .await
            .ok();
        let known: std::collections::HashSet<String> = pool
            .known_tools()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let mut gaps = Vec::new();
        for spec in &pool.servers().specs {
            if known.contains(&spec.name) {
                continue;
            }
            let failed = failures
                .as_ref()
                .and_then(|f| f.iter().find(|(n, _)| *n == spec.name));
            let reason = match failed {
                Some((_, why)) => format!("could not be started: {why}"),
                None if !spec.consent.permits() => "not approved: nothing of it is started".into(),
                None if spec.disabled => "disabled: indexed once a run loads it".into(),
                None if !UpstreamPool::indexable(spec) => {
                    format!(
                        "{} server: indexed once a run loads it",
                        spec.transport.kind()
                    )
                }
                None => "indexing is not finished yet".into(),
            };
            gaps.push(json!({"server": spec.name, "reason": reason}));
        }
        gaps
    }
}

impl From<UpstreamError> for CallError {
    fn from(e: UpstreamError) -> Self {
        CallError {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

fn str_param<'a>(p: &'a Value, key: &str) -> Result<&'a str, CallError> {
    p.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| CallError::bad_request(format!("'{key}' must be a string")))
}

fn opt_str<'a>(p: &'a Value, key: &str) -> Result<Option<&'a str>, CallError> {
    match p.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(CallError::bad_request(format!(
            "'{key}' must be a string or None"
        ))),
    }
}

#[async_trait::async_trait]
impl HostCalls for UpstreamHostCalls {
    async fn load(&self, servers: &[String], deadline: Instant) -> Result<LoadedTools, String> {
        let lists = self
            .pool
            .load(servers, deadline)
            .await
            .map_err(|e| e.to_string())?;
        let mut entries = self.proxy_entries.lock().expect("proxy entries lock");
        Ok(lists
            .into_iter()
            .map(|(server, tools)| {
                let json = match entries.get(&server) {
                    Some((list, json)) if Arc::ptr_eq(list, &tools) => json.clone(),
                    _ => {
                        let json = proxy_entries(&tools);
                        entries.insert(server.clone(), (tools, json.clone()));
                        json
                    }
                };
                (server, json)
            })
            .collect())
    }

    async fn call(&self, ctx: &CallContext, method: &str, p: Value) -> Result<Value, CallError> {
        if method == HostMethod::CallTool.name() {
            return self.call_tool(ctx, p).await;
        }
        // Boxed: these futures may start servers, and their state (kilobytes) would otherwise
        // be part of, and be copied with, every `call_tool`.
        Box::pin(self.discovery(ctx, method, p)).await
    }
}

impl UpstreamHostCalls {
    /// `call_tool`: the hot path of proxied calls.
    async fn call_tool(&self, ctx: &CallContext, mut p: Value) -> Result<Value, CallError> {
        let pool = &self.pool;
        // Moved out, not copied: arguments can be large.
        let args = match p.get_mut("arguments").map(Value::take) {
            None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
            Some(args @ Value::Object(_)) => args,
            Some(_) => return Err(CallError::bad_request("'arguments' must be a dict")),
        };
        let server = str_param(&p, "server")?;
        let tool = str_param(&p, "tool")?;
        let up = pool.get(server)?;
        if up.spec.tool_disabled(tool) {
            return Err(UpstreamError::ToolDisabled {
                server: server.into(),
                tool: tool.into(),
                file: up.spec.source.display().to_string(),
            }
            .into());
        }
        if !ctx.servers.iter().any(|s| s == server) {
            return Err(UpstreamError::NotLoaded {
                name: server.into(),
                loaded: ctx.servers.to_vec(),
            }
            .into());
        }
        // Checked against the tool list of the running server; when it is not running (it
        // crashed since the run loaded it) the call restarts it and goes unchecked.
        if let Some(live) = up.live_now() {
            match self.validators.check(server, &live.tools, tool, &args) {
                Ok(()) => {}
                Err(Rejection::UnknownTool) => {
                    return Err(UpstreamError::UnknownTool {
                        server: server.into(),
                        tool: tool.into(),
                        available: live.tools.iter().map(|t| t.name.to_string()).collect(),
                    }
                    .into())
                }
                Err(Rejection::Invalid {
                    signature,
                    problems,
                }) => {
                    return Err(UpstreamError::InvalidArguments {
                        call: format!("mcp_{}.{}", alias(server), alias(tool)),
                        signature,
                        problems,
                    }
                    .into())
                }
            }
        }
        let Value::Object(args) = args else {
            unreachable!("arguments are an object")
        };
        let r = up.call(tool, args, ctx.deadline).await?;
        if r.is_error == Some(true) {
            return Err(UpstreamError::Tool {
                server: server.into(),
                tool: tool.into(),
                message: result::error_text(&r),
            }
            .into());
        }
        let value = result::to_value(r);
        if !result::maybe_wrapped(&value) {
            return Ok(value);
        }
        // Rare: `{"result": v}`; the tool's output schema tells whether FastMCP wrapped `v`.
        let live = up.live_now();
        let def = live
            .as_ref()
            .and_then(|l| l.tools.iter().find(|t| t.name == tool));
        Ok(result::unwrap_fastmcp(value, def))
    }

    /// Every host method but `call_tool` (routed to it all the same).
    async fn discovery(
        &self,
        ctx: &CallContext,
        method: &str,
        p: Value,
    ) -> Result<Value, CallError> {
        let pool = &self.pool;
        let Some(known) = HostMethod::parse(method) else {
            return Err(CallError::bad_request(format!(
                "unknown host method '{method}'"
            )));
        };
        match known {
            HostMethod::Ping => Ok(p),
            // Answered by the dispatcher, which holds the snapshot; nothing to drop here.
            HostMethod::Reset => Ok(json!({ "snapshot_dropped": false })),
            HostMethod::CallTool => Box::pin(self.call_tool(ctx, p)).await,
            HostMethod::ListServers => Ok(json!(pool.servers().names())),
            HostMethod::DiscoveredServers => {
                let mut servers = Vec::new();
                for s in &pool.servers().specs {
                    servers.push(json!({
                        "name": s.name,
                        "alias": alias(&s.name),
                        "description": describe_spec(s),
                        "transport": s.transport.kind(),
                        "source": s.source.display().to_string(),
                        "origin": s.origin.label(),
                        "consent": s.consent.label(),
                        "disabled": s.disabled,
                        "state": pool.get(&s.name)?.state_name(),
                    }));
                }
                Ok(json!({"servers": servers, "errors": pool.servers().issues}))
            }
            HostMethod::ListTools => {
                let server = str_param(&p, "server")?;
                let tools = pool.tools(server, ctx.deadline).await?;
                Ok(Value::Array(
                    tools
                        .iter()
                        .map(|t| {
                            json!({
                                "name": t.name,
                                "alias": alias(&t.name),
                                "description": docs::one_line(t),
                            })
                        })
                        .collect(),
                ))
            }
            HostMethod::QueryToolDocs => {
                let server = str_param(&p, "server")?;
                let detail =
                    Detail::parse(opt_str(&p, "detail")?).map_err(CallError::bad_request)?;
                let tools = pool.tools(server, ctx.deadline).await?;
                match opt_str(&p, "tool")? {
                    None => Ok(Value::Array(
                        tools.iter().map(|t| docs::doc(server, t, detail)).collect(),
                    )),
                    Some(name) => match docs::find(&tools, name) {
                        Some(t) => Ok(json!([docs::doc(server, t, detail)])),
                        None => Err(UpstreamError::UnknownTool {
                            server: server.into(),
                            tool: name.into(),
                            available: tools.iter().map(|t| t.name.to_string()).collect(),
                        }
                        .into()),
                    },
                }
            }
            HostMethod::SearchToolDocs => {
                let query = str_param(&p, "query")?;
                let limit = p
                    .get("limit")
                    .and_then(Value::as_u64)
                    .unwrap_or(5)
                    .min(MAX_SEARCH_LIMIT as u64) as usize;
                let detail =
                    Detail::parse(opt_str(&p, "detail")?).map_err(CallError::bad_request)?;
                let not_indexed = self.wait_for_index(ctx.deadline).await;
                let index = self.search_index().await;
                let ranked = index.index.rank(query, limit);
                let results: Vec<Value> = ranked
                    .into_iter()
                    .map(|(i, score)| {
                        let (server, tools, t) = &index.refs[i];
                        let mut d = docs::doc(server, &tools[*t], detail);
                        // Shown in (0, 1), order kept: a ranking score has no upper bound.
                        let shown = score / (1.0 + score);
                        d["score"] = json!((shown * 1000.0).round() / 1000.0);
                        d
                    })
                    .collect();
                Ok(json!({"results": results, "not_indexed": not_indexed}))
            }
            HostMethod::DescribeServer => {
                let name = str_param(&p, "name")?;
                let up = pool.get(name)?;
                let live = up.live_now();
                let tools = pool.tools(name, ctx.deadline).await.ok();
                let info = live.as_ref().and_then(|l| l.info.clone());
                Ok(json!({
                    "name": name,
                    "alias": alias(name),
                    "description": describe_spec(&up.spec),
                    "transport": up.spec.transport.kind(),
                    "source": up.spec.source.display().to_string(),
                    "origin": up.spec.origin.label(),
                    "consent": up.spec.consent.label(),
                    "state": up.state_name(),
                    "disabled": up.spec.disabled,
                    "server_info": info.as_ref().and_then(|i| i.server_info.as_ref()).map(|s| json!({"name": s.name, "version": s.version})),
                    "instructions": info.as_ref().and_then(|i| i.instructions.clone()),
                    "tools": tools.map(|ts| ts.iter().map(docs::listing).collect::<Vec<_>>()),
                }))
            }
            HostMethod::ListLoadedServerMetadata => {
                let mut out = Vec::new();
                for name in ctx.servers.iter() {
                    let live = pool.get(name)?.live_now();
                    let info = live.as_ref().and_then(|l| l.info.clone());
                    out.push(json!({
                        "name": name,
                        "alias": alias(name),
                        "server_info": info.as_ref().and_then(|i| i.server_info.as_ref()).map(|s| json!({"name": s.name, "version": s.version})),
                        "tool_count": live.as_ref().map(|l| l.tools.len()),
                        "tools": live.map(|l| l.tools.iter().map(docs::listing).collect::<Vec<_>>()).unwrap_or_default(),
                    }));
                }
                Ok(Value::Array(out))
            }
            HostMethod::CapabilitySummary => {
                let known: std::collections::HashMap<String, usize> = pool
                    .known_tools()
                    .into_iter()
                    .map(|(n, t)| (n, t.len()))
                    .collect();
                let mut text = String::from(
                    "Sandbox: persistent Python, no network; top-level await. Load servers with run_python(servers=[...]) and call \
                     `await mcp_<alias>.<tool>(...)`. Discovery: from mcp import runtime; list_servers, list_tools, query_tool_docs, \
                     search_tool_docs, describe_server, call_tool (each with a _sync twin).\nServers:",
                );
                for s in &pool.servers().specs {
                    let count = match known.get(&s.name) {
                        Some(n) => format!("{n} tools"),
                        None if !s.consent.permits() => {
                            "not approved: `mcp-code-bridge servers` says how".into()
                        }
                        None => "tools not indexed yet".into(),
                    };
                    let loaded = if ctx.servers.contains(&s.name) {
                        ", loaded"
                    } else {
                        ""
                    };
                    let disabled = if s.disabled { ", disabled" } else { "" };
                    text.push_str(&format!(
                        "\n- {} ({}, {count}{loaded}{disabled})",
                        s.name,
                        s.transport.kind()
                    ));
                }
                if pool.servers().specs.is_empty() {
                    text.push_str(" none configured (add ~/MCPs/*.json)");
                }
                Ok(Value::String(text))
            }
        }
    }
}

/// A server's one-line description for `discovered_servers(detailed=True)` and
/// `describe_server`: its config's `description` when it has one, else what it runs.
fn describe_spec(spec: &crate::config::ServerSpec) -> String {
    match &spec.description {
        Some(d) => d.clone(),
        None => format!(
            "{} server from {}",
            spec.transport.kind(),
            spec.source.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        };
        let call = calls.call(&ctx, "call_tool", Value::Null);
        assert!(
            std::mem::size_of_val(&*call) <= 2048,
            "{} bytes",
            std::mem::size_of_val(&*call)
        );
    }

    #[test]
    fn aliases() {
        assert_eq!(super::alias("my-server.v2"), "my_server_v2");
        assert_eq!(super::alias("1st"), "_1st");
    }
}
