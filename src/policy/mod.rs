//! The policy layer: [`Policy`] is the [`CallHook`] the dispatcher shows every sandbox → host
//! request. For a tool call it decides, in this order, and the first refusal wins:
//!
//! 1. the run's `allowed_tools` argument (it only narrows),
//! 2. the operator's `allowedTools` / `disabledTools` for the server (deny wins; upstream
//!    also hides such tools from every listing),
//! 3. the rate limit and the run's budgets (`limits.rs`),
//! 4. approval, when the tool needs it (`approval/`): asked through the run's asker.
//!
//! Once the call is answered it counts the result's bytes and writes the audit line
//! (`crate::audit`); when a run ends it writes the run's line. Both carry the name of the
//! run's client token when it has one (`serve --http`), and the rate limit counts per token. Installed by the wiring
//! (`app.rs`) when the bridge serves MCP servers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::audit::{AuditLog, CallRecord, RunRecord};
use crate::calls::{
    Admission, Answered, BackendCall, CallContext, CallHook, ErrorKind, HostCalls, HostRequest,
    RunScope, Tally, ToolCall, ToolFacts,
};
use crate::config::PolicySettings;
use crate::ids::sha256_hex;
use crate::report::RunReport;

mod approval;
mod decision;
mod limits;

pub use approval::Approvals;
pub use decision::{Decision, Verdict};
pub use limits::Limits;

/// The policy hook.
pub struct Policy {
    /// Answers what the policy needs to know of a tool ([`HostCalls::facts`]).
    backend: Arc<dyn HostCalls>,
    limits: Limits,
    approvals: Approvals,
    audit: Option<AuditLog>,
}

/// What `before` hands `after` about an admitted or refused tool call.
struct CallMemo {
    server: String,
    tool: String,
    decision: Decision,
    /// SHA-256 of the arguments (only when audited).
    args_sha256: String,
    /// The argument values (only with `MCP_BRIDGE_AUDIT_VALUES=1`).
    arguments: Option<Value>,
    /// Bytes of the arguments as JSON (only when audited).
    args_bytes: u64,
    /// Whether the result's bytes are counted (an audit log, or a result-byte budget): the
    /// count serializes the result again, so it is skipped when nothing reads it.
    count_bytes: bool,
}

impl Policy {
    /// The policy of `settings`, learning of tools from `backend`, writing to `audit`.
    pub fn new(
        settings: &PolicySettings,
        backend: Arc<dyn HostCalls>,
        audit: Option<AuditLog>,
    ) -> Self {
        Policy {
            backend,
            limits: Limits::new(settings.limits),
            approvals: Approvals::new(settings),
            audit,
        }
    }

    /// Decides one tool call; see the module's order.
    async fn decide(&self, ctx: &CallContext, call: &ToolCall, facts: &ToolFacts) -> Decision {
        if let Some(narrowing) = &ctx.run.narrowing {
            if !narrowing.allows(&call.server, &call.tool) {
                let rule = format!("allowed_tools [{}]", narrowing.describe());
                let message = format!(
                    "call to {}.{} refused: outside this run's allowed_tools ({}); the \
                     run_python argument allowed_tools only lets these through",
                    call.server,
                    call.tool,
                    narrowing.describe()
                );
                return Decision::refused(Verdict::Denied, rule, ErrorKind::PolicyDenied, message);
            }
        }
        let Some(policy) = &facts.policy else {
            // An unknown server: the backend's own error says so.
            return Decision::allowed();
        };
        if let Some(refusal) = policy.tools.refusal(&call.tool) {
            let rule = format!("{refusal} in {}", facts.file);
            let message = refusal.message(&call.server, &call.tool, &facts.file);
            return Decision::refused(Verdict::Denied, rule, ErrorKind::ToolDisabled, message);
        }
        if let Err(limited) = self
            .limits
            .admit(ctx, &call.server, &policy.limits, &facts.file)
        {
            return limited;
        }
        self.approvals.gate(ctx, call, facts).await
    }

    fn memo(&self, call: &ToolCall, decision: Decision, facts: &ToolFacts) -> CallMemo {
        let (args_sha256, arguments, args_bytes) = match &self.audit {
            Some(audit) => {
                let text = serde_json::to_string(&call.arguments).unwrap_or_default();
                let values = audit
                    .values()
                    .then(|| Value::Object(redacted(&call.arguments)));
                (sha256_hex(text.as_bytes()), values, text.len() as u64)
            }
            None => (String::new(), None, 0),
        };
        CallMemo {
            server: call.server.clone(),
            tool: call.tool.clone(),
            decision,
            args_sha256,
            arguments,
            args_bytes,
            count_bytes: self.audit.is_some()
                || self
                    .limits
                    .counts_bytes(facts.policy.as_deref().map(|p| &p.limits)),
        }
    }
}

#[async_trait::async_trait]
impl CallHook for Policy {
    async fn before(&self, ctx: &CallContext, request: &HostRequest) -> Admission {
        let HostRequest::Backend(BackendCall::CallTool(call)) = request else {
            return Admission::go();
        };
        let facts = self.backend.facts(&call.server, &call.tool);
        let mut decision = self.decide(ctx, call, &facts).await;
        let tally = &ctx.run.tally;
        let admission = match decision.error.take() {
            Some(error) => {
                Tally::add(&tally.refused, 1);
                Admission::refuse(error)
            }
            None => {
                Tally::add(&tally.calls, 1);
                Admission::go()
            }
        };
        admission.with_memo(self.memo(call, decision, &facts))
    }

    fn after(&self, ctx: &CallContext, admission: Admission, answered: &Answered<'_>) {
        let Some(memo) = admission.memo.and_then(|m| m.downcast::<CallMemo>().ok()) else {
            return;
        };
        let admitted = memo.decision.verdict.admits();
        let bytes = if admitted && memo.count_bytes {
            answered.bytes() as u64
        } else {
            0
        };
        let tally = &ctx.run.tally;
        Tally::add(&tally.result_bytes, bytes);
        Tally::add(&tally.argument_bytes, memo.args_bytes);
        self.limits.received(ctx, &memo.server, bytes);
        let Some(audit) = &self.audit else {
            return;
        };
        let (outcome, error_kind) = match (admitted, answered.outcome) {
            (false, Err(e)) => ("refused", Some(e.kind.as_str().to_string())),
            (_, Err(e)) => ("error", Some(e.kind.as_str().to_string())),
            (_, Ok(_)) => ("ok", None),
        };
        let memo = *memo;
        audit.call(CallRecord {
            time: now(),
            run: ctx.run.id.clone(),
            token: ctx.run.caller.as_ref().map(|c| c.token.clone()),
            server: memo.server,
            tool: memo.tool,
            args_sha256: memo.args_sha256,
            arguments: memo.arguments,
            arguments_cut: false,
            duration_ms: millis(answered.elapsed),
            outcome: outcome.to_string(),
            error_kind,
            bytes_in: memo.args_bytes,
            bytes_out: bytes,
            decision: memo.decision.verdict.as_str().to_string(),
            rule: memo.decision.rule,
        });
    }

    fn run_ended(&self, scope: &RunScope, report: &RunReport) {
        let Some(audit) = &self.audit else {
            return;
        };
        let t = &scope.tally;
        audit.run(RunRecord {
            time: now(),
            run: scope.id.clone(),
            token: scope.caller.as_ref().map(|c| c.token.clone()),
            code_sha256: scope.code_sha256.clone(),
            status: serde_json::to_value(report.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            duration_ms: millis(scope.arrived.elapsed()),
            calls: Tally::get(&t.calls),
            refused: Tally::get(&t.refused),
            bytes_in: Tally::get(&t.argument_bytes),
            bytes_out: Tally::get(&t.result_bytes),
            dropped: 0,
        });
    }
}

/// Keys whose values are never written to the audit log, even with values on.
const SECRET_WORDS: [&str; 8] = [
    "token",
    "secret",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "authorization",
    "credential",
];

/// `arguments` with the values of secret-looking keys (at any depth) replaced.
fn redacted(arguments: &Map<String, Value>) -> Map<String, Value> {
    fn walk(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(redacted(m)),
            Value::Array(items) => Value::Array(items.iter().map(walk).collect()),
            other => other.clone(),
        }
    }
    arguments
        .iter()
        .map(|(k, v)| {
            let lower = k.to_ascii_lowercase();
            if SECRET_WORDS.iter().any(|w| lower.contains(w)) {
                (k.clone(), Value::String("[redacted]".into()))
            } else {
                (k.clone(), walk(v))
            }
        })
        .collect()
}

/// Now, RFC 3339 in UTC with milliseconds.
fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::{Caller, HostMethod, NoHostCalls};

    #[tokio::test]
    async fn call_and_run_lines_carry_the_token_of_a_run_with_a_caller_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("logs").join("audit.log");
        let settings = PolicySettings {
            audit_log: Some(path.clone()),
            ..PolicySettings::from_lookup(&|_| None).expect("defaults")
        };
        let audit = AuditLog::open(&settings).expect("open").expect("a log");
        let policy = Policy::new(&settings, Arc::new(NoHostCalls), Some(audit.clone()));
        let caller = Caller {
            token: "ci-bot".into(),
            sandbox: "sb1".into(),
        };
        let with = RunScope::new("1", None, None).with_caller(Some(Arc::new(caller)));
        for scope in [Arc::new(with), RunScope::plain("2")] {
            let ctx = CallContext {
                servers: Arc::from(vec!["s".to_string()]),
                deadline: tokio::time::Instant::now() + Duration::from_secs(60),
                run: scope.clone(),
            };
            let request = HostRequest::Backend(BackendCall::CallTool(ToolCall {
                server: "s".into(),
                tool: "t".into(),
                arguments: Map::new(),
            }));
            let admission = policy.before(&ctx, &request).await;
            let outcome = Ok(Value::Null);
            let answered = Answered {
                method: HostMethod::CallTool,
                outcome: &outcome,
                elapsed: Duration::from_millis(1),
            };
            policy.after(&ctx, admission, &answered);
            policy.run_ended(
                &scope,
                &RunReport::failed(crate::report::RunStatus::Error, "x"),
            );
        }
        audit.close(Duration::from_secs(5)).await;
        let text = std::fs::read_to_string(&path).expect("the log");
        let tokens: Vec<Option<String>> = text
            .lines()
            .map(|l| serde_json::from_str::<crate::audit::Record>(l).expect("a line"))
            .map(|r| match r {
                crate::audit::Record::Call(c) => c.token,
                crate::audit::Record::Run(r) => r.token,
            })
            .collect();
        let ci = Some("ci-bot".to_string());
        assert_eq!(tokens, [ci.clone(), ci, None, None], "{text}");
    }

    #[test]
    fn secret_looking_keys_are_redacted_at_any_depth() {
        let args = serde_json::json!({
            "query": "x",
            "GitHub_Token": "ghp_1",
            "nested": {"password": "p", "list": [{"apiKey": "k", "ok": 1}]}
        });
        let Value::Object(args) = args else { panic!() };
        let out = Value::Object(redacted(&args));
        assert_eq!(
            out,
            serde_json::json!({
                "query": "x",
                "GitHub_Token": "[redacted]",
                "nested": {"password": "[redacted]", "list": [{"apiKey": "[redacted]", "ok": 1}]}
            })
        );
    }
}
