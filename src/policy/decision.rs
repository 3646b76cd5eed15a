//! [`Decision`]: what the policy decided about one tool call, and why: the verdict, the rule
//! that decided (for the sandbox's error and the audit line), and the error the sandbox gets
//! when the call is refused.

use crate::calls::{CallError, ErrorKind};

/// The policy's verdict on one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No rule stood in the way.
    Allowed,
    /// It needed approval and the user approved it.
    Approved,
    /// It needed approval and the operator approved it in advance (`autoApprove`,
    /// `MCP_BRIDGE_APPROVAL=allow`).
    PreApproved,
    /// A rule refused it (`allowedTools`, `disabledTools`, the run's `allowed_tools`).
    Denied,
    /// A rate limit or run budget refused it.
    Limited,
    /// It needed approval and the user declined, or did not answer in time.
    Declined,
    /// It needed approval and nobody could be asked (or `MCP_BRIDGE_APPROVAL=deny`).
    Unapproved,
}

impl Verdict {
    /// The verdict as the audit log writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allow",
            Verdict::Approved => "approved",
            Verdict::PreApproved => "pre_approved",
            Verdict::Denied => "deny",
            Verdict::Limited => "limit",
            Verdict::Declined => "declined",
            Verdict::Unapproved => "unapproved",
        }
    }

    /// Whether the call goes ahead.
    pub fn admits(self) -> bool {
        matches!(
            self,
            Verdict::Allowed | Verdict::Approved | Verdict::PreApproved
        )
    }
}

/// A verdict and the rule behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// The rule that decided, as a person reads it (`"disabledTools" rule "delete_*" in
    /// /home/me/MCPs/team.json`); none when nothing had to decide.
    pub rule: Option<String>,
    /// The error the sandbox gets, when the call is refused.
    pub error: Option<CallError>,
}

impl Decision {
    /// Allowed: no rule stood in the way.
    pub fn allowed() -> Self {
        Decision {
            verdict: Verdict::Allowed,
            rule: None,
            error: None,
        }
    }

    /// Admitted with `verdict` because of `rule`.
    pub fn admitted(verdict: Verdict, rule: impl Into<String>) -> Self {
        Decision {
            verdict,
            rule: Some(rule.into()),
            error: None,
        }
    }

    /// Refused with `verdict` by `rule`; the sandbox gets `message` as an error of `kind`.
    pub fn refused(
        verdict: Verdict,
        rule: impl Into<String>,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Decision {
            verdict,
            rule: Some(rule.into()),
            error: Some(CallError {
                kind,
                message: message.into(),
            }),
        }
    }
}
