//! Where the common MCP clients keep their server lists (read only with
//! `MCP_BRIDGE_IMPORT_CLIENT_CONFIGS=1`), which scope each file is, and which variable syntax and
//! precedence each client applies, and how its files are parsed. GUIDE.md ("Client configs")
//! cites the clients' docs.

use std::path::{Path, PathBuf};

use jsonc_parser::ParseOptions;

use super::expand::Syntax;

/// An MCP client whose config files the bridge can import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Client {
    /// Claude Code: `~/.claude.json` and a project's `.mcp.json`.
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json` and a project's `.cursor/mcp.json`.
    Cursor,
    /// VS Code: the profile's `mcp.json` and a workspace's `.vscode/mcp.json`.
    VsCode,
    /// Claude Desktop: `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Windsurf: `~/.codeium/windsurf/mcp_config.json`.
    Windsurf,
}

impl Client {
    /// Every client, in precedence order.
    pub const ALL: [Client; 5] = [
        Client::ClaudeCode,
        Client::Cursor,
        Client::VsCode,
        Client::ClaudeDesktop,
        Client::Windsurf,
    ];

    /// A short lowercase name for command lines and file names (`claude-code`, `vscode`).
    pub fn id(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::VsCode => "vscode",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Windsurf => "windsurf",
        }
    }

    /// The client's name as users know it.
    pub fn label(self) -> &'static str {
        match self {
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::VsCode => "VS Code",
            Client::ClaudeDesktop => "Claude Desktop",
            Client::Windsurf => "Windsurf",
        }
    }

    /// The options its config files are parsed with: VS Code's `mcp.json` is JSONC (its schema
    /// sets `allowComments` and `allowTrailingCommas`); the other clients read plain JSON
    /// (`None`).
    pub fn jsonc_options(self) -> Option<ParseOptions> {
        (self == Client::VsCode).then(|| ParseOptions {
            allow_comments: true,
            allow_trailing_commas: true,
            allow_loose_object_property_names: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            ..ParseOptions::default()
        })
    }

    /// The variable syntax the client expands in its server entries.
    pub fn syntax(self) -> Syntax {
        match self {
            Client::ClaudeCode => Syntax::ClaudeCode,
            Client::Cursor => Syntax::Cursor,
            Client::VsCode => Syntax::VsCode,
            Client::ClaudeDesktop => Syntax::Literal,
            Client::Windsurf => Syntax::Windsurf,
        }
    }
}

/// Who wrote a definition, which decides whether it needs consent and which one wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Claude Code's local scope (`~/.claude.json`, the project's section): the user's own.
    Local,
    /// A file inside the project (a repository): needs consent.
    Project,
    /// The client's user-wide file: the user's own.
    User,
}

impl Scope {
    /// `local`, `project` or `user`.
    pub fn label(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::Project => "project",
            Scope::User => "user",
        }
    }
}

/// One client config file to import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFile {
    /// The client that owns it.
    pub client: Client,
    /// Its scope (`~/.claude.json` also holds local-scope entries, found per project).
    pub scope: Scope,
    /// Where it is.
    pub path: PathBuf,
}

/// The client config files read with `MCP_BRIDGE_IMPORT_CLIENT_CONFIGS=1`, for the project in
/// `cwd`; `claude_dir` is Claude Code's `CLAUDE_CONFIG_DIR` when set.
pub fn client_config_files(
    home: Option<&Path>,
    cwd: Option<&Path>,
    claude_dir: Option<&Path>,
) -> Vec<ClientFile> {
    let mut out = Vec::new();
    let mut add = |client, scope, path: PathBuf| {
        out.push(ClientFile {
            client,
            scope,
            path,
        })
    };
    if let Some(cwd) = cwd {
        add(Client::ClaudeCode, Scope::Project, cwd.join(".mcp.json"));
        add(Client::Cursor, Scope::Project, cwd.join(".cursor/mcp.json"));
        add(Client::VsCode, Scope::Project, cwd.join(".vscode/mcp.json"));
    }
    match (claude_dir, home) {
        (Some(d), _) => add(Client::ClaudeCode, Scope::User, d.join(".claude.json")),
        (None, Some(h)) => add(Client::ClaudeCode, Scope::User, h.join(".claude.json")),
        (None, None) => {}
    }
    if let Some(h) = home {
        add(Client::Cursor, Scope::User, h.join(".cursor/mcp.json"));
        add(
            Client::VsCode,
            Scope::User,
            h.join(".config/Code/User/mcp.json"),
        );
        add(
            Client::VsCode,
            Scope::User,
            h.join("Library/Application Support/Code/User/mcp.json"),
        );
        add(
            Client::ClaudeDesktop,
            Scope::User,
            h.join(".config/Claude/claude_desktop_config.json"),
        );
        add(
            Client::ClaudeDesktop,
            Scope::User,
            h.join("Library/Application Support/Claude/claude_desktop_config.json"),
        );
        add(
            Client::Windsurf,
            Scope::User,
            h.join(".codeium/windsurf/mcp_config.json"),
        );
    }
    out
}

/// Where a definition came from: the user's own files or a client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `~/MCPs/*.json` or `MCP_SERVERS_CONFIG`.
    Own,
    /// An imported client file.
    Client(Client, Scope),
}

impl Origin {
    /// Precedence: lower wins. The user's own files first; then by client (Claude Code,
    /// Cursor, VS Code, Claude Desktop, Windsurf), and within a client, local > project > user,
    /// as Claude Code, Cursor and VS Code each define it.
    pub fn rank(self) -> (u8, Option<Client>, Option<Scope>) {
        match self {
            Origin::Own => (0, None, None),
            Origin::Client(c, s) => (1, Some(c), Some(s)),
        }
    }

    /// Whether a definition from here needs the user's consent before it starts.
    pub fn needs_consent(self) -> bool {
        matches!(self, Origin::Client(_, Scope::Project))
    }

    /// `own config`, or e.g. `Claude Code, project scope`.
    pub fn label(self) -> String {
        match self {
            Origin::Own => "own config".into(),
            Origin::Client(c, s) => format!("{}, {} scope", c.label(), s.label()),
        }
    }
}
