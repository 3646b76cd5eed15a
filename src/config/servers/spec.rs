//! The shared types of server configuration: what a definition is ([`ServerSpec`],
//! [`Transport`]), where definitions are read from ([`Sources`]), a problem met reading them
//! ([`ConfigIssue`]) and a project's entry as written ([`ProjectEntry`]). A leaf: the files
//! that read, parse and merge definitions all name these, and none of them is named here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::clients::{ClientFile, Origin};
use super::consent::Consent;
use super::tool_rules::Limits;
use super::tool_rules::{Refusal, ServerPolicy};

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Transport {
    /// A child process speaking MCP on stdio.
    Stdio {
        /// Program to run.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// Endpoint URL.
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, String>,
    },
    /// Legacy HTTP+SSE: a GET event stream naming the URL to POST messages to.
    Sse {
        /// Endpoint URL.
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    /// `stdio`, `http` or `sse`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
            Transport::Sse { .. } => "sse",
        }
    }
}

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Its name (the key in `mcpServers`).
    pub name: String,
    /// How to reach it (variables already expanded).
    pub transport: Transport,
    /// `"disabled": true` (or switched off in Claude Code): discoverable, loaded only when a
    /// call names it, never started for indexing.
    pub disabled: bool,
    /// The file that defined it.
    pub source: PathBuf,
    /// The entry's `"description"` (else its file's top-level one), shown by discovery.
    pub description: Option<String>,
    /// Who wrote the definition.
    pub origin: Origin,
    /// Whether it may be started.
    pub consent: Consent,
    /// The operator's policy for this server (tool rules, limit overrides).
    pub policy: Arc<ServerPolicy>,
    /// SHA-256 of the entry as written, which `servers --allow` records.
    pub entry_sha256: String,
    /// Values that came from the environment through variable expansion: kept out of messages.
    pub secrets: Vec<String>,
    /// `"perClient": true`: under `serve --http`, one process of the server per client sandbox
    /// instead of one shared by every client (stdio `run` and `exec` have one client anyway).
    pub per_client: bool,
    /// `"sharedCredentials": true`: under `serve --http`, every caller reaches this remote
    /// server with the operator's own sign-in (from `login`) instead of each caller's own.
    pub shared_credentials: bool,
    /// A remote entry's `"oauth"`: its pre-registered client and sign-in options.
    pub oauth: Option<Arc<super::oauth::OAuthEntry>>,
    /// A remote entry's `"headersHelper"` (Claude Code's files and the user's own): a shell
    /// command whose JSON output adds headers on every connection.
    pub headers_helper: Option<String>,
}

impl ServerSpec {
    /// A definition from the user's own files with no options set.
    pub fn new(name: &str, transport: Transport, source: &Path) -> Self {
        ServerSpec {
            name: name.to_string(),
            transport,
            disabled: false,
            source: source.to_path_buf(),
            description: None,
            origin: Origin::Own,
            consent: Consent::Own,
            policy: Arc::default(),
            entry_sha256: String::new(),
            secrets: Vec::new(),
            per_client: false,
            shared_credentials: false,
            oauth: None,
            headers_helper: None,
        }
    }

    /// `text` with every value that came from variable expansion replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            out = out.replace(s.as_str(), "[redacted]");
        }
        out
    }

    /// Whether a caller under `serve --http` reaches this server with its own sign-in: a
    /// remote (`http`/`sse`) server whose entry does not say `"sharedCredentials": true`.
    pub fn per_caller_identity(&self) -> bool {
        !self.shared_credentials && !matches!(self.transport, Transport::Stdio { .. })
    }

    /// Why `tool` is hidden and refused by the entry's `allowedTools` / `disabledTools`, if
    /// it is.
    pub fn tool_refusal(&self, tool: &str) -> Option<Refusal> {
        self.policy.tools.refusal(tool)
    }

    /// Same server, same options: a duplicate that needs no note.
    pub(super) fn same_definition(&self, other: &ServerSpec) -> bool {
        self.transport == other.transport
            && self.policy == other.policy
            && self.per_client == other.per_client
            && self.shared_credentials == other.shared_credentials
            && self.oauth == other.oauth
            && self.headers_helper == other.headers_helper
    }
}

/// A problem or note found while reading server definitions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigIssue {
    /// The file (and entry) concerned.
    pub source: String,
    /// What is wrong, or what was decided.
    pub message: String,
}

/// Where to look for server definitions.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `~/MCPs` or `MCP_BRIDGE_CONFIG_DIR`.
    pub dir: Option<PathBuf>,
    /// `MCP_SERVERS_CONFIG`.
    pub extra_file: Option<PathBuf>,
    /// Client config files to import (empty unless `MCP_BRIDGE_IMPORT_CLIENT_CONFIGS=1`).
    pub client_files: Vec<ClientFile>,
    /// `MCP_BRIDGE_ALLOW_SELF_SERVER=1`.
    pub allow_self: bool,
    /// The user's home folder (`${userHome}`, Claude Code's settings).
    pub home: Option<PathBuf>,
    /// The project: the bridge's working directory (`${workspaceFolder}`, project records).
    pub project: Option<PathBuf>,
    /// Claude Code's user settings file (`~/.claude/settings.json`).
    pub claude_settings: Option<PathBuf>,
    /// Where `mcp-code-bridge servers --allow` records approvals.
    pub state_dir: Option<PathBuf>,
    /// The limit settings: a project's file may only set a server's limits lower.
    pub limits: Limits,
}

/// One entry of a project's file, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectEntry {
    /// The server's name (its key).
    pub name: String,
    /// The file that holds it.
    pub source: PathBuf,
    /// Its client and scope.
    pub origin: Origin,
    /// The entry as written (variables not expanded).
    pub entry: Value,
    /// SHA-256 of the entry as written: what an approval pins.
    pub sha256: String,
    /// Why it cannot be used as it is now (a variable not set, a bad field), if it cannot.
    pub problem: Option<String>,
    /// Whether it may start.
    pub consent: Consent,
}
