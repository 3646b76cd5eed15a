//! Asking the user to approve a run's calls, in the protocol revision the client speaks: the
//! run's [`crate::calls::Asker`] is built per `tools/call` from the request's protocol version
//! and the client's capabilities ([`face`]). A 2025-11-25 client that declared form
//! elicitation is asked with `elicitation/create` while the sandbox waits (`elicit.rs`); a
//! 2026-07-28 client gets an input-required result and answers on its retry (`rounds.rs`,
//! with the sealed `requestState` in `state.rs` and the runs waiting in `parked.rs`); any other
//! client cannot be asked, and such calls fail closed. This module also words the question
//! and reads the answer.

use std::fmt::Write as _;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, ProtocolVersion};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::Value;

use crate::calls::{Answer, ApprovalReason, Question};

mod elicit;
mod parked;
mod rounds;
mod state;

pub use elicit::ElicitAsker;
pub use rounds::Rounds;

/// How the client of one request can be asked.
pub enum Face {
    /// `elicitation/create` on the session (2025-11-25 and older, form elicitation declared).
    Elicit(rmcp::service::Peer<RoleServer>),
    /// An input-required result, answered on the retry (2026-07-28, elicitation declared).
    Rounds,
    /// Not at all: calls that need approval fail closed.
    None,
}

/// How the client of `context`'s request can be asked.
pub fn face(context: &RequestContext<RoleServer>) -> Face {
    let form = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // A capability naming neither mode means form (the 2025-06-18 shape).
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        return Face::None;
    }
    match context.protocol_version() {
        Some(v) if v >= ProtocolVersion::V_2026_07_28 => Face::Rounds,
        _ => Face::Elicit(context.peer.clone()),
    }
}

/// Whether the client of `context`'s request declared URL-mode elicitation.
pub fn takes_links(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.url.is_some())
}

/// Tools listed by name in a question at most; the rest are counted.
const MAX_TOOLS: usize = 10;
/// Argument previews shown per tool at most.
const MAX_PREVIEWS: usize = 3;

/// The question as the user reads it: each tool with its count and why it needs approval,
/// and a few argument previews (already cut and escaped by the policy).
pub fn message(question: &Question) -> String {
    let mut tools: Vec<(&str, &str, &ApprovalReason, Vec<&str>)> = Vec::new();
    for c in &question.calls {
        match tools
            .iter_mut()
            .find(|(s, t, _, _)| *s == c.server && *t == c.tool)
        {
            Some(entry) => entry.3.push(&c.preview),
            None => tools.push((&c.server, &c.tool, &c.reason, vec![&c.preview])),
        }
    }
    let n = question.calls.len();
    let mut text = format!(
        "Code run by the model (run_python, run {}) wants to make {n} tool call{} that need{} \
         your approval:\n",
        question.run,
        if n == 1 { "" } else { "s" },
        if n == 1 { "s" } else { "" }
    );
    for (server, tool, reason, previews) in tools.iter().take(MAX_TOOLS) {
        let server = crate::shown::escaped(server);
        let tool = crate::shown::escaped(tool);
        let why = crate::shown::escaped(&reason.to_string()).into_owned();
        let _ = writeln!(text, "- {server}.{tool} × {} ({why})", previews.len());
        for p in previews.iter().take(MAX_PREVIEWS) {
            let _ = writeln!(text, "    {p}");
        }
        if previews.len() > MAX_PREVIEWS {
            let _ = writeln!(text, "    … and {} more", previews.len() - MAX_PREVIEWS);
        }
    }
    if tools.len() > MAX_TOOLS {
        let _ = writeln!(text, "- … and {} more tools", tools.len() - MAX_TOOLS);
    }
    text.push_str("Approve them? \"For the rest of this run\" also approves later calls of these tools in this run.");
    text
}

/// The form: `approve` (required) and `for_run`.
pub fn form(question: &Question) -> ElicitRequestParams {
    let schema = ElicitationSchema::builder()
        .required_bool("approve")
        .optional_bool("for_run", false)
        .build_unchecked();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(question),
        requested_schema: schema,
    }
}

/// The user's answer in an elicitation result (`action`, `content`); anything but an accepted
/// form with `approve: true` declines.
pub fn answer(action: ElicitationAction, content: Option<&Value>) -> Answer {
    let field = |k: &str| content.and_then(|c| c.get(k)).and_then(Value::as_bool);
    match action {
        ElicitationAction::Accept if field("approve") == Some(true) => Answer::Approved {
            for_run: field("for_run") == Some(true),
        },
        _ => Answer::Declined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::AskedCall;

    fn asked(tool: &str, preview: &str) -> AskedCall {
        AskedCall {
            server: "db".into(),
            tool: tool.into(),
            reason: ApprovalReason::Destructive,
            preview: preview.into(),
        }
    }

    #[test]
    fn a_batch_is_summed_up_per_tool_with_bounded_previews() {
        let mut calls: Vec<AskedCall> = (0..20)
            .map(|i| asked("drop_table", &format!("{{\"table\":\"t{i}\"}}")))
            .collect();
        calls.push(asked("wipe\u{1b}[2J", "{}"));
        let text = message(&Question {
            run: "r1".into(),
            calls,
        });
        assert!(text.contains("21 tool calls"), "{text}");
        assert!(text.contains("db.drop_table × 20"), "{text}");
        assert!(text.contains("… and 17 more"), "{text}");
        assert!(!text.contains("t5\""), "{text}");
        assert!(!text.contains('\u{1b}'), "escaped: {text}");
        let many: Vec<AskedCall> = (0..50).map(|i| asked(&format!("t{i}"), "{}")).collect();
        let text = message(&Question {
            run: "r".into(),
            calls: many,
        });
        assert!(text.contains("… and 40 more tools"), "{text}");
        assert!(text.len() < 2000);
    }

    #[test]
    fn only_an_accepted_approve_approves() {
        use serde_json::json;
        let a = |action, c: Value| answer(action, Some(&c));
        assert_eq!(
            a(ElicitationAction::Accept, json!({"approve": true})),
            Answer::Approved { for_run: false }
        );
        assert_eq!(
            a(
                ElicitationAction::Accept,
                json!({"approve": true, "for_run": true})
            ),
            Answer::Approved { for_run: true }
        );
        for (action, c) in [
            (ElicitationAction::Accept, json!({"approve": false})),
            (ElicitationAction::Accept, json!({"approve": "yes"})),
            (ElicitationAction::Decline, json!({"approve": true})),
            (ElicitationAction::Cancel, json!({"approve": true})),
        ] {
            assert_eq!(a(action, c), Answer::Declined);
        }
        assert_eq!(answer(ElicitationAction::Accept, None), Answer::Declined);
    }
}
