//! MCP server definitions: every `~/MCPs/*.json`, `MCP_SERVERS_CONFIG`, and (opt-in) the
//! common MCP clients' config files, parsed into [`ServerSpec`]s with provenance and consent.
//!
//! A broken file or entry becomes a problem ([`ConfigIssue`]) and is skipped; the rest load.
//! When a name is defined more than once, the definition that may start wins over one that
//! needs consent, then the higher [`Origin::rank`] (the user's own files, then each client's
//! own precedence); the others are dropped with a note naming both files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::clients::{Client, ClientFile, Origin, Scope};
use super::consent::{AllowList, ClaudeRecords, Consent};
use super::entry::parse_entry;
use super::expand::{Expander, Syntax};

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
    /// Legacy HTTP+SSE (listed, but not loadable: rmcp has no client for it).
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
    /// `"disabledTools"`: tools hidden from the sandbox and refused.
    pub disabled_tools: Vec<String>,
    /// SHA-256 of the entry as written, which `servers --allow` records.
    pub entry_sha256: String,
    /// Values that came from the environment through variable expansion: kept out of messages.
    pub secrets: Vec<String>,
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
            disabled_tools: Vec::new(),
            entry_sha256: String::new(),
            secrets: Vec::new(),
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

    /// Whether `tool` is hidden and refused by `disabledTools`.
    pub fn tool_disabled(&self, tool: &str) -> bool {
        self.disabled_tools.iter().any(|t| t == tool)
    }

    /// Same server, same options: a duplicate that needs no note.
    fn same_definition(&self, other: &ServerSpec) -> bool {
        self.transport == other.transport && self.disabled_tools == other.disabled_tools
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
}

/// All server definitions found, sorted by name, plus the problems and notes met.
#[derive(Debug, Clone, Default)]
pub struct Servers {
    /// Valid definitions, sorted by name.
    pub specs: Vec<ServerSpec>,
    /// Real problems: broken files and entries, variables that cannot be expanded.
    pub issues: Vec<ConfigIssue>,
    /// Decisions worth knowing that need no fixing: which of two definitions of a name was
    /// kept, the bridge's own entry skipped.
    pub notes: Vec<ConfigIssue>,
}

impl Servers {
    /// The definition named `name`.
    pub fn get(&self, name: &str) -> Option<&ServerSpec> {
        self.specs
            .binary_search_by(|s| s.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.specs[i])
    }

    /// Sorted server names.
    pub fn names(&self) -> Vec<String> {
        self.specs.iter().map(|s| s.name.clone()).collect()
    }
}

/// Reads every source, expanding variables from the process environment; never fails as a
/// whole.
pub fn discover(sources: &Sources) -> Servers {
    discover_with_env(sources, &|k| std::env::var(k).ok())
}

/// [`discover`] with variables read through `env`.
pub fn discover_with_env(sources: &Sources, env: &dyn Fn(&str) -> Option<String>) -> Servers {
    let Reader {
        found,
        mut issues,
        mut notes,
        ..
    } = read_all(sources, env);
    let specs = merge(found, &mut issues, &mut notes);
    for i in &issues {
        tracing::warn!(source = %i.source, "server config: {}", i.message);
    }
    for n in &notes {
        tracing::debug!(source = %n.source, "server config: {}", n.message);
    }
    Servers {
        specs,
        issues,
        notes,
    }
}

/// Every definition from a project's files, with its consent, before precedence is applied
/// (so a definition shadowed while unapproved is here too): what `servers --allow` approves.
pub fn project_definitions(
    sources: &Sources,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<ServerSpec> {
    let mut found = read_all(sources, env).found;
    found.retain(|s| s.origin.needs_consent());
    found
}

/// Reads every source and decides the consent of each definition.
fn read_all<'a>(sources: &'a Sources, env: &'a dyn Fn(&str) -> Option<String>) -> Reader<'a> {
    let mut reader = Reader {
        sources,
        env,
        found: Vec::new(),
        issues: Vec::new(),
        notes: Vec::new(),
    };
    let mut own = Vec::new();
    if let Some(dir) = &sources.dir {
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                let mut jsons: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
                    .collect();
                jsons.sort();
                own.extend(jsons);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => reader.problem(dir, format!("cannot read the directory: {e}")),
        }
    }
    own.extend(sources.extra_file.iter().cloned());
    for file in &own {
        reader.read_own(file);
    }
    for cf in &sources.client_files {
        reader.read_client(cf);
    }
    decide_consent(&mut reader.found, sources);
    reader
}

struct Reader<'a> {
    sources: &'a Sources,
    env: &'a dyn Fn(&str) -> Option<String>,
    found: Vec<ServerSpec>,
    issues: Vec<ConfigIssue>,
    notes: Vec<ConfigIssue>,
}

impl Reader<'_> {
    fn problem(&mut self, file: &Path, message: String) {
        self.issues.push(issue(file, message));
    }

    /// A file of the user's own: every problem counts, values are literal.
    fn read_own(&mut self, file: &Path) {
        let root = match read_root(file) {
            Ok(Some(root)) => root,
            Ok(None) => return self.problem(file, "cannot read: not found".into()),
            Err(problem) => return self.issues.push(problem),
        };
        let mut tables = Vec::new();
        for key in ["mcpServers", "servers"] {
            match root.get(key) {
                Some(Value::Object(m)) => tables.push(m),
                Some(_) => return self.problem(file, format!("\"{key}\" must be an object")),
                None => {}
            }
        }
        if tables.is_empty() {
            return self.problem(file, "no \"mcpServers\" object".into());
        }
        let description = root.get("description").and_then(Value::as_str);
        for table in tables {
            self.read_table(file, Origin::Own, Syntax::Literal, table, description);
        }
    }

    /// A client's file: missing files and files without servers are normal.
    fn read_client(&mut self, cf: &ClientFile) {
        let root = match read_root(&cf.path) {
            Ok(Some(root)) => root,
            Ok(None) => return,
            Err(problem) => return self.issues.push(problem),
        };
        let origin = Origin::Client(cf.client, cf.scope);
        let syntax = cf.client.syntax();
        for key in ["mcpServers", "servers"] {
            match root.get(key) {
                Some(Value::Object(m)) => self.read_table(&cf.path, origin, syntax, m, None),
                Some(Value::Null) | None => {}
                Some(_) => self.problem(&cf.path, format!("\"{key}\" must be an object")),
            }
        }
        if cf.client == Client::ClaudeCode && cf.scope == Scope::User {
            // `~/.claude.json` also holds the local scope: the project's own section.
            let local = self.sources.project.as_deref().and_then(|p| {
                let projects = root.get("projects")?.as_object()?;
                p.ancestors()
                    .find_map(|dir| projects.get(dir.to_str()?))?
                    .get("mcpServers")?
                    .as_object()
                    .cloned()
            });
            if let Some(m) = local {
                let local = Origin::Client(Client::ClaudeCode, Scope::Local);
                self.read_table(&cf.path, local, syntax, &m, None);
            }
        }
    }

    fn read_table(
        &mut self,
        file: &Path,
        origin: Origin,
        syntax: Syntax,
        table: &Map<String, Value>,
        file_description: Option<&str>,
    ) {
        for (name, entry) in table {
            let mut x = Expander::new(
                syntax,
                self.env,
                self.sources.home.as_deref(),
                self.sources.project.as_deref(),
            );
            match parse_entry(file, origin, name, entry, &mut x) {
                Err(problem) => self.issues.push(problem),
                Ok(spec) if !self.sources.allow_self && launches_self(&spec) => {
                    let skipped = format!(
                        "server '{}' would launch mcp-code-bridge itself; skipped (set MCP_BRIDGE_ALLOW_SELF_SERVER=1 to allow)",
                        spec.name
                    );
                    if origin == Origin::Own {
                        self.problem(file, skipped);
                    } else {
                        // A client's entry for this bridge is how the bridge got started.
                        self.notes.push(issue(file, skipped));
                    }
                }
                Ok(mut spec) => {
                    if spec.description.is_none() {
                        spec.description = file_description.map(str::to_string);
                    }
                    spec.secrets = x.secrets;
                    self.found.push(spec);
                }
            }
        }
    }
}

/// Reads and parses a JSON object file; `Ok(None)` when it does not exist.
fn read_root(file: &Path) -> Result<Option<Map<String, Value>>, ConfigIssue> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(issue(file, format!("cannot read: {e}"))),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(issue(
            file,
            "expected a JSON object with \"mcpServers\"".into(),
        )),
        Err(e) => Err(issue(file, format!("invalid JSON: {e}"))),
    }
}

/// Fills in the consent of project-scoped definitions from the client's records, else the
/// bridge's allow list; applies Claude Code's per-project switches.
fn decide_consent(found: &mut [ServerSpec], sources: &Sources) {
    if sources.client_files.is_empty() {
        return;
    }
    let claude_json = sources
        .client_files
        .iter()
        .find(|f| f.client == Client::ClaudeCode && f.scope == Scope::User)
        .map(|f| f.path.as_path());
    let claude = ClaudeRecords::read(
        claude_json,
        sources.claude_settings.as_deref(),
        sources.project.as_deref(),
    );
    let allow = sources
        .state_dir
        .as_deref()
        .map(AllowList::load)
        .unwrap_or_default();
    for spec in found.iter_mut() {
        let Origin::Client(client, scope) = spec.origin else {
            continue;
        };
        if client == Client::ClaudeCode && claude.switched_off.contains(&spec.name) {
            spec.disabled = true;
        }
        if scope != Scope::Project {
            continue;
        }
        let by_client = match client {
            Client::ClaudeCode => claude.decide(&spec.name),
            _ => None,
        };
        spec.consent =
            by_client.unwrap_or_else(|| allow.decide(&spec.name, &spec.source, &spec.entry_sha256));
    }
}

/// One definition per name: see the module docs for which wins.
fn merge(
    found: Vec<ServerSpec>,
    issues: &mut Vec<ConfigIssue>,
    notes: &mut Vec<ConfigIssue>,
) -> Vec<ServerSpec> {
    let mut by_name: BTreeMap<String, Vec<ServerSpec>> = BTreeMap::new();
    for spec in found {
        by_name.entry(spec.name.clone()).or_default().push(spec);
    }
    let mut specs = Vec::with_capacity(by_name.len());
    for (name, mut defs) in by_name {
        // Stable: among equals, the first read (file order) wins.
        defs.sort_by_key(|s| (!s.consent.permits(), s.origin.rank()));
        let mut defs = defs.into_iter();
        let Some(kept) = defs.next() else { continue };
        for dropped in defs {
            if dropped.origin == Origin::Own && kept.origin == Origin::Own {
                issues.push(issue(
                    &dropped.source,
                    format!(
                        "server '{name}' is already defined in {}; this one is ignored",
                        kept.source.display()
                    ),
                ));
            } else if kept.same_definition(&dropped) {
                tracing::debug!(server = %name, dropped = %dropped.source.display(), "same definition twice");
            } else {
                let why = if !dropped.consent.permits() && kept.consent.permits() {
                    " (it is not approved)"
                } else {
                    ""
                };
                notes.push(issue(
                    &dropped.source,
                    format!(
                        "server '{name}': using the definition in {} ({}); the one in {} ({}) is ignored{why}",
                        kept.source.display(),
                        kept.origin.label(),
                        dropped.source.display(),
                        dropped.origin.label(),
                    ),
                ));
            }
        }
        tracing::debug!(server = %name, source = %kept.source.display(), "server defined");
        specs.push(kept);
    }
    specs
}

fn issue(file: &Path, message: String) -> ConfigIssue {
    ConfigIssue {
        source: file.display().to_string(),
        message,
    }
}

/// True when the entry would start this bridge (`mcp-code-bridge run`) again.
fn launches_self(spec: &ServerSpec) -> bool {
    let Transport::Stdio { command, args, .. } = &spec.transport else {
        return false;
    };
    let is_bridge = |s: &str| {
        Path::new(s)
            .file_name()
            .and_then(|f| f.to_str())
            .is_some_and(|f| f.starts_with("mcp-code-bridge"))
    };
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    let same_file = me.is_some() && std::fs::canonicalize(command).ok() == me;
    (is_bridge(command) || same_file || args.iter().any(|a| is_bridge(a)))
        && args.iter().any(|a| a == "run")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn reads_all_transports_with_provenance_and_reports_broken_entries() {
        let d = tempfile::tempdir().expect("tempdir");
        write(
            d.path(),
            "a.json",
            r#"{"mcpServers": {
            "gh": {"command": "npx", "args": ["-y", "gh-mcp"], "env": {"TOKEN": "x", "N": 1}, "cwd": "/tmp"},
            "remote": {"type": "http", "url": "https://example.test/mcp", "headers": {"Authorization": "Bearer t"}},
            "old": {"type": "sse", "url": "http://localhost:1/sse", "disabled": true},
            "bad-type": {"type": "carrier-pigeon"},
            "bad-args": {"command": "x", "args": "y"},
            "no-cmd": {"args": []},
            "url-only": {"url": "http://x", "headers": {"A": "b"}}
        }}"#,
        );
        write(d.path(), "b.json", "{ not json");
        write(
            d.path(),
            "c.json",
            r#"{"mcpServers": {"gh": {"command": "other"}}}"#,
        );
        write(d.path(), "notes.txt", "ignored");
        let s = discover(&Sources {
            dir: Some(d.path().into()),
            ..Default::default()
        });
        // A remote entry without "type" is streamable HTTP, as Cursor reads it.
        assert_eq!(s.names(), ["gh", "old", "remote", "url-only"]);
        assert_eq!(
            s.get("url-only").expect("url-only").transport.kind(),
            "http"
        );
        let gh = s.get("gh").expect("gh");
        assert_eq!(gh.source, d.path().join("a.json"));
        let Transport::Stdio { env, args, cwd, .. } = &gh.transport else {
            panic!("stdio")
        };
        assert_eq!(env.get("N").map(String::as_str), Some("1"));
        assert_eq!(args, &["-y", "gh-mcp"]);
        assert_eq!(cwd.as_deref(), Some(Path::new("/tmp")));
        assert!(s.get("old").expect("old").disabled);
        assert_eq!(s.get("remote").expect("remote").transport.kind(), "http");
        let all = s
            .issues
            .iter()
            .map(|i| format!("{}: {}", i.source, i.message))
            .collect::<Vec<_>>()
            .join("\n");
        for needle in [
            "carrier-pigeon",
            "\"args\" must be an array",
            "missing \"command\"",
            "b.json: invalid JSON",
            "already defined",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in\n{all}");
        }
    }

    #[test]
    fn extra_file_vscode_format_and_self_launch() {
        let d = tempfile::tempdir().expect("tempdir");
        let extra = write(
            d.path(),
            "extra.json",
            r#"{"servers": {"vs": {"type": "stdio", "command": "node"}},
            "mcpServers": {"me": {"command": "/usr/local/bin/mcp-code-bridge", "args": ["run"]}}}"#,
        );
        let s = discover(&Sources {
            extra_file: Some(extra.clone()),
            ..Default::default()
        });
        assert_eq!(s.names(), ["vs"]);
        assert!(s
            .issues
            .iter()
            .any(|i| i.message.contains("MCP_BRIDGE_ALLOW_SELF_SERVER")));
        let s = discover(&Sources {
            extra_file: Some(extra),
            allow_self: true,
            ..Default::default()
        });
        assert_eq!(s.names(), ["me", "vs"]);
    }

    #[test]
    fn client_configs_come_after_mcps_and_missing_ones_are_silent() {
        let d = tempfile::tempdir().expect("tempdir");
        let mcps = d.path().join("MCPs");
        std::fs::create_dir(&mcps).expect("mkdir");
        write(
            &mcps,
            "x.json",
            r#"{"mcpServers": {"shared": {"command": "mine"}}}"#,
        );
        let cursor = write(
            d.path(),
            "cursor.json",
            r#"{"mcpServers": {"shared": {"command": "theirs"}, "cur": {"command": "c"}}}"#,
        );
        let s = discover(&Sources {
            dir: Some(mcps),
            client_files: [d.path().join("absent.json"), cursor]
                .into_iter()
                .map(|path| ClientFile {
                    client: Client::Cursor,
                    scope: Scope::User,
                    path,
                })
                .collect(),
            ..Default::default()
        });
        assert_eq!(s.names(), ["cur", "shared"]);
        let Transport::Stdio { command, .. } = &s.get("shared").expect("shared").transport else {
            panic!()
        };
        assert_eq!(command, "mine", "~/MCPs wins on a name clash");
        assert!(s.issues.is_empty(), "{:?}", s.issues);
        assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
        assert!(
            s.notes[0].message.contains("x.json (own config)"),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn config_examples_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config-examples");
        let s = discover(&Sources {
            dir: Some(dir),
            ..Default::default()
        });
        assert!(s.issues.is_empty(), "{:?}", s.issues);
        assert_eq!(s.names(), ["github", "legacy", "remote-docs", "time"]);
        let kinds: Vec<&str> = s.specs.iter().map(|x| x.transport.kind()).collect();
        assert_eq!(kinds, ["stdio", "sse", "http", "stdio"]);
    }
}
