//! MCP server definitions: every `~/MCPs/*.json`, `MCP_SERVERS_CONFIG`, and (opt-in) the
//! common MCP clients' config files, parsed into [`ServerSpec`]s with provenance and consent.
//!
//! A broken file or entry becomes a problem ([`ConfigIssue`]) and is skipped; the rest load.
//! When a name is defined more than once, the definition that may start wins over one that
//! needs consent, then the higher [`Origin::rank`] (the user's own files, then each client's
//! own precedence); the others are dropped with a note naming both files.

pub(super) mod allow_list;
pub(super) mod clients;
pub(super) mod consent;
pub(super) mod entry;
pub(super) mod entry_policy;
pub(super) mod expand;
pub(super) mod oauth;
pub(super) mod own_file;
pub(super) mod pending;
pub(super) mod portable;
pub(super) mod read;
pub(super) mod spec;
pub(super) mod tool_rules;

use self::read::{merge, read_all, Reader};
use self::spec::{ConfigIssue, ServerSpec, Sources};
use crate::shown::Shown;

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
        tracing::warn!(source = %Shown(&i.source), "server config: {}", Shown(&i.message));
    }
    for n in &notes {
        tracing::debug!(source = %Shown(&n.source), "server config: {}", Shown(&n.message));
    }
    Servers {
        specs,
        issues,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::servers::clients::{Client, ClientFile, Scope};
    use crate::config::servers::spec::Transport;
    use std::path::{Path, PathBuf};

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
    fn vs_code_files_are_read_as_jsonc_and_the_others_as_json() {
        let d = tempfile::tempdir().expect("tempdir");
        let text = "// user servers\n{\n\t\"servers\": {\n\t\t\"memory\": {\"type\": \"stdio\", \"command\": \"npx\",},\n\t},\n}\n";
        let vscode = write(d.path(), "mcp.json", text);
        let cursor = write(d.path(), "cursor.json", text);
        let file = |client, path: &PathBuf| ClientFile {
            client,
            scope: Scope::User,
            path: path.clone(),
        };
        let s = discover(&Sources {
            client_files: vec![file(Client::VsCode, &vscode), file(Client::Cursor, &cursor)],
            ..Default::default()
        });
        assert_eq!(s.names(), ["memory"]);
        assert_eq!(s.get("memory").expect("memory").source, vscode);
        assert_eq!(s.issues.len(), 1, "{:?}", s.issues);
        assert!(
            s.issues[0].source.ends_with("cursor.json"),
            "{:?}",
            s.issues
        );
    }

    #[test]
    fn a_url_is_checked_once_expanded_and_the_message_shows_it_as_written() {
        let d = tempfile::tempdir().expect("tempdir");
        let file = write(
            d.path(),
            ".mcp.json",
            r#"{"mcpServers": {"ok": {"type": "http", "url": "${GOOD}/mcp"},
                               "bad": {"type": "http", "url": "${BAD}/mcp"}}}"#,
        );
        let sources = Sources {
            client_files: vec![ClientFile {
                client: Client::ClaudeCode,
                scope: Scope::User,
                path: file,
            }],
            ..Default::default()
        };
        let env = |k: &str| match k {
            "GOOD" => Some("https://docs.example.test".to_string()),
            "BAD" => Some("file:///etc/secret-path".to_string()),
            _ => None,
        };
        let s = discover_with_env(&sources, &env);
        assert_eq!(s.names(), ["ok"]);
        let Transport::Http { url, .. } = &s.get("ok").expect("ok").transport else {
            panic!("http")
        };
        assert_eq!(url, "https://docs.example.test/mcp");
        let problem = &s.issues[0].message;
        assert!(
            problem.contains("once expanded") && problem.contains("${BAD}/mcp"),
            "{problem}"
        );
        assert!(!problem.contains("secret-path"), "{problem}");
    }

    fn client_file(client: Client, scope: Scope, path: PathBuf) -> ClientFile {
        ClientFile {
            client,
            scope,
            path,
        }
    }

    #[test]
    fn headers_helper_is_read_from_claude_codes_files_and_the_users_own_only() {
        let d = tempfile::tempdir().expect("tempdir");
        // As Claude Code's docs write it, and the same entry in Cursor's file (Cursor does not
        // run it, so neither does the bridge for that file).
        let entry = r#"{"type": "http", "url": "https://mcp.internal.example.com",
                        "headersHelper": "/opt/bin/get-mcp-auth-headers.sh"}"#;
        let claude = write(
            d.path(),
            ".claude.json",
            &format!(r#"{{"mcpServers": {{"internal-api": {entry}}}}}"#),
        );
        let cursor = write(
            d.path(),
            "cursor.json",
            &format!(r#"{{"mcpServers": {{"cursor-api": {entry}}}}}"#),
        );
        let own = write(
            d.path(),
            "own.json",
            &format!(
                r#"{{"mcpServers": {{"own-api": {entry},
                   "local": {{"command": "x", "headersHelper": "ignored for stdio"}},
                   "empty": {{"type": "sse", "url": "http://127.0.0.1:1/sse", "headersHelper": " "}}}}}}"#
            ),
        );
        let s = discover(&Sources {
            extra_file: Some(own),
            client_files: vec![
                client_file(Client::ClaudeCode, Scope::User, claude),
                client_file(Client::Cursor, Scope::User, cursor),
            ],
            ..Default::default()
        });
        let helper = |n: &str| s.get(n).expect(n).headers_helper.clone();
        assert_eq!(
            helper("internal-api").as_deref(),
            Some("/opt/bin/get-mcp-auth-headers.sh")
        );
        assert_eq!(
            helper("own-api").as_deref(),
            Some("/opt/bin/get-mcp-auth-headers.sh")
        );
        assert_eq!(helper("cursor-api"), None);
        assert_eq!(helper("local"), None);
        assert_eq!(s.issues.len(), 1, "{:?}", s.issues);
        assert!(
            s.issues[0].message.contains("\"headersHelper\" is empty")
                && s.issues[0].source.contains("server 'empty'"),
            "{:?}",
            s.issues
        );
    }

    #[test]
    fn a_vs_code_input_is_a_problem_that_gives_the_env_text_to_write_instead() {
        let d = tempfile::tempdir().expect("tempdir");
        // The shape of VS Code's docs: a password prompt in "inputs", used in a remote entry's
        // header, and one used without being declared.
        let text = r#"{
          // Remote servers
          "inputs": [
            {"type": "promptString", "id": "api-token", "description": "Docs API token", "password": true},
          ],
          "servers": {
            "docs": {"type": "http", "url": "https://docs.example.test/mcp",
                     "headers": {"Authorization": "Bearer ${input:api-token}"}},
            "other": {"type": "http", "url": "https://${input:host}/mcp"},
            "fine": {"type": "http", "url": "https://docs.example.test/mcp",
                     "headers": {"Authorization": "Bearer ${env:DOCS_TOKEN}", "X-Dir": "${workspaceFolder}"}},
          },
        }"#;
        let vscode = write(d.path(), "mcp.json", text);
        let s = discover_with_env(
            &Sources {
                client_files: vec![client_file(Client::VsCode, Scope::User, vscode)],
                project: Some(PathBuf::from("/work/proj")),
                ..Default::default()
            },
            &|k| (k == "DOCS_TOKEN").then(|| "tok-5e2a".to_string()),
        );
        assert_eq!(s.names(), ["fine"]);
        let Transport::Http { headers, .. } = &s.get("fine").expect("fine").transport else {
            panic!("http")
        };
        assert_eq!(headers["Authorization"], "Bearer tok-5e2a");
        assert_eq!(headers["X-Dir"], "/work/proj");
        let problem = |server: &str| {
            s.issues
                .iter()
                .find(|i| i.source.contains(&format!("server '{server}'")))
                .map(|i| i.message.clone())
                .expect(server)
        };
        let docs = problem("docs");
        for needle in [
            "in \"headers.Authorization\"",
            "${input:api-token} is a password prompt (\"Docs API token\")",
            "its own secret storage, which the bridge does not read",
            "write \"${env:API_TOKEN}\" in its place",
            "set API_TOKEN in the environment",
        ] {
            assert!(docs.contains(needle), "missing {needle:?} in {docs}");
        }
        let other = problem("other");
        assert!(
            other.contains("${input:host} is a prompt (not declared in the file's \"inputs\")")
                && other.contains("\"${env:HOST}\""),
            "{other}"
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
