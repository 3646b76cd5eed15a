//! The bridge's own consent records: `<state dir>/consent.json`, written by
//! `mcp-code-bridge servers --allow NAME`. Each approval names one definition: the server's name,
//! the file that defines it and a SHA-256 of its entry as written, so that a changed entry, or
//! another file's entry of the same name, needs its own approval.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::consent::Consent;
use crate::checked_dir::new_file::WriteError;
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};

/// One approval given with `mcp-code-bridge servers --allow`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The server's name.
    pub name: String,
    /// The file that defines it.
    pub source: PathBuf,
    /// [`entry_hash`](super::consent::entry_hash) of the entry as written when it was approved.
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
        let text = serde_json::to_vec_pretty(&AllowFile {
            allowed: self.approvals.clone(),
        })
        .map_err(std::io::Error::other)?;
        let name = self.path.file_name().and_then(|n| n.to_str());
        let mut new = dir.new_file(name.unwrap_or("consent.json"))?;
        std::io::Write::write_all(new.file(), &text)?;
        new.commit(0o600).map_err(WriteError::into_io)
    }
}

/// `consent.json`'s bytes, read only from a state folder that passes the checks
/// (`checked_dir`) and only when it is a regular file of this user: approvals another user
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
    use crate::config::servers::consent::entry_hash;

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
