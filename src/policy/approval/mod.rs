//! [`Approvals`]: which calls need the user's approval (the operator's `requireApproval`
//! decides whatever the hints say; otherwise the server's `destructiveHint`, unless it also
//! says `readOnlyHint`, and a tool nothing is known of), what approves them in advance (the
//! operator's `autoApprove`, `MCP_BRIDGE_APPROVAL=allow`) or refuses them
//! (`MCP_BRIDGE_APPROVAL=deny`, the operator's kill switch: it wins over every `autoApprove`),
//! and asking the user through the run's
//! [`crate::calls::Asker`]: once per call, or once for a batch made at the same time
//! (`batch.rs`), with "for the rest of this run" remembered in the run's tally. Without an
//! asker such calls are refused with a message saying how to allow them. Only the asker can
//! approve: nothing the sandbox sends (arguments, `_meta`, host methods) is read as an answer.

use std::time::Duration;

use tokio::time::Instant;

use crate::calls::{Answer, AskedCall, CallContext, ErrorKind, ToolCall, ToolFacts};
use crate::config::{ApprovalMode, PolicySettings};

use super::decision::{Decision, Verdict};

mod batch;
mod need;

pub use need::preview;
use need::{needs_approval, unapproved};

/// How long a batch stays open after the last call joined it.
const WINDOW: Duration = Duration::from_millis(100);

/// The approval gate.
pub struct Approvals {
    mode: ApprovalMode,
    timeout: Duration,
    window: Duration,
    batches: batch::Batches,
}

impl Approvals {
    /// A gate following `settings`.
    pub fn new(settings: &PolicySettings) -> Self {
        Approvals {
            mode: settings.approval,
            timeout: settings.approval_timeout,
            window: WINDOW,
            batches: batch::Batches::default(),
        }
    }

    /// Decides `call`: allowed without asking, pre-approved, or asks the user (waiting by the
    /// run's deadline) and returns the answer as a decision.
    pub async fn gate(&self, ctx: &CallContext, call: &ToolCall, facts: &ToolFacts) -> Decision {
        let Some(reason) = needs_approval(call, facts) else {
            return Decision::allowed();
        };
        let what = format!("{}.{}", call.server, call.tool);
        // The operator's kill switch: it wins over every entry's `autoApprove`.
        if self.mode == ApprovalMode::Deny {
            let message = format!(
                "call to {what} refused: it needs approval ({}) and MCP_BRIDGE_APPROVAL=deny \
                 refuses every such call, whatever a server entry's \"autoApprove\" says",
                reason
            );
            return Decision::refused(
                Verdict::Unapproved,
                "MCP_BRIDGE_APPROVAL=deny",
                ErrorKind::NotApproved,
                message,
            );
        }
        let rules = facts.policy.as_ref().map(|p| &p.tools);
        if let Some(p) = rules.and_then(|r| r.auto_approved(&call.tool)) {
            let rule = format!("\"autoApprove\" rule \"{p}\" in {}", facts.file);
            return Decision::admitted(Verdict::PreApproved, rule);
        }
        if self.mode == ApprovalMode::Allow {
            return Decision::admitted(Verdict::PreApproved, "MCP_BRIDGE_APPROVAL=allow");
        }
        if approved_for_run(ctx, call) {
            return Decision::admitted(Verdict::Approved, FOR_RUN);
        }
        let Some(asker) = &ctx.run.asker else {
            return unapproved(call, facts, &reason, "this client cannot be asked");
        };
        let deadline = ctx.deadline.min(Instant::now() + self.timeout);
        let asked = AskedCall {
            server: call.server.clone(),
            tool: call.tool.clone(),
            reason: reason.clone(),
            preview: preview(&call.arguments),
        };
        let answer = self
            .batches
            .ask(&ctx.run, asker, asked, deadline, self.window)
            .await;
        match answer {
            Answer::Approved { for_run } => {
                if for_run {
                    let key = (call.server.clone(), call.tool.clone());
                    let mut approved = ctx.run.tally.approved_for_run.lock().expect("tally lock");
                    approved.insert(key);
                    return Decision::admitted(Verdict::Approved, FOR_RUN);
                }
                Decision::admitted(Verdict::Approved, "approved by the user")
            }
            // Approved for the run by an answer to another batch while this one waited.
            _ if approved_for_run(ctx, call) => Decision::admitted(Verdict::Approved, FOR_RUN),
            Answer::Declined => Decision::refused(
                Verdict::Declined,
                "declined by the user",
                ErrorKind::NotApproved,
                format!("call to {what} refused: the user declined it"),
            ),
            Answer::TimedOut => Decision::refused(
                Verdict::Declined,
                "no answer in time",
                ErrorKind::NotApproved,
                format!(
                    "call to {what} refused: the user did not approve it in time (waited up to \
                     {}s: MCP_BRIDGE_APPROVAL_TIMEOUT, or the run's deadline)",
                    self.timeout.as_secs()
                ),
            ),
            Answer::Unavailable(why) => unapproved(call, facts, &reason, &why),
        }
    }
}

/// The rule of a call approved for the rest of the run.
const FOR_RUN: &str = "approved by the user for the rest of this run";

/// Whether the user approved `call`'s tool for the rest of the run.
fn approved_for_run(ctx: &CallContext, call: &ToolCall) -> bool {
    let approved = ctx.run.tally.approved_for_run.lock().expect("tally lock");
    approved.contains(&(call.server.clone(), call.tool.clone()))
}

#[cfg(test)]
mod tests {
    use crate::calls::ApprovalReason;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;
    use crate::calls::{Asker, Question, RunScope};
    use crate::config::{Pattern, ServerPolicy, ToolRules};

    /// Answers every question with `answer`, recording the questions.
    struct FakeAsker {
        answer: Answer,
        asked: Mutex<Vec<Question>>,
        count: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Asker for FakeAsker {
        async fn ask(&self, question: Question, _deadline: Instant) -> Answer {
            self.count.fetch_add(1, Ordering::SeqCst);
            self.asked.lock().expect("lock").push(question);
            self.answer.clone()
        }
    }

    fn asker(answer: Answer) -> Arc<FakeAsker> {
        Arc::new(FakeAsker {
            answer,
            asked: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        })
    }

    fn gate(mode: ApprovalMode) -> Approvals {
        Approvals {
            mode,
            timeout: Duration::from_secs(60),
            window: Duration::from_millis(20),
            batches: batch::Batches::default(),
        }
    }

    fn ctx(asker: Option<Arc<FakeAsker>>) -> CallContext {
        let asker = asker.map(|a| a as Arc<dyn Asker>);
        CallContext {
            servers: Arc::from(vec!["db".to_string()]),
            deadline: Instant::now() + Duration::from_secs(60),
            run: Arc::new(RunScope::new("code", None, asker)),
        }
    }

    fn call(tool: &str) -> ToolCall {
        let serde_json::Value::Object(arguments) = json!({"table": "t\u{1b}[31m"}) else {
            unreachable!()
        };
        ToolCall {
            server: "db".into(),
            tool: tool.into(),
            arguments,
        }
    }

    /// Facts: hints (destructive, read-only), `requireApproval` and `autoApprove` patterns.
    fn facts(hints: Option<(bool, bool)>, require: &[&str], auto: &[&str]) -> ToolFacts {
        let pats = |v: &[&str]| v.iter().map(|p| Pattern::new(*p)).collect::<Vec<_>>();
        let tools = ToolRules {
            require_approval: pats(require),
            auto_approve: pats(auto),
            ..ToolRules::default()
        };
        let (destructive, read_only) = hints.unwrap_or_default();
        ToolFacts {
            policy: Some(Arc::new(ServerPolicy {
                tools,
                ..ServerPolicy::default()
            })),
            file: Arc::from("/cfg/team.json"),
            destructive,
            read_only,
            hints_known: hints.is_some(),
            sign_in: None,
            changed: None,
            creds: None,
        }
    }

    /// hints, requireApproval, autoApprove, mode, the verdict, whether the user was asked.
    type Case = (
        Option<(bool, bool)>,
        &'static [&'static str],
        &'static [&'static str],
        ApprovalMode,
        Verdict,
        bool,
    );

    #[tokio::test]
    async fn which_calls_need_approval() {
        // (hints, requireApproval, autoApprove, mode) -> verdict, asked?
        let d = Some((true, false));
        let ro = Some((true, true));
        let plain = Some((false, false));
        let cases: &[Case] = &[
            (plain, &[], &[], ApprovalMode::Ask, Verdict::Allowed, false),
            (d, &[], &[], ApprovalMode::Ask, Verdict::Approved, true),
            // readOnlyHint wins over destructiveHint
            (ro, &[], &[], ApprovalMode::Ask, Verdict::Allowed, false),
            // the operator's list decides regardless of hints
            (
                ro,
                &["dro*"],
                &[],
                ApprovalMode::Ask,
                Verdict::Approved,
                true,
            ),
            (
                plain,
                &["drop_table"],
                &[],
                ApprovalMode::Ask,
                Verdict::Approved,
                true,
            ),
            // nothing known of the tool: asked
            (None, &[], &[], ApprovalMode::Ask, Verdict::Approved, true),
            // pre-approved
            (
                d,
                &[],
                &["drop_*"],
                ApprovalMode::Ask,
                Verdict::PreApproved,
                false,
            ),
            // MCP_BRIDGE_APPROVAL=deny is the operator's kill switch: autoApprove loses
            (
                d,
                &["drop_*"],
                &["drop_*"],
                ApprovalMode::Deny,
                Verdict::Unapproved,
                false,
            ),
            (
                d,
                &[],
                &["drop_*"],
                ApprovalMode::Deny,
                Verdict::Unapproved,
                false,
            ),
            (
                d,
                &[],
                &[],
                ApprovalMode::Allow,
                Verdict::PreApproved,
                false,
            ),
            (
                None,
                &[],
                &[],
                ApprovalMode::Allow,
                Verdict::PreApproved,
                false,
            ),
            // refused without asking
            (d, &[], &[], ApprovalMode::Deny, Verdict::Unapproved, false),
            (plain, &[], &[], ApprovalMode::Deny, Verdict::Allowed, false),
        ];
        for (i, (hints, require, auto, mode, verdict, asked)) in cases.iter().enumerate() {
            let a = asker(Answer::Approved { for_run: false });
            let decision = gate(*mode)
                .gate(
                    &ctx(Some(a.clone())),
                    &call("drop_table"),
                    &facts(*hints, require, auto),
                )
                .await;
            assert_eq!(decision.verdict, *verdict, "case {i}: {decision:?}");
            assert_eq!(a.count.load(Ordering::SeqCst) == 1, *asked, "case {i}");
            assert_eq!(decision.error.is_some(), !verdict.admits(), "case {i}");
        }
    }

    #[tokio::test]
    async fn rules_name_what_decided() {
        let d = Some((true, false));
        let a = asker(Answer::Approved { for_run: false });
        let g = gate(ApprovalMode::Ask);
        let auto = g
            .gate(&ctx(None), &call("drop_table"), &facts(d, &[], &["drop_*"]))
            .await;
        assert_eq!(
            auto.rule.as_deref(),
            Some("\"autoApprove\" rule \"drop_*\" in /cfg/team.json")
        );
        g.gate(
            &ctx(Some(a.clone())),
            &call("drop_table"),
            &facts(d, &["drop_*"], &[]),
        )
        .await;
        let q = a.asked.lock().expect("lock").pop().expect("asked");
        assert_eq!(
            q.calls[0].reason,
            ApprovalReason::Listed {
                pattern: "drop_*".into(),
                file: "/cfg/team.json".into()
            }
        );
        // The preview is escaped: no raw control characters reach the user's screen.
        assert!(
            !q.calls[0].preview.contains('\u{1b}'),
            "{}",
            q.calls[0].preview
        );
        assert!(q.calls[0].preview.contains("table"));
    }

    #[tokio::test]
    async fn without_an_asker_such_calls_fail_closed_saying_how_to_allow_them() {
        let d = gate(ApprovalMode::Ask)
            .gate(
                &ctx(None),
                &call("drop_table"),
                &facts(Some((true, false)), &[], &[]),
            )
            .await;
        assert_eq!(d.verdict, Verdict::Unapproved);
        let err = d.error.expect("refused");
        assert_eq!(err.kind, ErrorKind::NotApproved);
        for needle in [
            "\"autoApprove\": [\"drop_table\"]",
            "/cfg/team.json",
            "MCP_BRIDGE_APPROVAL=allow",
            "destructiveHint",
        ] {
            assert!(err.message.contains(needle), "{needle}: {}", err.message);
        }
    }

    #[tokio::test]
    async fn declined_timed_out_and_unavailable_answers_refuse() {
        let d = Some((true, false));
        for (answer, verdict) in [
            (Answer::Declined, Verdict::Declined),
            (Answer::TimedOut, Verdict::Declined),
            (Answer::Unavailable("gone".into()), Verdict::Unapproved),
        ] {
            let decision = gate(ApprovalMode::Ask)
                .gate(
                    &ctx(Some(asker(answer))),
                    &call("drop_table"),
                    &facts(d, &[], &[]),
                )
                .await;
            assert_eq!(decision.verdict, verdict);
            assert_eq!(
                decision.error.expect("refused").kind,
                ErrorKind::NotApproved
            );
        }
    }

    #[tokio::test]
    async fn the_wait_ends_at_the_run_deadline() {
        /// Never answers.
        struct Silent;
        #[async_trait::async_trait]
        impl Asker for Silent {
            async fn ask(&self, _q: Question, _deadline: Instant) -> Answer {
                std::future::pending().await
            }
        }
        let ctx = CallContext {
            servers: Arc::from(vec!["db".to_string()]),
            deadline: Instant::now(),
            run: Arc::new(RunScope::new("code", None, Some(Arc::new(Silent)))),
        };
        let d = gate(ApprovalMode::Ask)
            .gate(
                &ctx,
                &call("drop_table"),
                &facts(Some((true, false)), &[], &[]),
            )
            .await;
        assert_eq!(d.verdict, Verdict::Declined);
    }

    #[tokio::test]
    async fn calls_made_together_are_asked_once_with_every_call() {
        let a = asker(Answer::Approved { for_run: false });
        let g = Arc::new(gate(ApprovalMode::Ask));
        let ctx = Arc::new(ctx(Some(a.clone())));
        let mut tasks = Vec::new();
        for i in 0..20 {
            let (g, ctx) = (g.clone(), ctx.clone());
            let tool = if i % 2 == 0 { "drop_table" } else { "wipe" };
            tasks.push(tokio::spawn(async move {
                g.gate(&ctx, &call(tool), &facts(Some((true, false)), &[], &[]))
                    .await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.expect("joined").verdict, Verdict::Approved);
        }
        assert_eq!(a.count.load(Ordering::SeqCst), 1);
        let q = a.asked.lock().expect("lock").pop().expect("asked");
        assert_eq!(q.calls.len(), 20);
        assert_eq!(q.run, ctx.run.id);
        assert_eq!(g.batches.runs_waiting(), 0, "no entry outlives its calls");
    }

    #[tokio::test]
    async fn approval_for_the_run_is_remembered_per_tool() {
        let a = asker(Answer::Approved { for_run: true });
        let g = gate(ApprovalMode::Ask);
        let ctx = ctx(Some(a.clone()));
        let f = facts(Some((true, false)), &[], &[]);
        for _ in 0..3 {
            let d = g.gate(&ctx, &call("drop_table"), &f).await;
            assert_eq!(d.verdict, Verdict::Approved);
            assert_eq!(d.rule.as_deref(), Some(FOR_RUN));
        }
        assert_eq!(a.count.load(Ordering::SeqCst), 1, "asked once for the run");
        g.gate(&ctx, &call("wipe"), &f).await;
        assert_eq!(
            a.count.load(Ordering::SeqCst),
            2,
            "another tool is asked again"
        );
        // Another run starts afresh.
        let other = super::tests::ctx(Some(a.clone()));
        g.gate(&other, &call("drop_table"), &f).await;
        assert_eq!(a.count.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn approval_looking_arguments_change_nothing() {
        let g = gate(ApprovalMode::Ask);
        let mut c = call("drop_table");
        c.arguments.insert("approved".into(), json!(true));
        c.arguments
            .insert("_meta".into(), json!({"approved": true, "for_run": true}));
        let d = g
            .gate(&ctx(None), &c, &facts(Some((true, false)), &[], &[]))
            .await;
        assert_eq!(d.verdict, Verdict::Unapproved);
    }
}
