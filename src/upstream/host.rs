//! [`UpstreamHostCalls`]: the host methods sandbox code calls (`call_tool` and the discovery
//! helpers), with the policy that a run may only call tools of the servers it loaded.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::docs::{self, Detail};
use super::search::{self, Entry};
use super::{result, UpstreamError, UpstreamPool};
use crate::bridge::{CallContext, CallError, HostCalls, LoadedTools};

/// Results returned by `search_tool_docs` at most.
const MAX_SEARCH_LIMIT: usize = 100;

/// Host methods backed by the upstream pool.
pub struct UpstreamHostCalls {
    pool: Arc<UpstreamPool>,
    search: tokio::sync::Mutex<Option<Arc<SearchIndex>>>,
}

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
        }
    }

    /// The index over the tools known now, rebuilt only when a tool list changed.
    async fn search_index(&self) -> Arc<SearchIndex> {
        let known = self.pool.known_tools().await;
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

fn alias(name: &str) -> String {
    let mut a: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if a.starts_with(|c: char| c.is_ascii_digit()) {
        a.insert(0, '_');
    }
    a
}

#[async_trait::async_trait]
impl HostCalls for UpstreamHostCalls {
    async fn load(&self, servers: &[String], deadline: Instant) -> Result<LoadedTools, String> {
        self.pool
            .load(servers, deadline)
            .await
            .map_err(|e| e.to_string())
    }

    async fn call(&self, ctx: &CallContext, method: &str, p: Value) -> Result<Value, CallError> {
        if method == "call_tool" {
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
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(CallError::bad_request("'arguments' must be a dict")),
        };
        let server = str_param(&p, "server")?;
        let tool = str_param(&p, "tool")?;
        let up = pool.get(server)?;
        if !ctx.servers.iter().any(|s| s == server) {
            return Err(UpstreamError::NotLoaded {
                name: server.into(),
                loaded: ctx.servers.to_vec(),
            }
            .into());
        }
        let r = up.call(tool, args, ctx.deadline).await?;
        if r.is_error == Some(true) {
            return Err(UpstreamError::Tool {
                server: server.into(),
                tool: tool.into(),
                message: result::error_text(&r),
            }
            .into());
        }
        Ok(result::to_value(r))
    }

    /// Every host method but `call_tool`.
    async fn discovery(
        &self,
        ctx: &CallContext,
        method: &str,
        p: Value,
    ) -> Result<Value, CallError> {
        let pool = &self.pool;
        match method {
            "list_servers" => Ok(json!(pool.servers().names())),
            "discovered_servers" => {
                let mut servers = Vec::new();
                for s in &pool.servers().specs {
                    servers.push(json!({
                        "name": s.name,
                        "transport": s.transport.kind(),
                        "source": s.source.display().to_string(),
                        "disabled": s.disabled,
                        "state": pool.get(&s.name)?.state_name().await,
                    }));
                }
                Ok(json!({"servers": servers, "errors": pool.servers().issues}))
            }
            "list_tools" => {
                let server = str_param(&p, "server")?;
                let tools = pool.tools(server, ctx.deadline).await?;
                Ok(Value::Array(
                    tools
                        .iter()
                        .map(|t| json!({"name": t.name, "description": docs::one_line(t)}))
                        .collect(),
                ))
            }
            "query_tool_docs" => {
                let server = str_param(&p, "server")?;
                let detail =
                    Detail::parse(opt_str(&p, "detail")?).map_err(CallError::bad_request)?;
                let tools = pool.tools(server, ctx.deadline).await?;
                match opt_str(&p, "tool")? {
                    None => Ok(Value::Array(
                        tools.iter().map(|t| docs::doc(server, t, detail)).collect(),
                    )),
                    Some(name) => match tools.iter().find(|t| t.name == name) {
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
            "search_tool_docs" => {
                let query = str_param(&p, "query")?;
                let limit = p
                    .get("limit")
                    .and_then(Value::as_u64)
                    .unwrap_or(5)
                    .min(MAX_SEARCH_LIMIT as u64) as usize;
                let detail =
                    Detail::parse(opt_str(&p, "detail")?).map_err(CallError::bad_request)?;
                let index = self.search_index().await;
                let ranked = index.index.rank(query, limit);
                Ok(Value::Array(
                    ranked
                        .into_iter()
                        .map(|(i, score)| {
                            let (server, tools, t) = &index.refs[i];
                            let mut d = docs::doc(server, &tools[*t], detail);
                            d["score"] = json!((score * 1000.0).round() / 1000.0);
                            d
                        })
                        .collect(),
                ))
            }
            "describe_server" => {
                let name = str_param(&p, "name")?;
                let up = pool.get(name)?;
                let live = up.live_now().await;
                let tools = pool.tools(name, ctx.deadline).await.ok();
                let info = live.as_ref().and_then(|l| l.info.clone());
                Ok(json!({
                    "name": name,
                    "transport": up.spec.transport.kind(),
                    "source": up.spec.source.display().to_string(),
                    "state": up.state_name().await,
                    "disabled": up.spec.disabled,
                    "server_info": info.as_ref().and_then(|i| i.server_info.as_ref()).map(|s| json!({"name": s.name, "version": s.version})),
                    "instructions": info.as_ref().and_then(|i| i.instructions.clone()),
                    "tools": tools.map(|ts| ts.iter().map(|t| json!({"name": t.name, "description": docs::one_line(t)})).collect::<Vec<_>>()),
                }))
            }
            "list_loaded_server_metadata" => {
                let mut out = Vec::new();
                for name in ctx.servers.iter() {
                    let live = pool.get(name)?.live_now().await;
                    let info = live.as_ref().and_then(|l| l.info.clone());
                    out.push(json!({
                        "name": name,
                        "alias": alias(name),
                        "server_info": info.as_ref().and_then(|i| i.server_info.as_ref()).map(|s| json!({"name": s.name, "version": s.version})),
                        "tool_count": live.map(|l| l.tools.len()),
                    }));
                }
                Ok(Value::Array(out))
            }
            "capability_summary" => {
                let known: std::collections::HashMap<String, usize> = pool
                    .known_tools()
                    .await
                    .into_iter()
                    .map(|(n, t)| (n, t.len()))
                    .collect();
                let mut text = String::from(
                    "Sandbox: persistent Python, no network; top-level await. Load servers with run_python(servers=[...]) and call \
                     `await mcp_<alias>.<tool>(...)`. Discovery: from mcp import runtime; list_servers, list_tools, query_tool_docs, \
                     search_tool_docs, describe_server, call_tool (each with a _sync twin).\nServers:",
                );
                for s in &pool.servers().specs {
                    let count = known
                        .get(&s.name)
                        .map(|n| format!("{n} tools"))
                        .unwrap_or_else(|| "tools not indexed yet".into());
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
            _ => Err(CallError::bad_request(format!(
                "unknown host method '{method}'"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_tool_future_is_small() {
        // The discovery methods may start servers; their state must not ride along (and be
        // copied) on every proxied call.
        let servers = Arc::new(crate::config::Servers {
            specs: vec![],
            issues: vec![],
        });
        let dir = tempfile::tempdir().expect("tempdir");
        let calls = UpstreamHostCalls::new(Arc::new(UpstreamPool::new(servers, dir.path())));
        let ctx = CallContext {
            exec_id: 1,
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
