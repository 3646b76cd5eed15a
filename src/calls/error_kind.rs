//! [`ErrorKind`]: the class of a failed host call, sent to the sandbox as a reply's `kind`
//! and raised there as the exception class of that kind (`entrypoint/errors.py`).
//!
//! The one list of kinds on the Rust side; a test holds it equal to the Python side's.

use serde::Serialize;

/// The class of a failed host call, as the sandbox sees it (the reply frame's `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The server ran the tool and the tool reported an error.
    Tool,
    /// The server is configured but not loaded for this run.
    NotLoaded,
    /// No server of that name is configured.
    UnknownServer,
    /// The server has no tool of that name.
    UnknownTool,
    /// The tool is refused by the operator's rules (`allowedTools`, `disabledTools`).
    ToolDisabled,
    /// The server needs the user's consent, which it does not have.
    NotAllowed,
    /// The arguments do not fit the tool's input schema.
    InvalidArguments,
    /// The server failed: it could not start, crashed or timed out.
    Server,
    /// The request itself was wrong (unknown method, bad parameters, no run in progress,
    /// limits); the sandbox raises it as a plain `BridgeCallError`.
    BadRequest,
    /// The call is outside the run's `allowed_tools`.
    PolicyDenied,
    /// The call needed the user's approval and did not get it.
    NotApproved,
    /// A rate limit or run budget was reached.
    LimitExceeded,
    /// A remote server needs sign-in (`mcp-code-bridge login NAME`).
    AuthRequired,
    /// The tool changed since it was pinned (`mcp-code-bridge servers --approve-changes NAME`).
    ToolChanged,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::Tool,
        ErrorKind::NotLoaded,
        ErrorKind::UnknownServer,
        ErrorKind::UnknownTool,
        ErrorKind::ToolDisabled,
        ErrorKind::NotAllowed,
        ErrorKind::InvalidArguments,
        ErrorKind::Server,
        ErrorKind::BadRequest,
        ErrorKind::PolicyDenied,
        ErrorKind::NotApproved,
        ErrorKind::LimitExceeded,
        ErrorKind::AuthRequired,
        ErrorKind::ToolChanged,
    ];

    /// The kind as it is written on the wire (`"not_loaded"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Tool => "tool",
            ErrorKind::NotLoaded => "not_loaded",
            ErrorKind::UnknownServer => "unknown_server",
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::ToolDisabled => "tool_disabled",
            ErrorKind::NotAllowed => "not_allowed",
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::Server => "server",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::PolicyDenied => "policy_denied",
            ErrorKind::NotApproved => "not_approved",
            ErrorKind::LimitExceeded => "limit_exceeded",
            ErrorKind::AuthRequired => "auth_required",
            ErrorKind::ToolChanged => "tool_changed",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The sandbox side of the kinds: `KIND` of each class in `EXCEPTIONS`, plus the kinds
    /// raised as a plain `BridgeCallError` (`PLAIN_KINDS`).
    const ERRORS_PY: &str = include_str!("../../entrypoint/errors.py");

    /// The names in the Python tuple assigned to `name` (`EXCEPTIONS = (A, B,\n C)`).
    fn python_tuple<'a>(source: &'a str, name: &str) -> Vec<&'a str> {
        let start = source
            .find(&format!("\n{name} = ("))
            .unwrap_or_else(|| panic!("errors.py assigns no tuple to {name}"));
        let body = &source[start..];
        let open = body.find('(').expect("tuple opens") + 1;
        let close = body.find(')').expect("tuple closes");
        body[open..close]
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The `KIND` a class body sets: `None` or the string.
    fn class_kind(source: &str, class: &str) -> Option<String> {
        let start = source
            .find(&format!("\nclass {class}("))
            .unwrap_or_else(|| panic!("errors.py has no class {class}"));
        let body = &source[start + 1..];
        let end = body[1..].find("\nclass ").map_or(body.len(), |i| i + 1);
        let line = body[..end]
            .lines()
            .find_map(|l| l.trim().strip_prefix("KIND = "))
            .unwrap_or_else(|| panic!("class {class} sets no KIND"));
        (line != "None").then(|| line.trim_matches('"').to_string())
    }

    fn python_kinds() -> Vec<String> {
        let mut kinds: Vec<String> = python_tuple(ERRORS_PY, "EXCEPTIONS")
            .into_iter()
            .filter_map(|class| class_kind(ERRORS_PY, class))
            .collect();
        kinds.extend(
            python_tuple(ERRORS_PY, "PLAIN_KINDS")
                .into_iter()
                .map(|k| k.trim_matches('"').to_string()),
        );
        kinds
    }

    #[test]
    fn the_rust_and_python_kinds_agree_exactly() {
        let python = python_kinds();
        let unique: BTreeSet<&str> = python.iter().map(String::as_str).collect();
        assert_eq!(
            unique.len(),
            python.len(),
            "a kind twice in errors.py: {python:?}"
        );
        let rust: BTreeSet<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(rust, unique, "ErrorKind::ALL vs entrypoint/errors.py");
    }

    #[test]
    fn all_lists_every_kind_once_and_serde_writes_as_str() {
        // No wildcard: a new variant fails to compile here until it is placed in ALL.
        let position = |k: ErrorKind| match k {
            ErrorKind::Tool => 0,
            ErrorKind::NotLoaded => 1,
            ErrorKind::UnknownServer => 2,
            ErrorKind::UnknownTool => 3,
            ErrorKind::ToolDisabled => 4,
            ErrorKind::NotAllowed => 5,
            ErrorKind::InvalidArguments => 6,
            ErrorKind::Server => 7,
            ErrorKind::BadRequest => 8,
            ErrorKind::PolicyDenied => 9,
            ErrorKind::NotApproved => 10,
            ErrorKind::LimitExceeded => 11,
            ErrorKind::AuthRequired => 12,
            ErrorKind::ToolChanged => 13,
        };
        for (i, kind) in ErrorKind::ALL.into_iter().enumerate() {
            assert_eq!(position(kind), i);
            let wire = serde_json::to_value(kind).expect("a kind serializes");
            assert_eq!(wire, kind.as_str());
            assert_eq!(kind.to_string(), kind.as_str());
        }
    }
}
