//! Consent: whether a project-scoped server (one a repository defines) may be started.
//!
//! The user's own definitions (`~/MCPs`, `MCP_SERVERS_CONFIG`, a client's user or local scope)
//! need none. A project's servers need a record of the user's approval: Claude Code's own
//! records for `.mcp.json` ([`ClaudeRecords`]), else the bridge's allow list ([`AllowList`],
//! written by `mcp-code-bridge servers --allow NAME`), which pins the entry by a SHA-256 of its
//! text so that a changed entry needs consent again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::private_dir::{Access, CheckedDir, DirError, FIX_STATE};

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
        match self {
            Consent::Own | Consent::Allowed(_) => None,
            Consent::Needed => Some(format!(
                "MCP server '{name}' is defined by a project file ({}) and has not been approved; \
                 nothing from it is started until you allow it: run `mcp-code-bridge servers --allow {name}` \
                 in that project (or approve it in the client that owns the file)",
                source.display()
            )),
            Consent::Denied(why) => Some(format!(
                "MCP server '{name}' from {} was turned down ({why}); enable it there to use it",
                source.display()
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
/// Approvals count from files outside the repository (`~/.claude.json`'s entry for the project,
/// `~/.claude/settings.json`, managed settings), and from the repository's
/// `.claude/settings.local.json` (where Claude Code writes the user's answers) only once the user
/// accepted Claude Code's trust dialog for the folder. Approvals in the repository's committed
/// `.claude/settings.json` never count: a hostile repository can write them (the "TrustFall"
/// report). Refusals count from everywhere.
#[derive(Debug, Default)]
pub struct ClaudeRecords {
    enabled: Vec<(String, PathBuf)>,
    disabled: Vec<(String, PathBuf)>,
    enable_all: Option<PathBuf>,
    /// Servers switched off with `/mcp` in this project (`disabledMcpServers`).
    pub switched_off: Vec<String>,
}

impl ClaudeRecords {
    /// Reads the records for the project at `project`: `claude_json` is Claude Code's
    /// `~/.claude.json`, `user_settings` its `~/.claude/settings.json`.
    pub fn read(
        claude_json: Option<&Path>,
        user_settings: Option<&Path>,
        project: Option<&Path>,
    ) -> Self {
        let mut rec = ClaudeRecords::default();
        let mut trusted = false;
        if let (Some(global), Some(project)) = (claude_json, project) {
            if let Some(entry) = read_json(global).and_then(|v| project_entry(&v, project)) {
                trusted = entry.get("hasTrustDialogAccepted") == Some(&Value::Bool(true));
                rec.take(&entry, global, true);
                rec.switched_off = strings(entry.get("disabledMcpServers"));
            }
        }
        let mut files: Vec<(PathBuf, bool)> = Vec::new();
        files.extend(user_settings.map(|f| (f.to_path_buf(), true)));
        files.push(("/etc/claude-code/managed-settings.json".into(), true));
        if let Some(project) = project {
            files.push((project.join(".claude/settings.local.json"), trusted));
            files.push((project.join(".claude/settings.json"), false));
        }
        for (file, approvals_count) in files {
            if let Some(v) = read_json(&file) {
                rec.take(&v, &file, approvals_count);
            }
        }
        rec
    }

    fn take(&mut self, v: &Value, file: &Path, approvals_count: bool) {
        for name in strings(v.get("disabledMcpjsonServers")) {
            self.disabled.push((name, file.to_path_buf()));
        }
        if !approvals_count {
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

/// `~/.claude.json`'s entry for `project` or the nearest folder above it that has one.
fn project_entry(root: &Value, project: &Path) -> Option<Value> {
    let projects = root.get("projects")?.as_object()?;
    project
        .ancestors()
        .find_map(|dir| projects.get(dir.to_str()?))
        .cloned()
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
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// One approval given with `mcp-code-bridge servers --allow`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The server's name.
    pub name: String,
    /// The file that defines it.
    pub source: PathBuf,
    /// [`entry_hash`] of the entry when it was approved.
    pub sha256: String,
}

/// The bridge's own consent records: `<state dir>/consent.json`.
#[derive(Debug, Default)]
pub struct AllowList {
    path: PathBuf,
    approvals: Vec<Approval>,
}

#[derive(Serialize, Deserialize, Default)]
struct AllowFile {
    allowed: Vec<Approval>,
}

impl AllowList {
    /// The file the allow list lives in.
    pub fn file(state_dir: &Path) -> PathBuf {
        state_dir.join("consent.json")
    }

    /// Loads the list (empty when the file is missing or unreadable).
    pub fn load(state_dir: &Path) -> Self {
        let path = Self::file(state_dir);
        let approvals = read_checked(state_dir)
            .and_then(|b| serde_json::from_slice::<AllowFile>(&b).ok())
            .map(|f| f.allowed)
            .unwrap_or_default();
        AllowList { path, approvals }
    }

    /// The decision for `name` defined in `source` with entry hash `sha256`.
    pub fn decide(&self, name: &str, source: &Path, sha256: &str) -> Consent {
        let approved = self
            .approvals
            .iter()
            .any(|a| a.name == name && a.source == source && a.sha256 == sha256);
        if approved {
            Consent::Allowed(format!(
                "allowed with `mcp-code-bridge servers --allow {name}`"
            ))
        } else {
            Consent::Needed
        }
    }

    /// Whether `name` from `source` was allowed once, but its entry changed since.
    pub fn changed_since_allowed(&self, name: &str, source: &Path, sha256: &str) -> bool {
        let mut mine = self
            .approvals
            .iter()
            .filter(|a| a.name == name && a.source == source)
            .peekable();
        mine.peek().is_some() && mine.all(|a| a.sha256 != sha256)
    }

    /// Records an approval (replacing an older one for the same name and file) and saves.
    ///
    /// # Errors
    /// The state dir or the file cannot be written.
    pub fn allow(&mut self, approval: Approval) -> std::io::Result<()> {
        self.approvals
            .retain(|a| !(a.name == approval.name && a.source == approval.source));
        self.approvals.push(approval);
        let dir = self.path.parent().unwrap_or(Path::new("."));
        // A folder only this user can write to; the file gets a random name, then its own.
        let dir = CheckedDir::open(dir, Access::Shared, FIX_STATE).map_err(DirError::into_io)?;
        let dir = dir.path();
        let text = serde_json::to_vec_pretty(&AllowFile {
            allowed: self.approvals.clone(),
        })
        .map_err(std::io::Error::other)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut tmp, &text)?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// `consent.json`'s bytes, read only from a state folder that passes the checks
/// (`private_dir`) and only when it is a regular file of this user: approvals another user
/// could have written are not read.
fn read_checked(state_dir: &Path) -> Option<Vec<u8>> {
    if !state_dir.is_dir() {
        return None;
    }
    let dir = match CheckedDir::open(state_dir, Access::Shared, FIX_STATE) {
        Ok(dir) => dir,
        Err(err) => {
            tracing::warn!(cause = %err, "approvals in consent.json are not read");
            return None;
        }
    };
    let mut file = dir.open_file("consent.json", libc::O_RDONLY, 0).ok()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).ok()?;
    Some(bytes)
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
        // `~/.claude.json`'s entry for the project also covers its subfolders.
        let sub = ClaudeRecords::read(Some(&cj), Some(&us), Some(&proj.join("sub")));
        assert!(sub.decide("ok").expect("test").permits());
        let rec = ClaudeRecords::read(Some(&cj), Some(&us), Some(&proj));
        assert!(rec.decide("ok").expect("test").permits());
        assert!(matches!(rec.decide("bad"), Some(Consent::Denied(_))));
        assert!(matches!(rec.decide("ok-but-off"), Some(Consent::Denied(_))));
        assert_eq!(rec.decide("evil"), None);
        assert_eq!(rec.decide("local"), None);
        assert_eq!(rec.switched_off, ["quiet"]);

        write(
            &home.join(".claude.json"),
            serde_json::json!({"projects": {key: {"hasTrustDialogAccepted": true}}}),
        );
        let rec = ClaudeRecords::read(Some(&cj), Some(&us), Some(&proj));
        assert!(rec.decide("local").expect("test").permits());
        assert_eq!(rec.decide("evil"), None);
    }

    #[test]
    fn the_allow_list_pins_the_entry() {
        let d = tempfile::tempdir().expect("test");
        let src = d.path().join(".mcp.json");
        let entry = serde_json::json!({"command": "a"});
        let mut list = AllowList::load(d.path());
        assert_eq!(list.decide("x", &src, &entry_hash(&entry)), Consent::Needed);
        list.allow(Approval {
            name: "x".into(),
            source: src.clone(),
            sha256: entry_hash(&entry),
        })
        .expect("test");
        let list = AllowList::load(d.path());
        assert!(list.decide("x", &src, &entry_hash(&entry)).permits());
        let changed = entry_hash(&serde_json::json!({"command": "b"}));
        assert_eq!(list.decide("x", &src, &changed), Consent::Needed);
        assert!(list.changed_since_allowed("x", &src, &changed));
        assert_eq!(
            list.decide("x", &d.path().join("other.json"), &entry_hash(&entry)),
            Consent::Needed
        );
    }
}
