//! Consent: whether a project-scoped server (one a repository defines) may be started.
//!
//! The user's own definitions (`~/MCPs`, `MCP_SERVERS_CONFIG`, a client's user or local scope)
//! need none. A project's servers need a record of the user's approval: Claude Code's own
//! records for `.mcp.json` ([`ClaudeRecords`]), else the bridge's allow list ([`AllowList`](super::allow_list::AllowList),
//! written by `mcp-code-bridge servers --allow NAME`), which pins the entry by a SHA-256 of its
//! text so that a changed entry needs consent again.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::own_file;
use crate::shown::{Shown, ShownPath};

/// Whether a server may be started, and on whose word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consent {
    /// The user's own configuration: no consent needed.
    Own,
    /// A project's server the user approved; the text says where that is recorded.
    Allowed(String),
    /// A project's server nobody approved yet.
    Needed,
    /// A project's server the user turned down; the text says where.
    Denied(String),
}

impl Consent {
    /// Whether the server may be started.
    pub fn permits(&self) -> bool {
        matches!(self, Consent::Own | Consent::Allowed(_))
    }

    /// One line for listings: `own`, `allowed (...)`, `needs consent`, `denied (...)`.
    pub fn label(&self) -> String {
        match self {
            Consent::Own => "own".into(),
            Consent::Allowed(why) => format!("allowed ({why})"),
            Consent::Needed => "needs consent".into(),
            Consent::Denied(why) => format!("denied ({why})"),
        }
    }

    /// Why a server may not start, and how to allow it; `None` when it may.
    pub fn refusal(&self, name: &str, source: &Path) -> Option<String> {
        let name = Shown(name);
        match self {
            Consent::Own | Consent::Allowed(_) => None,
            Consent::Needed => Some(format!(
                "MCP server '{name}' is defined by a project file ({}) and has not been approved; \
                 nothing from it is started until you allow it: run `mcp-code-bridge servers --allow {name}` \
                 in that project (or approve it in the client that owns the file)",
                ShownPath(source)
            )),
            Consent::Denied(why) => Some(format!(
                "MCP server '{name}' from {} was turned down ({}); enable it there to use it",
                ShownPath(source),
                Shown(why)
            )),
        }
    }
}

/// A stable fingerprint of one config entry as written (before variable expansion).
pub fn entry_hash(entry: &Value) -> String {
    let text = serde_json::to_string(entry).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Claude Code's consent records for the current project.
///
/// Only approvals the user's own client wrote for this exact folder count:
/// - `~/.claude.json`'s entry for the project folder itself; an entry for a folder above it (a
///   trusted `~/src`) approves nothing below it;
/// - approvals that cover every folder (`~/.claude/settings.json`, managed settings) only in a
///   folder whose own entry records Claude Code's trust dialog as accepted, since Claude Code
///   asks that before any project server;
/// - the project's `.claude/settings.local.json` (where Claude Code writes the user's answers)
///   only in such a trusted folder, and only when it is the user's own file: not tracked by the
///   repository's git, not a link, owned by the user ([`own_file::check`]); one that came with a
///   clone is the repository approving itself.
///
/// Approvals in the committed `.claude/settings.json` never count (the "TrustFall" report).
/// Refusals count from every file, and from the entries of folders above the project.
#[derive(Debug, Default)]
pub struct ClaudeRecords {
    enabled: Vec<(String, PathBuf)>,
    disabled: Vec<(String, PathBuf)>,
    enable_all: Option<PathBuf>,
    /// Servers switched off with `/mcp` in this project (`disabledMcpServers`).
    pub switched_off: Vec<String>,
    /// Approvals found that do not count, each with its file and the reason.
    pub ignored: Vec<(PathBuf, String)>,
}

/// How a file's approvals are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Approvals {
    /// They count.
    Count,
    /// Only refusals are read (the committed `.claude/settings.json`).
    Never,
}

impl ClaudeRecords {
    /// Reads the records for the project at `project`: `claude_json` is Claude Code's
    /// `~/.claude.json`, `user_settings` its `~/.claude/settings.json`.
    pub fn read(
        claude_json: Option<&Path>,
        user_settings: Option<&Path>,
        project: Option<&Path>,
    ) -> Self {
        Self::read_with(
            claude_json,
            user_settings,
            Path::new("/etc/claude-code/managed-settings.json"),
            project,
        )
    }

    fn read_with(
        claude_json: Option<&Path>,
        user_settings: Option<&Path>,
        managed: &Path,
        project: Option<&Path>,
    ) -> Self {
        let mut rec = ClaudeRecords::default();
        let mut trusted = false;
        if let (Some(global), Some(project)) = (claude_json, project) {
            if let Some(root) = read_json(global) {
                let (exact, above) = project_entries(&root, project);
                if let Some(entry) = &exact {
                    trusted = entry.get("hasTrustDialogAccepted") == Some(&Value::Bool(true));
                    rec.take(entry, global, Approvals::Count);
                }
                for (dir, entry) in &above {
                    rec.take(entry, global, Approvals::Never);
                    if exact.is_none() && (grants(entry) || trusts(entry)) {
                        rec.ignored.push((
                            global.to_path_buf(),
                            format!(
                                "the trust or approvals recorded for {} do not cover {}: only an entry for this exact folder counts",
                                ShownPath(Path::new(dir)),
                                ShownPath(project)
                            ),
                        ));
                    }
                }
                let nearest = exact.as_ref().or(above.first().map(|(_, e)| e));
                rec.switched_off = strings(nearest.and_then(|e| e.get("disabledMcpServers")));
            }
        }
        // Approvals for every folder: only where this folder is trusted.
        let wide = if trusted {
            Approvals::Count
        } else {
            Approvals::Never
        };
        for file in user_settings.into_iter().chain([managed]) {
            if let Some(v) = read_json(file) {
                if wide == Approvals::Never && grants(&v) {
                    rec.ignored.push((
                        file.to_path_buf(),
                        "its approvals cover a project only once you accepted Claude Code's trust dialog for that exact folder".into(),
                    ));
                }
                rec.take(&v, file, wide);
            }
        }
        if let Some(project) = project {
            let local = Path::new(".claude/settings.local.json");
            let file = project.join(local);
            if let Some(v) = read_json(&file) {
                let counts = match (grants(&v), trusted) {
                    (false, _) => Approvals::Never,
                    (true, false) => {
                        rec.ignored.push((
                            file.clone(),
                            "its approvals count only once you accepted Claude Code's trust dialog for this folder".into(),
                        ));
                        Approvals::Never
                    }
                    (true, true) => match own_file::check(project, local) {
                        Ok(()) => Approvals::Count,
                        Err(why) => {
                            rec.ignored
                                .push((file.clone(), format!("its approvals do not count: {why}")));
                            Approvals::Never
                        }
                    },
                };
                rec.take(&v, &file, counts);
            }
            let committed = project.join(".claude/settings.json");
            if let Some(v) = read_json(&committed) {
                rec.take(&v, &committed, Approvals::Never);
            }
        }
        rec
    }

    fn take(&mut self, v: &Value, file: &Path, approvals: Approvals) {
        for name in strings(v.get("disabledMcpjsonServers")) {
            self.disabled.push((name, file.to_path_buf()));
        }
        if approvals == Approvals::Never {
            return;
        }
        for name in strings(v.get("enabledMcpjsonServers")) {
            self.enabled.push((name, file.to_path_buf()));
        }
        if v.get("enableAllProjectMcpServers") == Some(&Value::Bool(true))
            && self.enable_all.is_none()
        {
            self.enable_all = Some(file.to_path_buf());
        }
    }

    /// Claude Code's decision about the `.mcp.json` server `name`, if it recorded one.
    pub fn decide(&self, name: &str) -> Option<Consent> {
        let find = |list: &[(String, PathBuf)]| {
            list.iter()
                .find(|(n, _)| n == name)
                .map(|(_, f)| f.display().to_string())
        };
        if let Some(file) = find(&self.disabled) {
            return Some(Consent::Denied(format!("disabledMcpjsonServers in {file}")));
        }
        if let Some(file) = find(&self.enabled) {
            return Some(Consent::Allowed(format!("enabledMcpjsonServers in {file}")));
        }
        self.enable_all
            .as_ref()
            .map(|f| Consent::Allowed(format!("enableAllProjectMcpServers in {}", f.display())))
    }
}

/// Whether a record approves anything.
fn grants(v: &Value) -> bool {
    v.get("enableAllProjectMcpServers") == Some(&Value::Bool(true))
        || !strings(v.get("enabledMcpjsonServers")).is_empty()
}

fn trusts(v: &Value) -> bool {
    v.get("hasTrustDialogAccepted") == Some(&Value::Bool(true))
}

/// `~/.claude.json`'s entry for exactly `project`, and those of the folders above it (nearest
/// first).
fn project_entries(root: &Value, project: &Path) -> (Option<Value>, Vec<(String, Value)>) {
    let Some(projects) = root.get("projects").and_then(Value::as_object) else {
        return (None, Vec::new());
    };
    let exact = project.to_str().and_then(|p| projects.get(p)).cloned();
    let above = project
        .ancestors()
        .skip(1)
        .filter_map(|dir| {
            let key = dir.to_str()?;
            Some((key.to_string(), projects.get(key)?.clone()))
        })
        .collect();
    (exact, above)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn read_json(path: &Path) -> Option<Value> {
    let text = super::super::text_file::read_text(path).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, v: Value) {
        std::fs::create_dir_all(path.parent().expect("test")).expect("test");
        std::fs::write(path, v.to_string()).expect("test");
    }

    #[test]
    fn claude_code_records_and_who_may_approve() {
        let d = tempfile::tempdir().expect("test");
        let (home, proj) = (d.path().join("home"), d.path().join("repo"));
        let key = proj.display().to_string();
        write(
            &home.join(".claude.json"),
            serde_json::json!({"projects": {key.clone(): {
                "enabledMcpjsonServers": ["ok"], "disabledMcpjsonServers": ["bad"],
                "disabledMcpServers": ["quiet"]}}}),
        );
        // The committed project settings approve everything: not honoured.
        write(
            &proj.join(".claude/settings.json"),
            serde_json::json!({"enableAllProjectMcpServers": true, "enabledMcpjsonServers": ["evil"],
                "disabledMcpjsonServers": ["ok-but-off"]}),
        );
        // Local settings approve `local`: honoured only in a trusted folder.
        write(
            &proj.join(".claude/settings.local.json"),
            serde_json::json!({"enabledMcpjsonServers": ["local"]}),
        );
        let (cj, us) = (
            home.join(".claude.json"),
            home.join(".claude/settings.json"),
        );
        let read = |project: &Path| {
            ClaudeRecords::read_with(
                Some(&cj),
                Some(&us),
                &home.join("managed.json"),
                Some(project),
            )
        };
        // `~/.claude.json`'s entry for the project approves nothing in its subfolders (a
        // repository cloned under a trusted folder); its refusals still hold there.
        let sub = read(&proj.join("sub"));
        assert_eq!(sub.decide("ok"), None);
        assert!(matches!(sub.decide("bad"), Some(Consent::Denied(_))));
        assert!(
            sub.ignored[0]
                .1
                .contains("only an entry for this exact folder"),
            "{:?}",
            sub.ignored
        );
        let rec = read(&proj);
        assert!(rec.decide("ok").expect("test").permits());
        assert!(matches!(rec.decide("bad"), Some(Consent::Denied(_))));
        assert!(matches!(rec.decide("ok-but-off"), Some(Consent::Denied(_))));
        assert_eq!(rec.decide("evil"), None);
        assert_eq!(rec.decide("local"), None);
        assert_eq!(rec.switched_off, ["quiet"]);
        // Approvals for every folder count only in a trusted one.
        write(&us, serde_json::json!({"enabledMcpjsonServers": ["wide"]}));
        assert_eq!(read(&proj).decide("wide"), None);

        write(
            &home.join(".claude.json"),
            serde_json::json!({"projects": {key: {"hasTrustDialogAccepted": true}}}),
        );
        let rec = read(&proj);
        assert!(rec.decide("local").expect("test").permits());
        assert!(rec.decide("wide").expect("test").permits());
        assert_eq!(rec.decide("evil"), None);
        // A settings.local.json the repository's git tracks came with the clone.
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&proj)
                .output();
            assert!(out.expect("git").status.success(), "{args:?}");
        };
        git(&["init", "-q"]);
        assert!(
            read(&proj).decide("local").expect("test").permits(),
            "untracked"
        );
        git(&["add", "-f", ".claude/settings.local.json"]);
        let rec = read(&proj);
        assert_eq!(rec.decide("local"), None);
        assert!(rec.ignored[0].1.contains("tracks it"), "{:?}", rec.ignored);
    }
}
