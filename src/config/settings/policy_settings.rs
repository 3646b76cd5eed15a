//! [`PolicySettings`]: the operator's policy settings: the audit log (`MCP_BRIDGE_AUDIT_*`),
//! what happens to calls that need approval (`MCP_BRIDGE_APPROVAL*`), and the default rate
//! limit and run budgets (a server's config entry may override each). Read once at startup
//! through their rows; a bad value is a startup error naming it.

use std::path::PathBuf;
use std::time::Duration;

use super::super::error::ConfigError;
use super::super::servers::tool_rules::Limits;
use super::table::{Flag, Lookup, Number, Text, Unit};

use super::table::{DAY, KIB, MIB, TIB};

/// `MCP_BRIDGE_AUDIT_LOG`.
pub const AUDIT_LOG: Text = Text {
    name: "MCP_BRIDGE_AUDIT_LOG",
    default: "unset",
    allowed: "an absolute path",
    doc: "append one JSON line per run and per tool call to this file, made `0600` (\"Policy\"; bridge addition)",
};
/// `MCP_BRIDGE_AUDIT_VALUES`.
pub const AUDIT_VALUES: Flag = Flag {
    name: "MCP_BRIDGE_AUDIT_VALUES",
    default: false,
    doc: "`1`: the audit log also records argument values (secret-looking keys still redacted); by default only their SHA-256",
};
/// `MCP_BRIDGE_AUDIT_CODE`.
pub const AUDIT_CODE: Flag = Flag {
    name: "MCP_BRIDGE_AUDIT_CODE",
    default: false,
    doc: "`1`: each run line of the audit log also holds the run's code (at most 64 KiB, the bytes cut counted in `code_cut`); secrets in code are NOT redacted",
};
/// `MCP_BRIDGE_AUDIT_MAX_BYTES`.
pub const AUDIT_MAX_BYTES: Number = Number::new(
    "MCP_BRIDGE_AUDIT_MAX_BYTES",
    Unit::Bytes,
    10 * MIB,
    (4 * KIB, TIB),
    "the audit log is rotated (`PATH.1`, `PATH.2`, `PATH.3`) when it grows past this size",
);
/// `MCP_BRIDGE_APPROVAL`.
pub const APPROVAL: Text = Text {
    name: "MCP_BRIDGE_APPROVAL",
    default: "ask",
    allowed: "`ask`, `allow` or `deny`",
    doc: "calls that need approval (destructive tools, `requireApproval`): ask the user through the client and refuse when it cannot ask; `allow`: approved in advance; `deny`: always refused, whatever a server entry's `autoApprove` says (the operator's kill switch)",
};
/// `MCP_BRIDGE_APPROVAL_TIMEOUT`.
pub const APPROVAL_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_APPROVAL_TIMEOUT",
    Unit::Seconds,
    300,
    (1, DAY),
    "seconds a question waits for the user (never past the run's deadline); then the call is refused",
);
/// `MCP_BRIDGE_QUESTION_TIMEOUT`.
pub const QUESTION_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_QUESTION_TIMEOUT",
    Unit::Seconds,
    300,
    (1, DAY),
    "seconds a downstream server's question (elicitation) relayed to the user waits for an answer (the wait does not count against the run's timeout); then the server gets `cancel`",
);
/// `MCP_BRIDGE_CALLS_PER_MINUTE`.
pub const CALLS_PER_MINUTE: Number = Number::new(
    "MCP_BRIDGE_CALLS_PER_MINUTE",
    Unit::Count,
    0,
    (0, 1_000_000),
    "tool calls per minute to one server, over all runs; `0` = no limit; a server entry's `callsPerMinute` overrides it",
)
.or_off();
/// `MCP_BRIDGE_RUN_MAX_CALLS`.
pub const RUN_MAX_CALLS: Number = Number::new(
    "MCP_BRIDGE_RUN_MAX_CALLS",
    Unit::Count,
    0,
    (0, 1_000_000_000),
    "tool calls one run may make; `0` = no limit; a server entry's `maxCallsPerRun` caps that server's share",
)
.or_off();
/// `MCP_BRIDGE_RUN_MAX_REFUSALS`.
pub const RUN_MAX_REFUSALS: Number = Number::new(
    "MCP_BRIDGE_RUN_MAX_REFUSALS",
    Unit::Count,
    1000,
    (1, 1_000_000),
    "tool calls of one run the policy may refuse (rules, limits, approval); the next one stops the run with an error naming this setting",
);
/// `MCP_BRIDGE_RUN_MAX_RESULT_BYTES`.
pub const RUN_MAX_RESULT_BYTES: Number = Number::new(
    "MCP_BRIDGE_RUN_MAX_RESULT_BYTES",
    Unit::Bytes,
    0,
    (0, TIB),
    "bytes of tool results one run may receive; once reached, further calls are refused; `0` = no limit; a server entry's `maxResultBytesPerRun` caps that server's share",
)
.or_off();

/// What happens to a call that needs the user's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Ask the user through the client; refuse when nobody can be asked (the default).
    Ask,
    /// The operator approves every such call in advance (CI, trusted automation).
    Allow,
    /// Refuse every such call without asking, over every entry's `autoApprove`.
    Deny,
}

/// The policy settings.
#[derive(Debug, Clone)]
pub struct PolicySettings {
    /// `MCP_BRIDGE_AUDIT_LOG`: where audit lines go; none when unset.
    pub audit_log: Option<PathBuf>,
    /// `MCP_BRIDGE_AUDIT_VALUES`: also log argument values.
    pub audit_values: bool,
    /// `MCP_BRIDGE_AUDIT_CODE`: run lines hold the run's code.
    pub audit_code: bool,
    /// `MCP_BRIDGE_AUDIT_MAX_BYTES`: the log is rotated when it grows past this.
    pub audit_max_bytes: u64,
    /// `MCP_BRIDGE_APPROVAL`.
    pub approval: ApprovalMode,
    /// `MCP_BRIDGE_APPROVAL_TIMEOUT`: how long a question waits for the user (never past the
    /// run's deadline).
    pub approval_timeout: Duration,
    /// `MCP_BRIDGE_QUESTION_TIMEOUT`: how long a relayed server question waits for the user
    /// (not counted against the run's timeout).
    pub question_timeout: Duration,
    /// Default limits.
    pub limits: Limits,
    /// `MCP_BRIDGE_RUN_MAX_REFUSALS`: refused tool calls one run may make before it is stopped.
    pub run_max_refusals: u64,
}

impl PolicySettings {
    /// Reads the policy settings through `var`, each through its row.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_lookup(var: &Lookup) -> Result<Self, ConfigError> {
        Ok(PolicySettings {
            audit_log: AUDIT_LOG.parse(var, None, |v| {
                let p = PathBuf::from(v.trim());
                if p.is_absolute() {
                    Ok(Some(p))
                } else {
                    Err("expected an absolute path".into())
                }
            })?,
            audit_values: AUDIT_VALUES.get(var)?,
            audit_code: AUDIT_CODE.get(var)?,
            audit_max_bytes: AUDIT_MAX_BYTES.get(var)?,
            approval: APPROVAL.parse(var, ApprovalMode::Ask, parse_approval)?,
            approval_timeout: APPROVAL_TIMEOUT.duration(var)?,
            question_timeout: QUESTION_TIMEOUT.duration(var)?,
            limits: Limits {
                calls_per_minute: CALLS_PER_MINUTE.get(var)?,
                run_max_calls: RUN_MAX_CALLS.get(var)?,
                run_max_result_bytes: RUN_MAX_RESULT_BYTES.get(var)?,
            },
            run_max_refusals: RUN_MAX_REFUSALS.get(var)?,
        })
    }
}

fn parse_approval(v: &str) -> Result<ApprovalMode, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "ask" => Ok(ApprovalMode::Ask),
        "allow" => Ok(ApprovalMode::Allow),
        "deny" => Ok(ApprovalMode::Deny),
        _ => Err("expected ask, allow or deny".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> Result<PolicySettings, ConfigError> {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        PolicySettings::from_lookup(&|k| map.get(k).map(|v| v.to_string()))
    }

    #[test]
    fn defaults_ask_and_limit_nothing() {
        let p = with(&[]).expect("defaults");
        assert_eq!(p.approval, ApprovalMode::Ask);
        assert_eq!(p.limits, Limits::default());
        assert!(p.audit_log.is_none() && !p.audit_values && !p.audit_code);
        assert!(
            with(&[("MCP_BRIDGE_AUDIT_CODE", "1")])
                .expect("on")
                .audit_code
        );
        assert_eq!(p.approval_timeout, Duration::from_secs(300));
        assert_eq!(p.run_max_refusals, 1000);
        assert!(with(&[("MCP_BRIDGE_RUN_MAX_REFUSALS", "0")]).is_err());
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (k, v) in [
            ("MCP_BRIDGE_APPROVAL", "maybe"),
            ("MCP_BRIDGE_AUDIT_LOG", "relative/audit.log"),
            ("MCP_BRIDGE_CALLS_PER_MINUTE", "-1"),
        ] {
            let err = with(&[(k, v)]).expect_err("bad").to_string();
            assert!(err.contains(k), "{err}");
        }
        let p = with(&[
            ("MCP_BRIDGE_APPROVAL", "Allow"),
            ("MCP_BRIDGE_RUN_MAX_CALLS", "5"),
        ])
        .expect("valid");
        assert_eq!(p.approval, ApprovalMode::Allow);
        assert_eq!(p.limits.run_max_calls, 5);
    }
}
