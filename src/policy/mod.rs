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
//! (`crate::audit`; a refused call's repeats folded into one line, `fold.rs`); when a run ends
//! it writes the run's line. A run whose calls are refused more than
//! `MCP_BRIDGE_RUN_MAX_REFUSALS` times is stopped. Both carry the name of the
//! run's client token when it has one (`serve --http`), and the rate limit counts per token. Installed by the wiring
//! (`app.rs`) when the bridge serves MCP servers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::audit::{AuditLog, CallRecord, RunRecord};
use crate::calls::{
    Admission, Answered, BackendCall, CallContext, CallError, CallHook, ErrorKind, HostCalls,
    HostRequest, Language, RunScope, Tally, ToolCall, ToolFacts,
};
use crate::config::PolicySettings;
use crate::ids::sha256_hex;
use crate::report::RunReport;

mod approval;
mod bucket;
mod decision;
mod fold;
mod limits;
mod reserve;
mod secret;

pub use approval::Approvals;
pub use decision::{Decision, Verdict};
pub use limits::Limits;
pub use reserve::Reservation;

/// The policy hook.
pub struct Policy {
    /// Answers what the policy needs to know of a tool ([`HostCalls::facts`]).
    backend: Arc<dyn HostCalls>,
    limits: Limits,
    approvals: Approvals,
    audit: Option<AuditLog>,
    /// `MCP_BRIDGE_RUN_MAX_REFUSALS`: refused calls a run may make before it is stopped.
    max_refusals: u64,
    /// The runs' refused calls, folded into one audit line per refusal (`fold.rs`).
    folds: fold::Folds,
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
    /// What the call holds of the run's result-byte budgets, given back in `after`.
    reservation: Option<Reservation>,
    /// Whose credentials a remote server's call uses ([`ToolFacts::creds`]).
    creds: Option<String>,
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
            max_refusals: settings.run_max_refusals,
            folds: fold::Folds::default(),
        }
    }

    /// The refusal of every call of a run the policy stopped.
    fn stopped(&self) -> Decision {
        Decision::refused(
            Verdict::Limited,
            format!("MCP_BRIDGE_RUN_MAX_REFUSALS={}", self.max_refusals),
            ErrorKind::LimitExceeded,
            format!(
                "this run is being stopped: more than {} of its tool calls were refused \
                 (MCP_BRIDGE_RUN_MAX_REFUSALS)",
                self.max_refusals
            ),
        )
    }

    /// Counts one refused call of `ctx`'s run; past the bound, stops the run (`error` is the
    /// refusal that passed it).
    fn count_refusal(&self, ctx: &CallContext, error: &mut CallError) {
        let n = Tally::add(&ctx.run.tally.refused, 1);
        if n <= self.max_refusals || ctx.run.stopped.is_cancelled() {
            return;
        }
        let last = crate::log_limit::clipped(&error.message);
        ctx.run.stop(format!(
            "more than {max} of its tool calls were refused (MCP_BRIDGE_RUN_MAX_REFUSALS={max}); \
             the last: {last}",
            max = self.max_refusals
        ));
        error.message = format!(
            "{}; this run is stopped: more than {} of its tool calls were refused \
             (MCP_BRIDGE_RUN_MAX_REFUSALS)",
            error.message, self.max_refusals
        );
    }

    /// Decides one tool call; see the module's order. An admitted call may hold a share of the
    /// run's result-byte budgets.
    async fn decide(
        &self,
        ctx: &CallContext,
        call: &ToolCall,
        facts: &ToolFacts,
    ) -> (Decision, Option<Reservation>) {
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
                let refused =
                    Decision::refused(Verdict::Denied, rule, ErrorKind::PolicyDenied, message);
                return (refused, None);
            }
        }
        let Some(policy) = &facts.policy else {
            // An unknown server: the backend's own error says so.
            return (Decision::allowed(), None);
        };
        if let Some(refusal) = policy.tools.refusal(&call.tool) {
            let rule = format!("{refusal} in {}", facts.file);
            let message = refusal.message(&call.server, &call.tool, &facts.file);
            let refused =
                Decision::refused(Verdict::Denied, rule, ErrorKind::ToolDisabled, message);
            return (refused, None);
        }
        // A server that needs sign-in cannot run the call: say how to sign in rather than ask
        // for an approval that could not make it run.
        if let Some(message) = &facts.sign_in {
            let refused = Decision::refused(
                Verdict::Denied,
                "sign-in needed",
                ErrorKind::AuthRequired,
                message.clone(),
            );
            return (refused, None);
        }
        // A tool changed since its server was pinned cannot run either: say how to approve
        // the change rather than ask for an approval of the call.
        if let Some(message) = &facts.changed {
            let refused = Decision::refused(
                Verdict::Denied,
                "tool changed since pinned",
                ErrorKind::ToolChanged,
                message.clone(),
            );
            return (refused, None);
        }
        let reservation = match self
            .limits
            .admit(ctx, (&call.server, &call.tool), &policy.limits, &facts.file)
            .await
        {
            Ok(reservation) => reservation,
            Err(limited) => return (limited, None),
        };
        let decision = self.approvals.gate(ctx, call, facts).await;
        // A refused call gives its reservation back at once (dropped).
        let reservation = reservation.filter(|_| decision.verdict.admits());
        (decision, reservation)
    }

    fn memo(
        &self,
        call: &ToolCall,
        decision: Decision,
        reservation: Option<Reservation>,
        facts: &ToolFacts,
    ) -> CallMemo {
        let (args_sha256, arguments, args_bytes) = match &self.audit {
            Some(audit) => {
                let text = serde_json::to_string(&call.arguments).unwrap_or_default();
                let values = audit
                    .values()
                    .then(|| Value::Object(secret::redacted(&call.arguments)));
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
            reservation,
            creds: facts.creds.clone(),
        }
    }
}

#[async_trait::async_trait]
impl CallHook for Policy {
    async fn before(&self, ctx: &CallContext, request: &HostRequest) -> Admission {
        let HostRequest::Backend(BackendCall::CallTool(call)) = request else {
            return Admission::go();
        };
        let mut facts = self
            .backend
            .facts(&call.server, &call.tool, ctx.run.caller.as_deref());
        // A server that needs sign-in is signed in to first when the run can (the person is
        // asked, or the link opened): then its tool list, and so the call's hints, are known.
        if facts.sign_in.is_some()
            && ctx.run.can_sign_in()
            && !ctx.run.stopped.is_cancelled()
            && self.backend.sign_in(ctx, &call.server).await
        {
            facts = self
                .backend
                .facts(&call.server, &call.tool, ctx.run.caller.as_deref());
        }
        let (mut decision, reservation) = if ctx.run.stopped.is_cancelled() {
            (self.stopped(), None)
        } else {
            self.decide(ctx, call, &facts).await
        };
        let tally = &ctx.run.tally;
        let admission = match decision.error.take() {
            Some(mut error) => {
                self.count_refusal(ctx, &mut error);
                Admission::refuse(error)
            }
            None => {
                Tally::add(&tally.calls, 1);
                Admission::go()
            }
        };
        admission.with_memo(self.memo(call, decision, reservation, &facts))
    }

    fn after(&self, ctx: &CallContext, admission: Admission, answered: &Answered<'_>) {
        let Some(mut memo) = admission.memo.and_then(|m| m.downcast::<CallMemo>().ok()) else {
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
        // A failed call teaches nothing of result sizes: its reservation is only given back.
        if let Some(reservation) = memo.reservation.take().filter(|_| answered.outcome.is_ok()) {
            reservation.settle(bytes);
        }
        let Some(audit) = &self.audit else {
            return;
        };
        let (outcome, error_kind) = match (admitted, answered.outcome) {
            (false, Err(e)) => ("refused", Some(e.kind.as_str().to_string())),
            (_, Err(e)) => ("error", Some(e.kind.as_str().to_string())),
            (_, Ok(_)) => ("ok", None),
        };
        let memo = *memo;
        let line = CallRecord {
            time: now(),
            run: ctx.run.id.clone(),
            token: ctx.run.caller.as_ref().map(|c| c.token.clone()),
            creds: memo.creds,
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
            count: 1,
        };
        if admitted {
            audit.call(line);
        } else {
            for line in self.folds.refused(line.bounded(), &ctx.run.ended) {
                audit.call(line);
            }
        }
    }

    fn run_ended(&self, scope: &RunScope, report: &RunReport) {
        let Some(audit) = &self.audit else {
            return;
        };
        for line in self.folds.ended(&scope.id, &scope.ended) {
            audit.call(line);
        }
        let t = &scope.tally;
        audit.run(RunRecord {
            time: now(),
            run: scope.id.clone(),
            token: scope.caller.as_ref().map(|c| c.token.clone()),
            code_sha256: scope.code_sha256.clone(),
            language: (scope.language != Language::Python).then(|| scope.language.name().into()),
            status: serde_json::to_value(report.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            duration_ms: millis(scope.arrived.elapsed()),
            calls: Tally::get(&t.calls),
            refused: Tally::get(&t.refused),
            bytes_in: Tally::get(&t.argument_bytes),
            bytes_out: Tally::get(&t.result_bytes),
            tokens_direct: report.tokens.map(|t| t.direct),
            tokens_run: report.tokens.map(|t| t.run),
            dropped: 0,
            code: scope.audited_code.clone(),
            code_cut: 0,
        });
    }
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
mod tests;
