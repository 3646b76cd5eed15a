//! Errors of the upstream layer (the user's MCP servers).

use super::near::did_you_mean;
use crate::calls::ErrorKind;
use crate::config::ServerSpec;

impl UpstreamError {
    /// The one error for `tool`, which `spec`'s server does not offer (a call, or its docs):
    /// the operator's rule when one refuses it (a refused tool is never in the live list),
    /// else an unknown tool, with the names the caller may see (`available`).
    pub fn missing_tool(spec: &ServerSpec, tool: &str, available: Vec<String>) -> Self {
        match spec.tool_refusal(tool) {
            Some(refusal) => UpstreamError::ToolDisabled {
                server: spec.name.clone(),
                tool: tool.to_string(),
                message: refusal.message(&spec.name, tool, &spec.source.display().to_string()),
            },
            None => UpstreamError::UnknownTool {
                server: spec.name.clone(),
                tool: tool.to_string(),
                available,
            },
        }
    }
}

/// A failure reaching or using a downstream MCP server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// No server of that name is configured.
    #[error("unknown MCP server '{name}'{}; configured servers: {}", did_you_mean(.name, .available), list(.available))]
    UnknownServer {
        /// The name asked for.
        name: String,
        /// Configured names.
        available: Vec<String>,
    },
    /// The server is configured but not loaded for this run.
    #[error("MCP server '{name}' is not loaded in this call; pass servers=[\"{name}\"] to run_python (loaded now: {})", list(.loaded))]
    NotLoaded {
        /// The server.
        name: String,
        /// Servers loaded for this run.
        loaded: Vec<String>,
    },
    /// The server has no such tool.
    #[error("MCP server '{server}' has no tool '{tool}'{}; its tools: {}", did_you_mean(.tool, .available), list(.available))]
    UnknownTool {
        /// The server.
        server: String,
        /// The tool asked for.
        tool: String,
        /// The server's tools.
        available: Vec<String>,
    },
    /// The tool is refused by the server's config entry (`allowedTools`, `disabledTools`).
    #[error("{message}")]
    ToolDisabled {
        /// The server.
        server: String,
        /// The tool asked for.
        tool: String,
        /// The rule and its file ([`crate::config::Refusal::message`]).
        message: String,
    },
    /// The server comes from a project's config file and the user has not approved it:
    /// nothing of it is started. The message says how to approve it.
    #[error("{message}")]
    NotAllowed {
        /// The server.
        server: String,
        /// Why, and how to allow it.
        message: String,
    },
    /// The arguments do not fit the tool's input schema (checked before calling).
    #[error("{call}{signature}:{}", lines(.problems))]
    InvalidArguments {
        /// The call as written in the sandbox: `mcp_github.create_issue`.
        call: String,
        /// The rest of its Python signature: `(repo: str, title: str) -> dict`.
        signature: String,
        /// What is wrong, one line each.
        problems: Vec<String>,
    },
    /// The server could not be started or initialized.
    #[error("MCP server '{server}' could not be started: {reason}{}", crate::lines::stderr_section("server", .stderr_tail))]
    Start {
        /// The server.
        server: String,
        /// Why.
        reason: String,
        /// The server's last stderr lines.
        stderr_tail: String,
    },
    /// The server died or its connection broke during a request.
    #[error("MCP server '{server}' crashed or closed its connection during '{tool}': {reason}{}", crate::lines::stderr_section("server", .stderr_tail))]
    Crashed {
        /// The server.
        server: String,
        /// The tool being called.
        tool: String,
        /// What the client saw.
        reason: String,
        /// The server's last stderr lines.
        stderr_tail: String,
    },
    /// The server did not answer in time.
    #[error("MCP server '{server}' did not answer '{tool}' within the run's time limit ({secs:.1} s left)")]
    Timeout {
        /// The server.
        server: String,
        /// The tool being called.
        tool: String,
        /// Seconds that were left.
        secs: f64,
    },
    /// The server runs one process per client (`"perClient": true`), and the bridge already
    /// holds the most such processes it may: nothing is started for this client.
    #[error("MCP server '{server}' runs one process per client, and the bridge already holds its most ({cap}: MCP_BRIDGE_MAX_SANDBOXES x the servers marked \"perClient\"); nothing was started for this client; the call can be tried again once another client is gone")]
    TooManyClients {
        /// The server.
        server: String,
        /// Per-client processes held at most.
        cap: usize,
    },
    /// The remote server needs sign-in, and nobody in this run can be asked to: the message
    /// names the command that signs in.
    #[error("MCP server '{server}' needs sign-in: run `mcp-code-bridge login {server}` in a terminal, then call again")]
    AuthRequired {
        /// The server.
        server: String,
    },
    /// A `serve` caller's own sign-in to the server did not happen (nobody could be asked, the
    /// question was declined, or no callback came in time): `login` would not help it, so the
    /// message says how the caller signs in.
    #[error("MCP server '{server}' needs you to sign in: your client is asked to on a call to it (accept the sign-in question; a client without elicitation cannot be asked), then call again")]
    CallerSignIn {
        /// The server.
        server: String,
    },
    /// The tool's definition changed (or the tool appeared) since the server's tools were
    /// pinned: refused until the operator approves the change.
    #[error("MCP server '{server}' changed the definition of its tool '{tool}' (or listed it after its tools were pinned); calls to it are refused until the user reviews the change and runs `mcp-code-bridge servers --approve-changes {server}`; its other tools work")]
    ToolChanged {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// The tool ran and reported an error, or the server rejected the request.
    #[error("{server}.{tool}: {message}")]
    Tool {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The server's message.
        message: String,
    },
}

impl UpstreamError {
    /// The error class sent to the sandbox (see ARCHITECTURE.md).
    pub fn kind(&self) -> ErrorKind {
        match self {
            UpstreamError::UnknownServer { .. } => ErrorKind::UnknownServer,
            UpstreamError::NotLoaded { .. } => ErrorKind::NotLoaded,
            UpstreamError::UnknownTool { .. } => ErrorKind::UnknownTool,
            UpstreamError::InvalidArguments { .. } => ErrorKind::InvalidArguments,
            UpstreamError::ToolDisabled { .. } => ErrorKind::ToolDisabled,
            UpstreamError::NotAllowed { .. } => ErrorKind::NotAllowed,
            UpstreamError::Start { .. }
            | UpstreamError::Crashed { .. }
            | UpstreamError::Timeout { .. } => ErrorKind::Server,
            UpstreamError::Tool { .. } => ErrorKind::Tool,
            UpstreamError::TooManyClients { .. } => ErrorKind::LimitExceeded,
            UpstreamError::ToolChanged { .. } => ErrorKind::ToolChanged,
            UpstreamError::AuthRequired { .. } | UpstreamError::CallerSignIn { .. } => {
                ErrorKind::AuthRequired
            }
        }
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// One problem after the signature; several one per line below it.
fn lines(p: &[String]) -> String {
    match p {
        [one] => format!(" {one}"),
        many => many.iter().map(|p| format!("\n  {p}")).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_suggest_a_near_one() {
        let e = UpstreamError::UnknownServer {
            name: "githb".into(),
            available: vec!["github".into(), "memory".into()],
        };
        assert_eq!(
            e.to_string(),
            "unknown MCP server 'githb' (did you mean 'github'?); configured servers: github, memory"
        );
        let e = UpstreamError::UnknownTool {
            server: "everything".into(),
            tool: "ech".into(),
            available: vec!["echo".into(), "get-sum".into()],
        };
        assert_eq!(
            e.to_string(),
            "MCP server 'everything' has no tool 'ech' (did you mean 'echo'?); its tools: echo, get-sum"
        );
        let e = UpstreamError::UnknownServer {
            name: "zzz".into(),
            available: vec!["github".into()],
        };
        assert_eq!(
            e.to_string(),
            "unknown MCP server 'zzz'; configured servers: github"
        );
    }

    #[test]
    fn invalid_arguments_show_the_signature_and_each_problem() {
        let e = UpstreamError::InvalidArguments {
            call: "mcp_github.create_issue".into(),
            signature: "(repo: str, title: str) -> dict".into(),
            problems: vec!["missing required argument 'title'".into()],
        };
        assert_eq!(e.kind().as_str(), "invalid_arguments");
        assert_eq!(
            e.to_string(),
            "mcp_github.create_issue(repo: str, title: str) -> dict: missing required argument 'title'"
        );
        let e = UpstreamError::InvalidArguments {
            call: "mcp_x.t".into(),
            signature: "(a: int) -> dict".into(),
            problems: vec!["p1".into(), "p2".into()],
        };
        assert_eq!(e.to_string(), "mcp_x.t(a: int) -> dict:\n  p1\n  p2");
    }
}
