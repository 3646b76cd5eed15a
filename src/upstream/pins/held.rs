//! [`Held`]: one connection's tools held to their pins (changed or new since pinned), by the
//! digest each listed, and those the operator approved since the connection started. The call
//! path asks [`Held::holds`] (nothing held: one emptiness check; else one hash lookup); only a
//! call it refuses reads the pins file, to find an approval given since (`servers
//! --approve-changes` in another process), which is then remembered.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use rmcp::model::Tool;

use super::store::PinStore;

/// The held tools of one connection.
#[derive(Debug, Default)]
pub struct Held {
    /// Tool name to the digest of the definition the server listed, and that definition.
    listed: HashMap<String, (String, Tool)>,
    /// Held tools found approved since the connection started.
    approved: Mutex<HashSet<String>>,
    /// The pins to look an approval up in: store, server name, identity.
    source: Option<(PinStore, String, String)>,
}

impl Held {
    /// `listed` (tool to listed digest and definition) held for `name` at `identity` in
    /// `store`.
    pub fn new(
        listed: HashMap<String, (String, Tool)>,
        store: PinStore,
        name: &str,
        identity: &str,
    ) -> Self {
        Held {
            listed,
            approved: Mutex::default(),
            source: Some((store, name.to_string(), identity.to_string())),
        }
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }

    /// The held tools' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.listed.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// Whether a call to `tool` is refused as far as this connection knows (no file read).
    pub fn holds(&self, tool: &str) -> bool {
        !self.listed.is_empty()
            && self.listed.contains_key(tool)
            && !self.approved.lock().expect("held lock").contains(tool)
    }

    /// The definition `tool` listed, when it was held and has been approved since.
    pub fn approved_definition(&self, tool: &str) -> Option<&Tool> {
        self.approved_since(tool)
            .then(|| self.listed.get(tool).map(|(_, t)| t))
            .flatten()
    }

    /// Whether `tool` was held and has been approved since: its call goes to the server as
    /// listed, unchecked against the list shown (which holds its pinned text, or not it).
    pub fn approved_since(&self, tool: &str) -> bool {
        !self.listed.is_empty() && self.approved.lock().expect("held lock").contains(tool)
    }

    /// Whether `tool` is still held after looking in the pins file (blocking): pinned since at
    /// the digest it listed, it is approved and remembered. An unreadable file holds it.
    pub fn still_held_blocking(&self, tool: &str) -> bool {
        let (Some(listed), Some((store, name, identity))) = (self.listed.get(tool), &self.source)
        else {
            return self.holds(tool);
        };
        let pinned = match store.record(name, identity) {
            Ok(rec) => rec.and_then(|r| r.tools.get(tool).map(|p| p.sha256.clone())),
            Err(e) => {
                tracing::warn!(cause = %e, "cannot read the pinned tool definitions");
                None
            }
        };
        if pinned.as_ref() == Some(&listed.0) {
            self.approved
                .lock()
                .expect("held lock")
                .insert(tool.to_string());
            return false;
        }
        true
    }

    /// [`Held::still_held_blocking`] from async code, without an await on the call path (its
    /// future stays as small as it was): on a multi-threaded runtime the worker hands its other
    /// tasks on while the file is read (`block_in_place`); on a current-thread one it reads in
    /// place. Only a call to a held tool gets here.
    pub fn still_held_now(&self, tool: &str) -> bool {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(RuntimeFlavor::MultiThread) => {
                tokio::task::block_in_place(|| self.still_held_blocking(tool))
            }
            _ => self.still_held_blocking(tool),
        }
    }
}
