//! The operator's rules for one server's tools, as its config entry writes them:
//! `"allowedTools"`, `"disabledTools"`, `"requireApproval"` and `"autoApprove"`, each a list of
//! tool names where `*` matches any run of characters. Deny wins: a tool matched by
//! `disabledTools` is refused even when `allowedTools` names it. A leaf: the config parses
//! these, upstream hides refused tools, the policy refuses calls to them and asks before
//! calls that need approval.

use std::fmt;

/// A tool name pattern: literal text with `*` matching any run of characters (none included).
/// Split at its stars once, when made, so matching allocates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    /// The literal runs between the stars (one more than the stars).
    parts: Vec<String>,
}

impl Pattern {
    /// The pattern `text` (`*` is the only special character).
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let parts = text.split('*').map(str::to_string).collect();
        Pattern { text, parts }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        let (first, rest_parts) = match self.parts.split_first() {
            Some(split) => split,
            None => return name.is_empty(),
        };
        let Some(mut rest) = name.strip_prefix(first.as_str()) else {
            return false;
        };
        let Some((last, middle)) = rest_parts.split_last() else {
            return rest.is_empty();
        };
        for part in middle {
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.len() >= last.len() && rest.ends_with(last.as_str())
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Which list of a server entry a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleList {
    /// `"allowedTools"`: when present, only the tools it matches exist.
    Allowed,
    /// `"disabledTools"`: tools it matches are hidden and refused (deny wins).
    Disabled,
    /// `"requireApproval"`: calls to tools it matches need the user's approval.
    RequireApproval,
    /// `"autoApprove"`: the operator approves calls to tools it matches in advance.
    AutoApprove,
}

impl RuleList {
    /// The key as written in a config entry.
    pub fn key(self) -> &'static str {
        match self {
            RuleList::Allowed => "allowedTools",
            RuleList::Disabled => "disabledTools",
            RuleList::RequireApproval => "requireApproval",
            RuleList::AutoApprove => "autoApprove",
        }
    }
}

/// Why a tool is refused: the list and the pattern that decided (none when `allowedTools`
/// matched nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The list that decided.
    pub list: RuleList,
    /// The pattern that matched, for `disabledTools`.
    pub pattern: Option<String>,
}

impl Refusal {
    /// Why, with `file`: `refused by "disabledTools" rule "delete_*" in FILE`, or `refused:
    /// not in "allowedTools" in FILE`.
    pub fn explain(&self, file: &str) -> String {
        match &self.pattern {
            Some(_) => format!("refused by {self} in {file}"),
            None => format!("refused: {self} in {file}"),
        }
    }

    /// The one message for a call to a refused tool, said alike by the policy and by the
    /// upstream layer: `tool 'T' of MCP server 'S' is refused by ... in FILE`.
    pub fn message(&self, server: &str, tool: &str, file: &str) -> String {
        format!(
            "tool '{tool}' of MCP server '{server}' is {}",
            self.explain(file)
        )
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "\"{}\" rule \"{p}\"", self.list.key()),
            None => write!(f, "not in \"{}\"", self.list.key()),
        }
    }
}

/// The operator's policy for one server: its tool rules and its limit overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerPolicy {
    /// Which tools exist, and which need approval.
    pub tools: ToolRules,
    /// Overrides of the limit settings for this server.
    pub limits: LimitOverrides,
}

/// Limits applied per server unless its config entry overrides them; `0` means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// `MCP_BRIDGE_CALLS_PER_MINUTE`: tool calls per minute to one server.
    pub calls_per_minute: u64,
    /// `MCP_BRIDGE_RUN_MAX_CALLS`: tool calls one run may make.
    pub run_max_calls: u64,
    /// `MCP_BRIDGE_RUN_MAX_RESULT_BYTES`: bytes of tool results one run may receive.
    pub run_max_result_bytes: u64,
}

/// A server entry's overrides of the limit settings (`None`: the setting applies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitOverrides {
    /// `"callsPerMinute"`.
    pub calls_per_minute: Option<u64>,
    /// `"maxCallsPerRun"`.
    pub max_calls_per_run: Option<u64>,
    /// `"maxResultBytesPerRun"`.
    pub max_result_bytes_per_run: Option<u64>,
}

/// A server's tool rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolRules {
    /// `"allowedTools"`; `None` when the entry has no such key (every tool allowed).
    pub allowed: Option<Vec<Pattern>>,
    /// `"disabledTools"`.
    pub disabled: Vec<Pattern>,
    /// `"requireApproval"`.
    pub require_approval: Vec<Pattern>,
    /// `"autoApprove"`.
    pub auto_approve: Vec<Pattern>,
}

impl ToolRules {
    /// Why `tool` is refused, or `None` when it is allowed. Deny wins.
    pub fn refusal(&self, tool: &str) -> Option<Refusal> {
        if let Some(p) = self.disabled.iter().find(|p| p.matches(tool)) {
            return Some(Refusal {
                list: RuleList::Disabled,
                pattern: Some(p.to_string()),
            });
        }
        match &self.allowed {
            Some(allowed) if !allowed.iter().any(|p| p.matches(tool)) => Some(Refusal {
                list: RuleList::Allowed,
                pattern: None,
            }),
            _ => None,
        }
    }

    /// The `requireApproval` pattern matching `tool`, if any.
    pub fn needs_approval(&self, tool: &str) -> Option<&Pattern> {
        self.require_approval.iter().find(|p| p.matches(tool))
    }

    /// The `autoApprove` pattern matching `tool`, if any.
    pub fn auto_approved(&self, tool: &str) -> Option<&Pattern> {
        self.auto_approve.iter().find(|p| p.matches(tool))
    }

    /// Whether no rule is set.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_none()
            && self.disabled.is_empty()
            && self.require_approval.is_empty()
            && self.auto_approve.is_empty()
    }

    /// A stable text of the visibility rules (allowed and disabled), for cache keys.
    pub fn visibility_key(&self) -> String {
        let allowed = match &self.allowed {
            None => "-".to_string(),
            Some(a) => a.iter().map(Pattern::as_str).collect::<Vec<_>>().join("\0"),
        };
        let disabled: Vec<&str> = self.disabled.iter().map(Pattern::as_str).collect();
        format!("{allowed}\u{1}{}", disabled.join("\0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pats(list: &[&str]) -> Vec<Pattern> {
        list.iter().map(|p| Pattern::new(*p)).collect()
    }

    #[test]
    fn wildcards_match_whole_names() {
        for (pattern, name, expected) in [
            ("echo", "echo", true),
            ("echo", "echoes", false),
            ("*", "", true),
            ("*", "anything", true),
            ("get_*", "get_issue", true),
            ("get_*", "get_", true),
            ("get_*", "forget_it", false),
            ("*_issue", "create_issue", true),
            ("*_issue", "create_issues", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("*delete*", "bulk_delete_rows", true),
        ] {
            assert_eq!(
                Pattern::new(pattern).matches(name),
                expected,
                "{pattern} vs {name}"
            );
        }
    }

    #[test]
    fn deny_wins_and_an_allow_list_hides_the_rest() {
        let rules = ToolRules {
            allowed: Some(pats(&["get_*", "delete_branch"])),
            disabled: pats(&["*secret*", "delete_*"]),
            ..ToolRules::default()
        };
        assert_eq!(rules.refusal("get_issue"), None);
        let r = rules.refusal("delete_branch").expect("deny wins");
        assert_eq!(r.list, RuleList::Disabled);
        assert_eq!(r.pattern.as_deref(), Some("delete_*"));
        assert_eq!(
            rules
                .refusal("get_secret")
                .map(|r| r.to_string())
                .as_deref(),
            Some("\"disabledTools\" rule \"*secret*\"")
        );
        let r = rules.refusal("create_issue").expect("not allowed");
        assert_eq!(r.list, RuleList::Allowed);
        assert_eq!(r.to_string(), "not in \"allowedTools\"");
        assert_eq!(
            r.explain("/f.json"),
            "refused: not in \"allowedTools\" in /f.json"
        );
        assert_eq!(
            rules
                .refusal("delete_x")
                .expect("denied")
                .explain("/f.json"),
            "refused by \"disabledTools\" rule \"delete_*\" in /f.json"
        );
        assert_eq!(ToolRules::default().refusal("anything"), None);
        assert_ne!(
            rules.visibility_key(),
            ToolRules::default().visibility_key()
        );
    }
}
