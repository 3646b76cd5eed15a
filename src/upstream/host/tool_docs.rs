//! `list_tools`, `query_tool_docs` and `stubs`: one server's tools, listed, documented or
//! typed.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::{json, Value};

use super::{caller, visible, UpstreamHostCalls};
use crate::calls::{CallContext, CallError, Detail};
use crate::upstream::docs;
use crate::upstream::error::UpstreamError;
use crate::upstream::pytypes::alias;

impl UpstreamHostCalls {
    /// `list_tools`: name, alias and one line of each tool of `server`.
    pub(super) async fn list_tools(
        &self,
        ctx: &CallContext,
        server: &str,
    ) -> Result<Value, CallError> {
        let tools = self.tools_signed_in(ctx, server).await?;
        Ok(Value::Array(
            tools
                .iter()
                .filter(|t| visible(ctx, server, &t.name))
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

    /// `server`'s tools; a remote server that needs sign-in is signed in to inside the run
    /// first, as a call to it would be (`sign_in.rs`), when the run can sign in.
    async fn tools_signed_in(
        &self,
        ctx: &CallContext,
        server: &str,
    ) -> Result<Arc<Vec<Tool>>, UpstreamError> {
        match self.pool.tools_for(server, caller(ctx), ctx.deadline).await {
            Err(UpstreamError::AuthRequired { .. }) if ctx.run.can_sign_in() => {
                let up = self.pool.upstream(server, caller(ctx))?;
                Box::pin(up.sign_in_for(&ctx.run)).await?;
                let deadline = ctx.run.waits.extended(ctx.deadline);
                self.pool.tools_for(server, caller(ctx), deadline).await
            }
            listed => listed,
        }
    }

    /// `stubs`: the typed stubs of `server`'s tools (those the run may see), as text.
    pub(super) async fn stubs(&self, ctx: &CallContext, server: &str) -> Result<Value, CallError> {
        let all = self.tools_signed_in(ctx, server).await?;
        let seen: Vec<Tool> = all
            .iter()
            .filter(|t| visible(ctx, server, &t.name))
            .cloned()
            .collect();
        Ok(Value::String(crate::upstream::stubs::stubs(server, &seen)))
    }

    /// `query_tool_docs`: the docs of `tool` of `server`, or of all its tools.
    pub(super) async fn query_tool_docs(
        &self,
        ctx: &CallContext,
        server: &str,
        tool: Option<&str>,
        detail: Detail,
    ) -> Result<Value, CallError> {
        let all = self.tools_signed_in(ctx, server).await?;
        let narrowed: Vec<rmcp::model::Tool>;
        let tools: &[rmcp::model::Tool] = match &ctx.run.narrowing {
            None => &all,
            Some(_) => {
                narrowed = all
                    .iter()
                    .filter(|t| visible(ctx, server, &t.name))
                    .cloned()
                    .collect();
                &narrowed
            }
        };
        match tool {
            None => Ok(Value::Array(
                tools.iter().map(|t| docs::doc(server, t, detail)).collect(),
            )),
            Some(name) => match docs::find(tools, name) {
                Some(t) => Ok(json!([docs::doc(server, t, detail)])),
                None => {
                    let available = tools.iter().map(|t| t.name.to_string()).collect();
                    let spec = &self.pool.get(server)?.spec;
                    Err(UpstreamError::missing_tool(spec, name, available).into())
                }
            },
        }
    }
}
