//! MCP server definitions: every `~/MCPs/*.json`, `MCP_SERVERS_CONFIG`, and (opt-in) the
//! common MCP clients' config files, parsed leniently into [`ServerSpec`]s with provenance.
//!
//! A broken file or entry becomes a [`ConfigIssue`] and is skipped; the rest load. The first
//! definition of a name wins (sources are read in a fixed order, `~/MCPs` first, files in
//! sorted order); later ones are reported as shadowed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

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
    /// How to reach it.
    pub transport: Transport,
    /// `"disabled": true`: still discoverable and lazily loadable.
    pub disabled: bool,
    /// The file that defined it.
    pub source: PathBuf,
    /// The entry's `"description"` (else its file's top-level one), shown by discovery.
    pub description: Option<String>,
}

/// A problem found while reading server definitions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigIssue {
    /// The file (and entry) concerned.
    pub source: String,
    /// What is wrong.
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
    pub client_files: Vec<PathBuf>,
    /// `MCP_BRIDGE_ALLOW_SELF_SERVER=1`.
    pub allow_self: bool,
}

/// All server definitions found, sorted by name, plus the problems met.
#[derive(Debug, Clone, Default)]
pub struct Servers {
    /// Valid definitions, sorted by name.
    pub specs: Vec<ServerSpec>,
    /// Broken files and entries, shadowed duplicates, skipped self-references.
    pub issues: Vec<ConfigIssue>,
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

/// Reads every source; never fails as a whole.
pub fn discover(sources: &Sources) -> Servers {
    let mut found: BTreeMap<String, ServerSpec> = BTreeMap::new();
    let mut issues = Vec::new();
    let mut files = Vec::new();
    if let Some(dir) = &sources.dir {
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                let mut jsons: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
                    .collect();
                jsons.sort();
                files.extend(jsons);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => issues.push(issue(dir, format!("cannot read the directory: {e}"))),
        }
    }
    files.extend(sources.extra_file.iter().cloned());
    let client_start = files.len();
    files.extend(sources.client_files.iter().cloned());
    for (i, file) in files.iter().enumerate() {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && i >= client_start => continue,
            Err(e) => {
                issues.push(issue(file, format!("cannot read: {e}")));
                continue;
            }
        };
        for parsed in parse_file(file, &text) {
            match parsed {
                Err(problem) => issues.push(problem),
                Ok(spec) if !sources.allow_self && launches_self(&spec) => issues.push(issue(
                    file,
                    format!(
                        "server '{}' would launch mcp-code-bridge itself; skipped (set MCP_BRIDGE_ALLOW_SELF_SERVER=1 to allow)",
                        spec.name
                    ),
                )),
                Ok(spec) => match found.get(&spec.name) {
                    Some(first) => issues.push(issue(
                        file,
                        format!("server '{}' is already defined in {}; this one is ignored", spec.name, first.source.display()),
                    )),
                    None => {
                        tracing::debug!(server = %spec.name, source = %file.display(), "server defined");
                        found.insert(spec.name.clone(), spec);
                    }
                },
            }
        }
    }
    for i in &issues {
        tracing::warn!(source = %i.source, "server config: {}", i.message);
    }
    Servers {
        specs: found.into_values().collect(),
        issues,
    }
}

fn issue(file: &Path, message: String) -> ConfigIssue {
    ConfigIssue {
        source: file.display().to_string(),
        message,
    }
}

/// Parses one config file: `{"mcpServers": {...}}`, VS Code's `{"servers": {...}}`, or Claude
/// Code's `~/.claude.json` (top level plus `projects.<cwd>.mcpServers`).
pub fn parse_file(file: &Path, text: &str) -> Vec<Result<ServerSpec, ConfigIssue>> {
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![Err(issue(file, format!("invalid JSON: {e}")))],
    };
    let Some(obj) = root.as_object() else {
        return vec![Err(issue(
            file,
            "expected a JSON object with \"mcpServers\"".into(),
        ))];
    };
    let mut tables: Vec<&Map<String, Value>> = Vec::new();
    for key in ["mcpServers", "servers"] {
        match obj.get(key) {
            Some(Value::Object(m)) => tables.push(m),
            Some(_) => return vec![Err(issue(file, format!("\"{key}\" must be an object")))],
            None => {}
        }
    }
    if let (Some(Value::Object(projects)), Ok(cwd)) = (obj.get("projects"), std::env::current_dir())
    {
        if let Some(Value::Object(m)) = projects
            .get(&cwd.display().to_string())
            .and_then(|p| p.get("mcpServers"))
        {
            tables.push(m);
        }
    }
    if tables.is_empty() {
        return vec![Err(issue(file, "no \"mcpServers\" object".into()))];
    }
    let file_description = obj.get("description").and_then(Value::as_str);
    tables
        .into_iter()
        .flat_map(|t| t.iter())
        .map(|(name, entry)| {
            parse_entry(file, name, entry).map(|mut spec| {
                if spec.description.is_none() {
                    spec.description = file_description.map(str::to_string);
                }
                spec
            })
        })
        .collect()
}

fn parse_entry(file: &Path, name: &str, entry: &Value) -> Result<ServerSpec, ConfigIssue> {
    let err = |m: String| ConfigIssue {
        source: format!("{} (server '{name}')", file.display()),
        message: m,
    };
    if name.trim().is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
        return Err(err("invalid server name".into()));
    }
    let obj = entry
        .as_object()
        .ok_or_else(|| err("the entry must be an object".into()))?;
    let string = |key: &str| -> Result<Option<String>, ConfigIssue> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(err(format!("\"{key}\" must be a string"))),
        }
    };
    let map = |key: &str| -> Result<BTreeMap<String, String>, ConfigIssue> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(n) => Ok((k.clone(), n.to_string())),
                    Value::Bool(b) => Ok((k.clone(), b.to_string())),
                    _ => Err(err(format!("\"{key}.{k}\" must be a string"))),
                })
                .collect(),
            Some(_) => Err(err(format!("\"{key}\" must be an object of strings"))),
        }
    };
    let disabled = match obj.get("disabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(err("\"disabled\" must be true or false".into())),
    };
    let kind = string("type")?
        .or(string("transport")?)
        .map(|k| k.to_ascii_lowercase());
    let transport = match kind.as_deref() {
        None | Some("stdio") => {
            let command = string("command")?
                .filter(|c| !c.trim().is_empty())
                .ok_or_else(|| {
                    err(if kind.is_none() && obj.contains_key("url") {
                        "has \"url\" but no \"type\"; use \"type\": \"http\" (or \"sse\")".into()
                    } else {
                        "missing \"command\"".into()
                    })
                })?;
            let args = match obj.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| err("\"args\" must be an array of strings".into()))
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(err("\"args\" must be an array of strings".into())),
            };
            Transport::Stdio {
                command,
                args,
                env: map("env")?,
                cwd: string("cwd")?.map(PathBuf::from),
            }
        }
        Some("http" | "streamable-http" | "streamablehttp" | "streamable_http") => {
            Transport::Http {
                url: url(string("url")?, &err)?,
                headers: map("headers")?,
            }
        }
        Some("sse") => Transport::Sse {
            url: url(string("url")?, &err)?,
            headers: map("headers")?,
        },
        Some(other) => {
            return Err(err(format!(
                "unknown transport type \"{other}\" (expected stdio, http or sse)"
            )))
        }
    };
    Ok(ServerSpec {
        name: name.to_string(),
        transport,
        disabled,
        source: file.to_path_buf(),
        description: string("description")?,
    })
}

fn url(u: Option<String>, err: &impl Fn(String) -> ConfigIssue) -> Result<String, ConfigIssue> {
    let u = u.ok_or_else(|| err("missing \"url\"".into()))?;
    if u.starts_with("http://") || u.starts_with("https://") {
        Ok(u)
    } else {
        Err(err(format!(
            "\"url\" must start with http:// or https://, got {u:?}"
        )))
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
            "url-only": {"url": "http://x"}
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
        assert_eq!(s.names(), ["gh", "old", "remote"]);
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
            "use \"type\": \"http\"",
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
            client_files: vec![d.path().join("absent.json"), cursor],
            ..Default::default()
        });
        assert_eq!(s.names(), ["cur", "shared"]);
        let Transport::Stdio { command, .. } = &s.get("shared").expect("shared").transport else {
            panic!()
        };
        assert_eq!(command, "mine", "~/MCPs wins on a name clash");
        assert_eq!(s.issues.len(), 1, "{:?}", s.issues);
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
