//! `call_tool`: the hot path of proxied calls. A run may only call tools of the servers it
//! loaded; arguments are checked against the running server's input schema before the call.
//! A run of a client (`serve --http`) calls its own process of a `"perClient"` server.

use serde_json::Value;

use super::{caller, visible, UpstreamHostCalls};
use crate::calls::{CallContext, CallError, ToolCall};
use crate::upstream::pytypes::alias;
use crate::upstream::validate::Rejection;
use crate::upstream::{result, UpstreamError};

impl UpstreamHostCalls {
    /// Calls `call.tool` of `call.server` with its arguments, by the run's deadline.
    pub(super) async fn call_tool(
        &self,
        ctx: &CallContext,
        call: ToolCall,
    ) -> Result<Value, CallError> {
        let ToolCall {
            server,
            tool,
            mut arguments,
        } = call;
        let (server, tool) = (server.as_str(), tool.as_str());
        let shared = self.pool.get(server)?;
        if !ctx.servers.iter().any(|s| s == server) {
            return Err(UpstreamError::NotLoaded {
                name: server.into(),
                loaded: ctx.servers.to_vec(),
            }
            .into());
        }
        // The caller's own process of a `"perClient"` server; else the shared one.
        let up = self.pool.for_caller(shared, caller(ctx))?;
        // Checked against the tool list of the running server; when it is not running (it
        // crashed since the run loaded it) the call restarts it and goes unchecked.
        if let Some(live) = up.live_now() {
            // Changed or new since pinned (`pins/`): refused before its pinned schema is
            // checked (the pins file is read for an approval given since: a refused call only).
            if live.held.holds(tool) && live.held.still_held_now(tool) {
                return Err(UpstreamError::ToolChanged {
                    server: server.into(),
                    tool: tool.into(),
                }
                .into());
            }
        }
        // Approved since it was held: sent unchecked (the list holds its pinned text).
        if let Some(live) = up.live_now().filter(|l| !l.held.approved_since(tool)) {
            let args = Value::Object(arguments);
            let checked = self.validators.check(server, &live.tools, tool, &args);
            let Value::Object(args) = args else {
                unreachable!("arguments are an object")
            };
            arguments = args;
            match checked {
                Ok(()) => {}
                // Refused tools are not in the live list (filtered at its source): say which
                // rule refuses one, else that it does not exist.
                Err(Rejection::UnknownTool) => {
                    let available = live
                        .tools
                        .iter()
                        .filter(|t| visible(ctx, server, &t.name))
                        .map(|t| t.name.to_string())
                        .collect();
                    return Err(UpstreamError::missing_tool(&up.spec, tool, available).into());
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
        // A remote server that is not connected may need sign-in: asked for here, inside the
        // run (`sign_in.rs`), then the call goes on.
        // Boxed: the handshake's and the sign-in's futures stay off the warm path's.
        if up.live_now().is_none() && crate::upstream::oauth::remote_url(&up.spec).is_ok() {
            Box::pin(async {
                match up.connect(ctx.run.waits.extended(ctx.deadline)).await {
                    Err(UpstreamError::AuthRequired { .. }) => up.sign_in_for(&ctx.run).await,
                    Err(e) => Err(e),
                    Ok(_) => Ok(()),
                }
            })
            .await?;
        }
        // The server's questions during the call go to this run's client.
        let _asking = up.in_flight(ctx.run.clone());
        // A remote server's refusal of the token mid-call signs in and retries once
        // (`sign_in.rs`); boxed, its future stays off the warm path of the other calls.
        let r = if ctx.run.can_sign_in() && crate::upstream::oauth::remote_url(&up.spec).is_ok() {
            Box::pin(up.call_signing_in(&ctx.run, tool, arguments, ctx.deadline)).await?
        } else {
            up.call_in(tool, arguments, ctx.deadline, Some(&ctx.run))
                .await?
        };
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
        // A tool approved since it was held: the definition it listed, not the pinned one.
        let def = live.as_ref().and_then(|l| {
            l.held
                .approved_definition(tool)
                .or_else(|| l.tools.iter().find(|t| t.name == tool))
        });
        Ok(result::unwrap_fastmcp(value, def))
    }
}
