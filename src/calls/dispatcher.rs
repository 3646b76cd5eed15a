//! Requests from sandbox code to the host: the single place every `call` frame passes.
//!
//! [`Dispatcher::handle`] parses the frame's method and params once into a [`HostRequest`]
//! (`request.rs`; names that must not reach a terminal are refused first, `names.rs`), shows
//! it to the [`CallHook`] if one is installed (`hook.rs`: the seam for allow lists, approvals,
//! audit and budgets), answers the built-ins (`ping`, `reset`) and sends the rest to the
//! [`HostCalls`] backend as a typed [`BackendCall`]; the hook then hears the typed outcome.

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::error::{CallError, LoadError};
use super::hook::{Answered, CallHook};
use super::host_calls::{CallContext, HostCalls};
use super::host_method::HostMethod;
use super::loaded::LoadedTools;
use super::names;
use super::request::{BackendCall, HostRequest};
use super::run_scope::RunScope;
use super::trace::{self, RunSize, Tokens, TracedCall};
use crate::report::RunReport;

/// What `reset` drops: the namespace snapshot kept for an idle stop. The snapshot feature's
/// owner (`snapshot::Snapshots`) implements it; the dispatcher knows no more of snapshots.
pub trait SavedNamespace: Send + Sync + 'static {
    /// Drops the saved namespace; true when there was one.
    fn forget(&self) -> bool;
}

/// Routes sandbox requests; cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    backend: Arc<dyn HostCalls>,
    /// The saved namespace `reset` drops.
    saved: Option<Arc<dyn SavedNamespace>>,
    /// Sees every parsed request before it is routed, and its outcome.
    hook: Option<Arc<dyn CallHook>>,
    /// The sandboxes' way out (`MCP_BRIDGE_NETWORK_ALLOW`), when the list is set.
    egress: Option<Arc<crate::egress::EgressPolicy>>,
}

impl Dispatcher {
    /// A dispatcher sending non-built-in methods to `backend`.
    pub fn new(backend: Arc<dyn HostCalls>) -> Self {
        Dispatcher {
            backend,
            saved: None,
            hook: None,
            egress: None,
        }
    }

    /// The same, with `saved` as what `reset` drops.
    pub fn with_saved(self, saved: Arc<dyn SavedNamespace>) -> Self {
        Dispatcher {
            saved: Some(saved),
            ..self
        }
    }

    /// The same, with `hook` called before and after every request (replacing any other).
    pub fn with_hook(self, hook: Arc<dyn CallHook>) -> Self {
        Dispatcher {
            hook: Some(hook),
            ..self
        }
    }

    /// The same, with `egress` serving the sandboxes' connections out.
    pub fn with_egress(self, egress: Option<Arc<crate::egress::EgressPolicy>>) -> Self {
        Dispatcher { egress, ..self }
    }

    /// The egress policy the sandboxes' proxies apply, when the allow list is set.
    pub fn egress(&self) -> Option<&Arc<crate::egress::EgressPolicy>> {
        self.egress.as_ref()
    }

    /// Loads the servers the run of `scope` names, for its client; see [`HostCalls::load`].
    ///
    /// # Errors
    /// The [`LoadError`] naming the server that could not be loaded.
    pub async fn load(
        &self,
        servers: &[String],
        scope: &RunScope,
        deadline: Instant,
    ) -> Result<LoadedTools, LoadError> {
        self.backend.load(servers, scope, deadline).await
    }

    /// The run's trace (`trace.rs`) as the result's `_meta` carries it, with its token
    /// estimate: `code_bytes` of code ran and gave back `report`.
    pub fn trace(
        &self,
        scope: &RunScope,
        code_bytes: usize,
        report: &RunReport,
    ) -> (Value, Tokens) {
        let listings = scope
            .trace
            .servers()
            .iter()
            .map(|s| self.backend.listing_bytes(s))
            .sum();
        let output =
            report.stdout.len() + report.stderr.len() + report.error.as_deref().map_or(0, str::len);
        let size = RunSize {
            code: code_bytes as u64,
            output: output as u64,
            listings,
            elapsed: scope.arrived.elapsed(),
        };
        (scope.trace.to_json(size), scope.trace.tokens(size))
    }

    /// Tells the hook (if any) that the run of `scope` ended with `report`.
    pub fn run_ended(&self, scope: &RunScope, report: &RunReport) {
        if let Some(hook) = &self.hook {
            hook.run_ended(scope, report);
        }
    }

    /// Handles one request from sandbox code: `method` and `params` of its `call` frame.
    ///
    /// # Errors
    /// A [`CallError`] raised in the sandbox as an exception of its kind: `bad_request` when
    /// the request does not parse (the hook never sees it), else the hook's refusal or the
    /// handler's error.
    pub async fn handle(
        &self,
        ctx: &CallContext,
        method: &str,
        params: Value,
    ) -> Result<Value, CallError> {
        let request = parse(method, params)?;
        let kind = request.method();
        // A tool call is traced (`trace.rs`): its names and its arguments' size, before the
        // arguments move to the backend.
        let traced = match &request {
            HostRequest::Backend(BackendCall::CallTool(c)) => Some((
                c.server.clone(),
                c.tool.clone(),
                trace::json_bytes(&c.arguments),
            )),
            _ => None,
        };
        let began = Instant::now();
        let (outcome, measured) = match &self.hook {
            None => {
                let outcome = self.answer(ctx, request).await;
                let measured = traced.as_ref().map(|_| result_bytes(&outcome));
                (outcome, measured)
            }
            Some(hook) => {
                let mut admission = hook.before(ctx, &request).await;
                let outcome = match admission.refusal.take() {
                    Some(err) => Err(err),
                    None => self.answer(ctx, request).await,
                };
                let measured = traced.as_ref().map(|_| result_bytes(&outcome));
                let answered = Answered {
                    method: kind,
                    outcome: &outcome,
                    elapsed: began.elapsed(),
                    measured,
                };
                hook.after(ctx, admission, &answered);
                (outcome, measured)
            }
        };
        if let Some((server, tool, bytes_in)) = traced {
            ctx.run.trace.record(TracedCall {
                server,
                tool,
                start: trace::offset(ctx.run.arrived, began),
                duration: began.elapsed(),
                bytes_in,
                bytes_out: measured.unwrap_or(0),
                outcome: match &outcome {
                    Ok(_) => "ok",
                    Err(e) => e.kind.as_str(),
                },
            });
        }
        outcome
    }

    /// Answers a request: the built-ins here, the rest by the backend.
    async fn answer(&self, ctx: &CallContext, request: HostRequest) -> Result<Value, CallError> {
        match request {
            HostRequest::Ping(params) => Ok(params),
            HostRequest::Reset => {
                // The sandbox empties its namespace once this answer arrives.
                let dropped = self.saved.as_ref().is_some_and(|s| s.forget());
                Ok(serde_json::json!({ "snapshot_dropped": dropped }))
            }
            HostRequest::Backend(call) => self.backend.call(ctx, call).await,
        }
    }
}

/// Bytes of an answer's value as JSON; 0 for an error.
fn result_bytes(outcome: &Result<Value, CallError>) -> u64 {
    outcome.as_ref().map_or(0, trace::json_bytes)
}

/// The request a `call` frame makes. `ping` echoes anything; every other request is checked
/// for names that must not reach a terminal before it is parsed.
fn parse(method: &str, params: Value) -> Result<HostRequest, CallError> {
    if method == HostMethod::Ping.name() {
        return Ok(HostRequest::Ping(params));
    }
    names::unsafe_names(method, &params)?;
    HostRequest::parse(method, params)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use super::*;
    use crate::calls::hook::Admission;
    use crate::calls::host_calls::NoHostCalls;
    use crate::calls::request::BackendCall;
    use crate::shown::is_unsafe;

    fn ctx() -> CallContext {
        CallContext {
            servers: Arc::from(Vec::new()),
            deadline: Instant::now(),
            run: RunScope::plain("test"),
        }
    }

    /// A saved namespace that is there until forgotten.
    struct Saved(AtomicBool);

    impl SavedNamespace for Saved {
        fn forget(&self) -> bool {
            self.0.swap(false, Ordering::Relaxed)
        }
    }

    #[tokio::test]
    async fn builtins_and_unknown_methods() {
        let d = Dispatcher::new(Arc::new(NoHostCalls));
        let ctx = ctx();
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
            // Tags, a Hangul filler, the grapheme joiner, variation selectors: invisible.
            (
                "call_tool",
                serde_json::json!({"server": "gh", "tool": "get\u{E0041}\u{E007F}"}),
            ),
            ("list_tools", serde_json::json!({"server": "\u{3164}"})),
            (
                "list_tools",
                serde_json::json!({"server": "g\u{115F}h\u{034F}"}),
            ),
            (
                "call_tool",
                serde_json::json!({"server": "gh", "tool": "t\u{FE0F}\u{E0100}"}),
            ),
        ] {
            let err = d.handle(&ctx, method, params).await.expect_err("refused");
            assert_eq!(err.kind.as_str(), "bad_request");
            assert!(
                !err.message.chars().any(is_unsafe) && err.message.contains("invisible"),
                "{}",
                err.message
            );
        }
        let r = d.handle(&ctx, "reset", Value::Null).await;
        assert_eq!(r, Ok(serde_json::json!({"snapshot_dropped": false})));
        let saved = Arc::new(Saved(AtomicBool::new(true)));
        let d = d.with_saved(saved.clone());
        let r = d.handle(&ctx, "reset", Value::Null).await;
        assert_eq!(r, Ok(serde_json::json!({"snapshot_dropped": true})));
        assert!(!saved.0.load(Ordering::Relaxed));
        let err = d.load(&["gh".to_string()], &ctx.run, Instant::now()).await;
        assert!(matches!(err, Err(LoadError::NoServers { server }) if server == "gh"));
        assert!(d
            .load(&[], &ctx.run, Instant::now())
            .await
            .expect("no servers")
            .is_empty());
    }

    /// Records what it sees; refuses `list_servers`.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl CallHook for Recorder {
        async fn before(&self, _ctx: &CallContext, request: &HostRequest) -> Admission {
            let mut seen = self.0.lock().expect("lock");
            seen.push(format!("before {}", request.method().name()));
            match request {
                HostRequest::Backend(BackendCall::ListServers) => {
                    Admission::refuse(CallError::bad_request("not allowed"))
                }
                _ => Admission::go(),
            }
        }

        fn after(&self, _ctx: &CallContext, _admission: Admission, answered: &Answered<'_>) {
            let ok = answered.outcome.is_ok();
            let line = format!("after {} {ok} {}", answered.method.name(), answered.bytes());
            self.0.lock().expect("lock").push(line);
        }
    }

    #[tokio::test]
    async fn the_hook_sees_every_parsed_request_and_its_outcome_and_may_refuse() {
        let hook = Arc::new(Recorder::default());
        let d = Dispatcher::new(Arc::new(NoHostCalls)).with_hook(hook.clone());
        let ctx = ctx();
        let ping = d.handle(&ctx, "ping", serde_json::json!([1, 2])).await;
        assert_eq!(ping, Ok(serde_json::json!([1, 2])));
        let refused = d.handle(&ctx, "list_servers", Value::Null).await;
        assert_eq!(refused, Err(CallError::bad_request("not allowed")));
        let unparsed = d.handle(&ctx, "list_tools", Value::Null).await;
        assert!(unparsed.is_err());
        let reset = d.handle(&ctx, "reset", Value::Null).await;
        assert!(reset.is_ok());
        let seen = hook.0.lock().expect("lock").clone();
        assert_eq!(
            seen,
            [
                "before ping",
                "after ping true 5",
                "before list_servers",
                "after list_servers false 0",
                "before reset",
                "after reset true 26",
            ]
        );
    }
}
