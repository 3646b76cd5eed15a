//! What servers there are: `list_servers`, `discovered_servers`, `describe_server`,
//! `list_loaded_server_metadata` and `capability_summary`.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{caller, visible, UpstreamHostCalls};
use crate::calls::{CallContext, CallError};
use crate::config::ServerSpec;
use crate::upstream::docs;
use crate::upstream::pytypes::alias;

impl UpstreamHostCalls {
    /// `list_servers`: the configured servers' names.
    pub(super) fn list_servers(&self) -> Value {
        json!(self.pool.servers().names())
    }

    /// `discovered_servers`: every configured server, where it came from and its state, and
    /// the config files that could not be read.
    pub(super) fn discovered_servers(&self, ctx: &CallContext) -> Result<Value, CallError> {
        let pool = &self.pool;
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
                "state": pool.peek(&s.name, caller(ctx))?.state_name(),
            }));
        }
        Ok(json!({"servers": servers, "errors": pool.servers().issues}))
    }

    /// `describe_server`: one server, what it says of itself and its tools.
    pub(super) async fn describe_server(
        &self,
        ctx: &CallContext,
        name: &str,
    ) -> Result<Value, CallError> {
        let up = self.pool.peek(name, caller(ctx))?;
        let live = up.live_now();
        let tools = self
            .pool
            .tools_for(name, caller(ctx), ctx.deadline)
            .await
            .ok();
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
            "tools": tools.map(|ts| ts.iter().filter(|t| visible(ctx, name, &t.name)).map(docs::listing).collect::<Vec<_>>()),
        }))
    }

    /// `list_loaded_server_metadata`: the servers the run loaded and their tools.
    pub(super) fn list_loaded_server_metadata(
        &self,
        ctx: &CallContext,
    ) -> Result<Value, CallError> {
        let mut out = Vec::new();
        for name in ctx.servers.iter() {
            let live = self.pool.peek(name, caller(ctx))?.live_now();
            let info = live.as_ref().and_then(|l| l.info.clone());
            let tools: Option<Vec<Value>> = live.map(|l| {
                l.tools
                    .iter()
                    .filter(|t| visible(ctx, name, &t.name))
                    .map(docs::listing)
                    .collect()
            });
            out.push(json!({
                "name": name,
                "alias": alias(name),
                "server_info": info.as_ref().and_then(|i| i.server_info.as_ref()).map(|s| json!({"name": s.name, "version": s.version})),
                "tool_count": tools.as_ref().map(Vec::len),
                "tools": tools.unwrap_or_default(),
            }));
        }
        Ok(Value::Array(out))
    }

    /// `capability_summary`: what the sandbox offers and each server's tool count, in words.
    pub(super) fn capability_summary(&self, ctx: &CallContext) -> Value {
        let pool = &self.pool;
        let known: HashMap<String, usize> = pool
            .known_tools()
            .into_iter()
            .map(|(n, t)| {
                let count = t.iter().filter(|t| visible(ctx, &n, &t.name)).count();
                (n, count)
            })
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
        Value::String(text)
    }
}

/// A server's one-line description for `discovered_servers(detailed=True)` and
/// `describe_server`: its config's `description` when it has one, else what it runs.
fn describe_spec(spec: &ServerSpec) -> String {
    match &spec.description {
        Some(d) => d.clone(),
        None => format!(
            "{} server from {}",
            spec.transport.kind(),
            spec.source.display()
        ),
    }
}
