//! Client config files as each client writes them (`tests/fixtures/client-homes/`): the merged
//! server list with provenance and consent, the notes and problems, and what starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcp_code_bridge::config::{
    client_config_files, discover_with_env, project_definitions, AllowList, Approval, Servers,
    Sources, Transport,
};
use mcp_code_bridge::upstream::{UpstreamError, UpstreamPool};
use tokio::time::Instant;

const STUB: &str = env!("CARGO_BIN_EXE_stub-mcp");

/// A fixture home and project copied to a temp dir, placeholders replaced.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    repo: PathBuf,
    state: PathBuf,
    marker: PathBuf,
}

impl Home {
    fn new(client: &str) -> Home {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let (home, repo, state) = (root.join("home"), root.join("repo"), root.join("state"));
        let marker = root.join("PWNED");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/client-homes")
            .join(client);
        copy_tree(&fixture, &root, &|text| {
            text.replace("@REPO@", &repo.display().to_string())
                .replace("@STUB@", STUB)
                .replace("@MARKER@", &marker.display().to_string())
        });
        std::fs::create_dir_all(&repo).expect("repo dir");
        Home {
            _dir: dir,
            home,
            repo,
            state,
            marker,
        }
    }

    fn sources(&self) -> Sources {
        Sources {
            client_files: client_config_files(Some(&self.home), Some(&self.repo), None),
            home: Some(self.home.clone()),
            project: Some(self.repo.clone()),
            claude_settings: Some(self.home.join(".claude/settings.json")),
            state_dir: Some(self.state.clone()),
            ..Sources::default()
        }
    }

    fn discover(&self) -> Servers {
        let env: BTreeMap<&str, &str> = [
            ("GITHUB_TOKEN", "ghp_fixture_secret_1"),
            ("DOCS_TOKEN", "docs-fixture-secret"),
            ("LINEAR_API_KEY", "lin_fixture_secret"),
            ("CTX7_KEY", "ctx7-fixture-secret"),
            ("VSC_KEY", "vsc-fixture-secret"),
            ("HOME", "/home/fixture"),
        ]
        .into_iter()
        .collect();
        discover_with_env(&self.sources(), &|k| env.get(k).map(|v| v.to_string()))
    }

    /// One line per server: `name | origin | consent | transport summary`.
    fn rows(&self, s: &Servers) -> Vec<String> {
        s.specs
            .iter()
            .map(|x| {
                let t = match &x.transport {
                    Transport::Stdio {
                        command, args, env, ..
                    } => {
                        let env: Vec<String> =
                            env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        format!("stdio {command} {} {}", args.join(" "), env.join(" "))
                    }
                    Transport::Http { url, headers } | Transport::Sse { url, headers } => {
                        let h: Vec<String> =
                            headers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                        format!("{} {url} {}", x.transport.kind(), h.join(", "))
                    }
                };
                let off = if x.disabled { " (disabled)" } else { "" };
                let row = format!(
                    "{} | {} | {}{off} | {}",
                    x.name,
                    x.origin.label(),
                    x.consent.label(),
                    t.trim_end()
                );
                row.replace(STUB, "STUB")
                    .replace(&self.marker.display().to_string(), "MARKER")
                    .replace(&self.repo.display().to_string(), "REPO")
                    .replace(&self.home.display().to_string(), "HOME")
            })
            .collect()
    }

    /// For every stdio server: `name: starts` or the reason it does not.
    async fn starts(&self, s: &Servers) -> Vec<String> {
        let pool = UpstreamPool::new(Arc::new(s.clone()), &self.state);
        let mut out = Vec::new();
        for spec in &s.specs {
            if spec.transport.kind() != "stdio" {
                continue;
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            let what = match pool.connect(&spec.name, deadline).await {
                Ok(_) => "starts".to_string(),
                Err(UpstreamError::NotAllowed { message, .. }) => {
                    assert!(
                        message.contains("servers --allow") || message.contains("turned down"),
                        "{message}"
                    );
                    "refused".to_string()
                }
                Err(e) => format!("fails: {e}"),
            };
            out.push(format!("{}: {what}", spec.name));
        }
        // Indexing must skip what is not approved too.
        pool.ensure_indexed().await;
        pool.shutdown().await;
        assert!(!self.marker.exists(), "a refused server ran");
        out
    }
}

fn copy_tree(from: &Path, to: &Path, fix: &dyn Fn(&str) -> String) {
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
            copy_tree(&entry.path(), &dest, fix);
        } else {
            let text = std::fs::read_to_string(entry.path()).expect("read fixture");
            std::fs::write(&dest, fix(&text)).expect("write fixture");
        }
    }
}

fn messages(list: &[mcp_code_bridge::config::ConfigIssue]) -> String {
    list.iter()
        .map(|i| format!("{}: {}", i.source, i.message))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn claude_code_scopes_variables_and_consent() {
    let h = Home::new("claude-code");
    let s = h.discover();
    assert_eq!(
        h.rows(&s),
        [
            "docs | Claude Code, project scope | allowed (enabledMcpjsonServers in HOME/.claude.json) | http https://docs.example.test/mcp Authorization: Bearer docs-fixture-secret",
            "github | Claude Code, user scope | own | stdio STUB --name github-user GITHUB_PERSONAL_ACCESS_TOKEN=ghp_fixture_secret_1",
            "pwned | Claude Code, project scope | denied (disabledMcpjsonServers in HOME/.claude.json) | stdio sh -c date > MARKER",
            "quiet | Claude Code, user scope | own (disabled) | stdio STUB --name quiet",
            "shared | Claude Code, local scope | own | stdio STUB --name shared-local",
            "unasked | Claude Code, project scope | needs consent | stdio sh -c date > MARKER",
        ]
    );
    let notes = messages(&s.notes);
    for needle in [
        // The bridge's own entry is expected: a note, not a problem.
        "server 'code' would launch mcp-code-bridge itself",
        // local > project > user, naming both files.
        "server 'shared': using the definition in HOME/.claude.json (Claude Code, local scope); the one in REPO/.mcp.json (Claude Code, project scope) is ignored",
        "server 'shared': using the definition in HOME/.claude.json (Claude Code, local scope); the one in HOME/.claude.json (Claude Code, user scope) is ignored",
        // An unapproved project entry does not shadow the user's own.
        "server 'github': using the definition in HOME/.claude.json (Claude Code, user scope); the one in REPO/.mcp.json (Claude Code, project scope) is ignored (it is not approved)",
    ] {
        let shown = notes
            .replace(&h.repo.display().to_string(), "REPO")
            .replace(&h.home.display().to_string(), "HOME");
        assert!(shown.contains(needle), "missing {needle:?} in\n{shown}");
    }
    let problems = messages(&s.issues);
    assert_eq!(s.issues.len(), 1, "{problems}");
    assert!(
        problems.contains("needs-var") && problems.contains("UNSET_FIXTURE_NAME is not set"),
        "{problems}"
    );
    // Secrets from expansion are known for redaction and never in a message.
    let docs = s.get("docs").expect("docs");
    assert_eq!(docs.secrets, ["docs-fixture-secret"]);
    assert_eq!(
        docs.redact("401 for docs-fixture-secret"),
        "401 for [redacted]"
    );
    assert!(!format!("{notes}{problems}").contains("secret"));
    assert_eq!(
        h.starts(&s).await,
        [
            "github: starts",
            "pwned: refused",
            "quiet: starts",
            "shared: starts",
            "unasked: refused"
        ]
    );
}

#[tokio::test]
async fn cursor_forms_remote_entries_and_the_bridge_allow_list() {
    let h = Home::new("cursor");
    let s = h.discover();
    assert_eq!(
        h.rows(&s),
        [
            "files | Cursor, user scope | own | stdio STUB --name files-global NOTES=HOME/notes",
            "linear | Cursor, user scope | own | http https://mcp.linear.test/mcp Authorization: Bearer lin_fixture_secret",
            "tools | Cursor, project scope | needs consent (disabled) | stdio STUB --name tools",
        ]
    );
    assert!(s.issues.is_empty(), "{}", messages(&s.issues));
    assert_eq!(h.starts(&s).await, ["files: starts", "tools: refused"]);

    // Cursor keeps its approvals where the bridge cannot read them: the bridge's list decides,
    // and it can approve a project entry that an unapproved state left shadowed.
    let env = |_: &str| None;
    let pending = project_definitions(&h.sources(), &env);
    let mut list = AllowList::load(&h.state);
    for spec in pending {
        list.allow(Approval {
            name: spec.name.clone(),
            source: spec.source.clone(),
            sha256: spec.sha256.clone(),
        })
        .expect("allow");
    }
    let s = h.discover();
    // Approved, the project's `files` wins over the user's (project > user, as in Cursor).
    assert_eq!(
        h.rows(&s)[0],
        "files | Cursor, project scope | allowed (allowed with `mcp-code-bridge servers --allow files`) | stdio STUB --name repo ROOT=REPO"
    );
    let starts = h.starts(&s).await;
    assert_eq!(starts, ["files: starts", "tools: starts"]);

    // A changed entry needs consent again.
    let file = h.repo.join(".cursor/mcp.json");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(
        &file,
        text.replace("\"tools\"]", "\"tools\", \"--extra-tools\", \"1\"]"),
    )
    .expect("write");
    let s = h.discover();
    assert_eq!(
        s.get("tools").expect("tools").consent,
        mcp_code_bridge::config::Consent::Needed
    );
}

#[tokio::test]
async fn vscode_inputs_are_problems_and_workspace_servers_need_consent() {
    let h = Home::new("vscode");
    let s = h.discover();
    assert_eq!(
        h.rows(&s),
        [
            "memory | VS Code, user scope | own | stdio STUB --name memory",
            "playwright | VS Code, project scope | needs consent | stdio STUB --name playwright HOME_DIR=HOME KEY=vsc-fixture-secret WORKDIR=REPO",
        ]
    );
    let problems = messages(&s.issues);
    assert_eq!(s.issues.len(), 1, "{problems}");
    assert!(
        problems.contains("github-remote") && problems.contains("${input:github_token}"),
        "{problems}"
    );
    assert_eq!(
        h.starts(&s).await,
        ["memory: starts", "playwright: refused"]
    );
}

#[tokio::test]
async fn claude_desktop_is_literal_and_windsurf_reads_server_url_and_disabled_tools() {
    let h = Home::new("claude-desktop");
    let s = h.discover();
    assert_eq!(
        h.rows(&s),
        ["filesystem | Claude Desktop, user scope | own | stdio STUB --name ${HOME}"]
    );
    assert!(s.issues.is_empty() && s.notes.is_empty());

    let h = Home::new("windsurf");
    let s = h.discover();
    assert_eq!(
        h.rows(&s),
        [
            "context7 | Windsurf, user scope | own | http https://mcp.context7.test/mcp CONTEXT7_API_KEY: ctx7-fixture-secret",
            "git | Windsurf, user scope | own | stdio STUB --name git",
        ]
    );
    let rules = &s.get("git").expect("git").policy.tools;
    assert_eq!(
        rules.disabled,
        [mcp_code_bridge::config::Pattern::new("add")]
    );
    // `disabledTools` hides the tool from the server's list and refuses a call to it.
    let pool = UpstreamPool::new(Arc::new(s.clone()), &h.state);
    let deadline = Instant::now() + Duration::from_secs(20);
    let live = pool.connect("git", deadline).await.expect("git starts");
    let names: Vec<&str> = live.tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"echo") && !names.contains(&"add"),
        "{names:?}"
    );
    let err = pool
        .get("git")
        .expect("git")
        .call("add", serde_json::Map::new(), deadline)
        .await
        .expect_err("refused");
    assert!(
        matches!(err, UpstreamError::ToolDisabled { .. })
            && err.to_string().contains("disabledTools"),
        "{err}"
    );
    pool.shutdown().await;
}

#[tokio::test]
async fn an_ordinary_claude_code_setup_has_no_problems() {
    let h = Home::new("plain");
    let s = h.discover();
    assert!(s.specs.is_empty());
    assert!(s.issues.is_empty(), "{}", messages(&s.issues));
}
