//! Which calls need the user's approval (`needs_approval`), the refusal when nobody can be
//! asked (`unapproved`, saying how to allow such calls), and the bounded, escaped argument
//! preview a question shows.

use crate::calls::{ApprovalReason, ErrorKind, ToolCall, ToolFacts};

use super::super::decision::{Decision, Verdict};

/// Characters of an argument preview shown to the user.
pub const PREVIEW_CHARS: usize = 120;

/// Why `call` needs approval, or `None`. The operator's `requireApproval` decides whatever the
/// hints say; hints only add: `destructiveHint` without `readOnlyHint`, or nothing known.
pub(super) fn needs_approval(call: &ToolCall, facts: &ToolFacts) -> Option<ApprovalReason> {
    let policy = facts.policy.as_ref()?;
    if let Some(p) = policy.tools.needs_approval(&call.tool) {
        return Some(ApprovalReason::Listed {
            pattern: p.to_string(),
            file: facts.file.to_string(),
        });
    }
    if !facts.hints_known {
        return Some(ApprovalReason::HintsUnknown);
    }
    (facts.destructive && !facts.read_only).then_some(ApprovalReason::Destructive)
}

/// Refused for want of someone to ask (`because`), saying how to allow such calls.
pub(super) fn unapproved(
    call: &ToolCall,
    facts: &ToolFacts,
    reason: &ApprovalReason,
    because: &str,
) -> Decision {
    let message = format!(
        "call to {}.{} refused: it needs the user's approval ({}) and {because} (no elicitation \
         support, or `mcp-code-bridge exec`). To allow such calls, add \"autoApprove\": [\"{}\"] \
         to the entry of server '{}' in {}, or set MCP_BRIDGE_APPROVAL=allow",
        call.server, call.tool, reason, call.tool, call.server, facts.file
    );
    let rule = format!("approval needed; {because}");
    Decision::refused(Verdict::Unapproved, rule, ErrorKind::NotApproved, message)
}

/// The arguments as JSON, cut to [`PREVIEW_CHARS`] and escaped for a terminal.
pub fn preview(arguments: &serde_json::Map<String, serde_json::Value>) -> String {
    let text = serde_json::to_string(arguments).unwrap_or_default();
    let mut cut: String = text.chars().take(PREVIEW_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    crate::shown::escaped(&cut).into_owned()
}
