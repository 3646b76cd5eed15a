//! Reading the server sources: each file's tables and entries (`Reader`), the consent of each
//! definition, and the merge into one definition per name with notes for the dropped ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jsonc_parser::cst::CstRootNode;
use jsonc_parser::ParseOptions;
use serde_json::{Map, Value};

use super::allow_list::AllowList;
use super::clients::{Client, ClientFile, Origin, Scope};
use super::consent::{entry_hash, ClaudeRecords, Consent};
use super::entry::parse_entry;
use super::entry_policy::{for_project, over_users};
use super::expand::{vs_inputs, Expander, Syntax, VsInput};
use super::spec::{ConfigIssue, ProjectEntry, ServerSpec, Sources, Transport};
use crate::shown::{Shown, ShownPath};

/// Reads every source and decides the consent of each definition.
pub(super) fn read_all<'a>(
    sources: &'a Sources,
    env: &'a dyn Fn(&str) -> Option<String>,
) -> Reader<'a> {
    let mut reader = Reader {
        sources,
        env,
        found: Vec::new(),
        pending: Vec::new(),
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
    decide_consent(&mut reader, sources);
    reader
}

pub(super) struct Reader<'a> {
    sources: &'a Sources,
    env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) found: Vec<ServerSpec>,
    /// Every entry of a project's files as written, parsed or not.
    pub(super) pending: Vec<ProjectEntry>,
    pub(super) issues: Vec<ConfigIssue>,
    pub(super) notes: Vec<ConfigIssue>,
}

impl Reader<'_> {
    fn problem(&mut self, file: &Path, message: String) {
        self.issues.push(issue(file, message));
    }

    /// A file of the user's own: every problem counts, values are literal.
    fn read_own(&mut self, file: &Path) {
        let root = match read_root(file, None) {
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
            self.read_table(file, Origin::Own, Syntax::Literal, table, description, &[]);
        }
    }

    /// A client's file: missing files and files without servers are normal.
    fn read_client(&mut self, cf: &ClientFile) {
        let root = match read_root(&cf.path, cf.client.jsonc_options()) {
            Ok(Some(root)) => root,
            Ok(None) => return,
            Err(problem) => return self.issues.push(problem),
        };
        let origin = Origin::Client(cf.client, cf.scope);
        let syntax = cf.client.syntax();
        let inputs = match cf.client {
            Client::VsCode => vs_inputs(&root),
            _ => Vec::new(),
        };
        for key in ["mcpServers", "servers"] {
            match root.get(key) {
                Some(Value::Object(m)) => {
                    self.read_table(&cf.path, origin, syntax, m, None, &inputs)
                }
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
                self.read_table(&cf.path, local, syntax, &m, None, &[]);
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
        inputs: &[VsInput],
    ) {
        for (name, entry) in table {
            let mut x = Expander::new(
                syntax,
                self.env,
                self.sources.home.as_deref(),
                self.sources.project.as_deref(),
            )
            .with_inputs(inputs.to_vec());
            let parsed = parse_entry(file, origin, name, entry, &mut x);
            if origin.needs_consent() {
                self.pending.push(ProjectEntry {
                    name: name.clone(),
                    source: file.to_path_buf(),
                    origin,
                    entry: entry.clone(),
                    sha256: entry_hash(entry),
                    problem: parsed.as_ref().err().map(|p| p.message.clone()),
                    consent: Consent::Needed,
                });
            }
            match parsed {
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
                    if origin.needs_consent() {
                        let (policy, ignored) =
                            for_project((*spec.policy).clone(), &self.sources.limits);
                        spec.policy = Arc::new(policy);
                        for why in ignored {
                            self.notes
                                .push(issue(file, format!("server '{name}': {why}")));
                        }
                    }
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

/// Reads and parses a JSON object file (JSONC with `jsonc` options); `Ok(None)` when it does
/// not exist.
fn read_root(
    file: &Path,
    jsonc: Option<ParseOptions>,
) -> Result<Option<Map<String, Value>>, ConfigIssue> {
    let text = match super::super::text_file::read_text(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(issue(file, format!("cannot read: {e}"))),
    };
    let parsed = match jsonc {
        None => serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()),
        Some(options) => CstRootNode::parse(&text, &options)
            .map(|root| root.to_serde_value().unwrap_or(Value::Null))
            .map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(issue(
            file,
            "expected a JSON object with \"mcpServers\"".into(),
        )),
        Err(e) => Err(issue(file, format!("invalid JSON: {e}"))),
    }
}

/// Fills in the consent of project-scoped definitions (parsed or not) from the client's records,
/// else the bridge's allow list; applies Claude Code's per-project switches; notes the approvals
/// that were found but do not count.
fn decide_consent(reader: &mut Reader<'_>, sources: &Sources) {
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
    // Claude Code's approvals name a server, not its text: an entry whose `headersHelper` (a
    // command) changed since would still count. Such an entry needs `servers --allow`, which
    // pins the entry's text; a refusal in Claude Code's records still counts.
    let consent = |origin: Origin, name: &str, source: &Path, sha256: &str, helper: bool| {
        let by_client = match origin {
            Origin::Client(Client::ClaudeCode, Scope::Project) => claude.decide(name),
            _ => None,
        };
        match by_client {
            Some(Consent::Allowed(_)) if helper => allow.decide(name, source, sha256),
            Some(decided) => decided,
            None => allow.decide(name, source, sha256),
        }
    };
    for p in reader.pending.iter_mut() {
        let helper = p.entry.get("headersHelper").is_some();
        p.consent = consent(p.origin, &p.name, &p.source, &p.sha256, helper);
        if helper && p.origin == Origin::Client(Client::ClaudeCode, Scope::Project) {
            if let (Some(Consent::Allowed(why)), false) =
                (claude.decide(&p.name), p.consent.permits())
            {
                reader.notes.push(issue(
                    &p.source,
                    format!(
                        "server '{}': Claude Code's approval ({why}) names the server, not its headersHelper command, \
                         which may have changed since; the bridge runs that command only once you approve this exact \
                         entry with `mcp-code-bridge servers --allow {}`",
                        Shown(&p.name),
                        Shown(&p.name)
                    ),
                ));
            }
        }
    }
    for spec in reader.found.iter_mut() {
        let Origin::Client(client, _) = spec.origin else {
            continue;
        };
        if client == Client::ClaudeCode && claude.switched_off.contains(&spec.name) {
            spec.disabled = true;
        }
        if spec.origin.needs_consent() {
            // As the entry is written (pending holds every project entry), so that the state
            // listed and the state started agree.
            let helper = reader.pending.iter().any(|p| {
                p.name == spec.name
                    && p.source == spec.source
                    && p.entry.get("headersHelper").is_some()
            });
            spec.consent = consent(
                spec.origin,
                &spec.name,
                &spec.source,
                &spec.entry_sha256,
                helper,
            );
        }
    }
    let claude_project = Origin::Client(Client::ClaudeCode, Scope::Project);
    if reader.pending.iter().any(|p| p.origin == claude_project) {
        for (file, why) in claude.ignored {
            reader.notes.push(issue(&file, why));
        }
    }
}

/// One definition per name: see the module docs for which wins.
pub(super) fn merge(
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
        // A project's definition that wins over one of the user's own keeps the user's
        // policy: the project's rules only add to it.
        if defs[0].origin.needs_consent() {
            if let Some(user) = defs.iter().skip(1).find(|d| !d.origin.needs_consent()) {
                let (policy, note) = over_users(&user.policy, &defs[0].policy);
                if let Some(note) = note {
                    notes.push(issue(&defs[0].source, format!("server '{name}': {note}")));
                }
                // Your own entry's `perClient` stays: a project's may only add isolation.
                let per_client = user.per_client;
                // Sharing the operator's sign-in needs both to say so.
                let shared = user.shared_credentials;
                defs[0].policy = Arc::new(policy);
                defs[0].per_client |= per_client;
                defs[0].shared_credentials &= shared;
            }
        }
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
                tracing::debug!(server = %Shown(&name), dropped = %ShownPath(&dropped.source), "same definition twice");
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
        tracing::debug!(server = %Shown(&name), source = %ShownPath(&kept.source), "server defined");
        specs.push(kept);
    }
    specs
}

pub(super) fn issue(file: &Path, message: String) -> ConfigIssue {
    ConfigIssue {
        source: file.display().to_string(),
        message,
    }
}

/// True when the entry would start this bridge (`mcp-code-bridge run`) again.
pub(super) fn launches_self(spec: &ServerSpec) -> bool {
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
