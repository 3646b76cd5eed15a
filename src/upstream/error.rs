//! Errors of the upstream layer (the user's MCP servers).

/// A failure reaching or using a downstream MCP server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// No server of that name is configured.
    #[error("unknown MCP server '{name}'; configured servers: {}", list(.available))]
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
    #[error("MCP server '{server}' has no tool '{tool}'; its tools: {}", list(.available))]
    UnknownTool {
        /// The server.
        server: String,
        /// The tool asked for.
        tool: String,
        /// The server's tools.
        available: Vec<String>,
    },
    /// The server could not be started or initialized.
    #[error("MCP server '{server}' could not be started: {reason}{}", tail(.stderr_tail))]
    Start {
        /// The server.
        server: String,
        /// Why.
        reason: String,
        /// The server's last stderr lines.
        stderr_tail: String,
    },
    /// The server died or its connection broke during a request.
    #[error("MCP server '{server}' crashed or closed its connection during '{tool}': {reason}{}", tail(.stderr_tail))]
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
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::UnknownServer { .. } => "unknown_server",
            UpstreamError::NotLoaded { .. } => "not_loaded",
            UpstreamError::UnknownTool { .. } => "unknown_tool",
            UpstreamError::Start { .. }
            | UpstreamError::Crashed { .. }
            | UpstreamError::Timeout { .. } => "server",
            UpstreamError::Tool { .. } => "tool",
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

fn tail(t: &str) -> String {
    if t.trim().is_empty() {
        String::new()
    } else {
        format!("\nserver stderr (last lines):\n{}", t.trim_end())
    }
}
