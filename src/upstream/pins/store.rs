//! [`PinStore`]: the pinned tool definitions, `$MCP_BRIDGE_STATE_DIR/pins/pins.json` (a private
//! checked folder, the file 0600, changed under a `flock` through `PrivateFile`, so bridges and
//! `servers --approve-changes` never lose each other's changes). One record per server name and
//! definition identity: the pinned text of each tool and the changed or new tools last listed
//! (`pending`), which `servers` shows as a diff. Bounded in servers, tools, text and bytes; a
//! file the bridge could not have written is refused as damaged, never pinned over.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::canonical::Definition;
use super::error::PinError;
use crate::checked_dir::private_file::{judge_records, parse_json, PrivateFile, PrivateFileError};
use crate::checked_dir::{Access, CheckedDir, FIX_STATE};

/// Server records kept at most (name and identity pairs).
pub const MAX_SERVERS: usize = 256;
/// Records kept at most per server name: an entry that now runs something else is pinned
/// afresh, and the oldest of its earlier identities is forgotten past this many.
pub const MAX_IDENTITIES: usize = 4;
/// Tools pinned at most per server (and pending at most).
pub const MAX_TOOLS: usize = 2048;
/// Bytes of one tool's text kept for diffs; its digest is over the whole text.
pub const MAX_TEXT: usize = 64 << 10;
/// The file is refused when larger, and a change that would make it larger is refused.
pub const MAX_FILE: u64 = 32 << 20;
/// Bytes of a tool's name or a server's name in a record.
const MAX_NAME: usize = 1024;
/// The folder in the state folder.
const DIR: &str = "pins";
/// The file.
const FILE: &str = "pins.json";
/// The lock taken while the file changes.
const LOCK: &str = "pins.lock";
/// The file's format.
const VERSION: u32 = 1;

/// One tool's pinned (or pending) definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    /// SHA-256 (hex) of the whole canonical text.
    pub sha256: String,
    /// The canonical text, at most [`MAX_TEXT`] bytes (cut at a character boundary).
    pub text: String,
    /// Whether `text` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

impl Pin {
    /// `def` as kept: its digest and its text up to [`MAX_TEXT`] bytes.
    pub fn of(def: &Definition) -> Pin {
        let mut end = def.text.len().min(MAX_TEXT);
        while !def.text.is_char_boundary(end) {
            end -= 1;
        }
        Pin {
            sha256: def.sha256.clone(),
            text: def.text[..end].to_string(),
            cut: end < def.text.len(),
        }
    }

    fn is_sound(&self) -> bool {
        self.sha256.len() == 64
            && self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            && self.text.len() <= MAX_TEXT
    }
}

/// One server's pins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The server's name.
    pub name: String,
    /// SHA-256 of what it runs or reaches (`canonical::identity`).
    pub identity: String,
    /// The pinned definitions by tool name.
    pub tools: BTreeMap<String, Pin>,
    /// The changed or new definitions it listed at its last start, by tool name.
    #[serde(default)]
    pub pending: BTreeMap<String, Pin>,
}

impl Record {
    fn is(&self, name: &str, identity: &str) -> bool {
        self.name == name && self.identity == identity
    }

    fn is_sound(&self) -> bool {
        let names_ok = |m: &BTreeMap<String, Pin>| {
            m.len() <= MAX_TOOLS && m.iter().all(|(k, p)| k.len() <= MAX_NAME && p.is_sound())
        };
        self.name.len() <= MAX_NAME
            && self.identity.len() == 64
            && names_ok(&self.tools)
            && names_ok(&self.pending)
    }
}

/// The file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Contents {
    version: u32,
    servers: Vec<Record>,
}

/// What a start's tool list is against the pins.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The listed tools not held to their pin: changed, or new since the server was pinned.
    pub held: BTreeSet<String>,
    /// Whether the server was pinned just now (its first start).
    pub first: bool,
}

/// The pinned definitions of one state folder.
#[derive(Debug, Clone)]
pub struct PinStore {
    state_dir: PathBuf,
}

impl PinStore {
    /// The store under `state_dir` (nothing is read or made yet).
    pub fn new(state_dir: &Path) -> Self {
        PinStore {
            state_dir: state_dir.to_path_buf(),
        }
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.state_dir.join(DIR).join(FILE)
    }

    /// Judges `listed` (each tool's name and definition, as the server listed them) against
    /// the pins of `name` at `identity`: no record yet, every tool is pinned now; else the
    /// tools whose digest differs or that have no pin are held, and recorded as pending (the
    /// file is written only when that record changes).
    ///
    /// # Errors
    /// Damaged, full, too many tools, or the file cannot be read or written.
    pub fn check(
        &self,
        name: &str,
        identity: &str,
        listed: &[(String, Definition)],
    ) -> Result<Verdict, PinError> {
        if listed.len() > MAX_TOOLS {
            return Err(PinError::TooManyTools {
                server: crate::shown::Shown(name).to_string(),
                count: listed.len(),
                max: MAX_TOOLS,
            });
        }
        self.locked(|c| {
            let Some(rec) = c.servers.iter_mut().find(|r| r.is(name, identity)) else {
                let same_name: Vec<usize> = (0..c.servers.len())
                    .filter(|&i| c.servers[i].name == name)
                    .collect();
                if same_name.len() >= MAX_IDENTITIES {
                    // Records are kept in the order they were made: the first is the oldest.
                    c.servers.remove(same_name[0]);
                }
                if c.servers.len() >= MAX_SERVERS {
                    return Err(self.full(format!("{MAX_SERVERS} servers")));
                }
                let tools = listed
                    .iter()
                    .map(|(t, d)| (t.clone(), Pin::of(d)))
                    .collect();
                c.servers.push(Record {
                    name: name.to_string(),
                    identity: identity.to_string(),
                    tools,
                    pending: BTreeMap::new(),
                });
                let verdict = Verdict {
                    held: BTreeSet::new(),
                    first: true,
                };
                return Ok((true, verdict));
            };
            let mut pending = BTreeMap::new();
            for (tool, def) in listed {
                let same = rec.tools.get(tool).is_some_and(|p| p.sha256 == def.sha256);
                if !same {
                    pending.entry(tool.clone()).or_insert_with(|| Pin::of(def));
                }
            }
            let held = pending.keys().cloned().collect();
            let write = pending != rec.pending;
            rec.pending = pending;
            Ok((write, Verdict { held, first: false }))
        })
    }

    /// The record of `name` at `identity`, when there is one.
    ///
    /// # Errors
    /// Damaged, or the file cannot be read.
    pub fn record(&self, name: &str, identity: &str) -> Result<Option<Record>, PinError> {
        let dir = self.dir()?;
        let c = self.parse(self.file(&dir).read().map_err(self.fail())?)?;
        Ok(c.servers.into_iter().find(|r| r.is(name, identity)))
    }

    /// Pins the pending definitions of `name` at `identity` that are still the ones shown
    /// (`shown`: tool name to digest); returns how many were pinned.
    ///
    /// # Errors
    /// Damaged, or the file cannot be read or written.
    pub fn approve(
        &self,
        name: &str,
        identity: &str,
        shown: &BTreeMap<String, String>,
    ) -> Result<usize, PinError> {
        self.locked(|c| {
            let Some(rec) = c.servers.iter_mut().find(|r| r.is(name, identity)) else {
                return Ok((false, 0));
            };
            let take: Vec<String> = rec
                .pending
                .iter()
                .filter(|(t, p)| shown.get(*t) == Some(&p.sha256))
                .map(|(t, _)| t.clone())
                .collect();
            for tool in &take {
                let pin = rec.pending.remove(tool).expect("listed just above");
                rec.tools.insert(tool.clone(), pin);
            }
            Ok((!take.is_empty(), take.len()))
        })
    }

    fn dir(&self) -> Result<CheckedDir, PinError> {
        Ok(
            CheckedDir::open(&self.state_dir, Access::Shared, FIX_STATE)?.sub(
                DIR,
                Access::Private,
                FIX_STATE,
            )?,
        )
    }

    /// Runs `change` on the contents under the lock; writes them when it says so.
    fn locked<T>(
        &self,
        change: impl FnOnce(&mut Contents) -> Result<(bool, T), PinError>,
    ) -> Result<T, PinError> {
        let dir = self.dir()?;
        self.file(&dir).changed(self.fail(), |bytes| {
            let mut contents = self.parse(bytes)?;
            let (write, out) = change(&mut contents)?;
            if !write {
                return Ok((None, out));
            }
            contents.version = VERSION;
            let text = serde_json::to_vec_pretty(&contents).expect("pins serialize");
            if text.len() as u64 > MAX_FILE {
                return Err(self.full(format!("{MAX_FILE} bytes")));
            }
            Ok((Some(text), out))
        })
    }

    fn file<'a>(&self, dir: &'a CheckedDir) -> PrivateFile<'a> {
        PrivateFile::new(dir, FILE, LOCK, MAX_FILE)
    }

    fn fail(&self) -> impl Fn(PrivateFileError) -> PinError + '_ {
        move |e| {
            e.said(
                |what, source| PinError::Io {
                    path: self.shown(),
                    what,
                    source,
                },
                |at| self.damaged(at),
            )
        }
    }

    fn shown(&self) -> String {
        crate::shown::ShownPath(&self.path()).to_string()
    }

    fn damaged(&self, at: String) -> PinError {
        PinError::Damaged {
            path: self.shown(),
            at,
        }
    }

    fn full(&self, what: String) -> PinError {
        PinError::Full {
            path: self.shown(),
            what,
        }
    }

    /// The records in the file's bytes (none without a file), judged: format, counts, names,
    /// digests and text sizes.
    fn parse(&self, bytes: Option<Vec<u8>>) -> Result<Contents, PinError> {
        let Some(text) = bytes else {
            return Ok(Contents {
                version: VERSION,
                servers: Vec::new(),
            });
        };
        let c: Contents = parse_json(&text).map_err(|at| self.damaged(at))?;
        judge_records(
            c.version,
            VERSION,
            &c.servers,
            MAX_SERVERS,
            "server record",
            |r| r.is_sound(),
        )
        .map_err(|at| self.damaged(at))?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(text: &str) -> Definition {
        Definition {
            sha256: crate::ids::sha256_hex(text.as_bytes()),
            text: text.to_string(),
        }
    }

    fn listed(tools: &[(&str, &str)]) -> Vec<(String, Definition)> {
        tools.iter().map(|(n, t)| (n.to_string(), def(t))).collect()
    }

    const ID: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn first_start_pins_then_a_change_or_a_new_tool_is_held_until_approved() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PinStore::new(dir.path());
        let v = store
            .check("s", ID, &listed(&[("a", "A"), ("b", "B")]))
            .expect("pinned");
        assert!(v.first && v.held.is_empty());
        let v = store
            .check("s", ID, &listed(&[("a", "A"), ("b", "B")]))
            .expect("same");
        assert!(!v.first && v.held.is_empty());
        // b changed, c is new, a is gone.
        let v = store
            .check("s", ID, &listed(&[("b", "B2"), ("c", "C")]))
            .expect("held");
        assert_eq!(v.held, ["b", "c"].map(String::from).into());
        let rec = store.record("s", ID).expect("read").expect("a record");
        assert_eq!(rec.pending["b"].text, "B2");
        assert_eq!(rec.tools["b"].text, "B", "the pin is kept");
        // Another identity of the same name is another server.
        let v = store
            .check("s", &ID.replace('0', "1"), &listed(&[("b", "B2")]))
            .expect("x");
        assert!(v.first);
        // Approval pins what was shown only.
        let shown: BTreeMap<String, String> = [
            ("b".to_string(), def("B2").sha256),
            ("c".to_string(), def("other").sha256),
        ]
        .into();
        assert_eq!(store.approve("s", ID, &shown).expect("approved"), 1);
        let v = store
            .check("s", ID, &listed(&[("b", "B2"), ("c", "C")]))
            .expect("x");
        assert_eq!(v.held, ["c"].map(String::from).into());
    }

    #[test]
    fn an_entry_run_many_ways_keeps_its_newest_identities_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PinStore::new(dir.path());
        let id = |i: usize| format!("{i:064x}");
        store
            .check("other", &id(0), &listed(&[("a", "A")]))
            .expect("pinned");
        for i in 0..MAX_IDENTITIES + 2 {
            assert!(
                store
                    .check("s", &id(i), &listed(&[("a", "A")]))
                    .expect("x")
                    .first
            );
        }
        let kept = |i: usize| store.record("s", &id(i)).expect("read").is_some();
        assert!(!kept(0) && !kept(1), "the oldest identities are forgotten");
        assert!((2..MAX_IDENTITIES + 2).all(kept));
        assert!(store.record("other", &id(0)).expect("read").is_some());
        // The pins of an identity kept still hold its tools.
        let v = store
            .check("s", &id(MAX_IDENTITIES + 1), &listed(&[("a", "A2")]))
            .expect("held");
        assert_eq!(v.held, ["a"].map(String::from).into());
    }

    #[test]
    fn bounds_and_damage_are_clear_errors_and_nothing_is_pinned_over_a_damaged_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PinStore::new(dir.path());
        let many: Vec<(String, Definition)> = (0..=MAX_TOOLS)
            .map(|i| (format!("t{i}"), def("x")))
            .collect();
        assert!(matches!(
            store.check("s", ID, &many),
            Err(PinError::TooManyTools { count, .. }) if count == MAX_TOOLS + 1
        ));
        for i in 0..MAX_SERVERS {
            store
                .check(&format!("s{i}"), ID, &listed(&[("a", "A")]))
                .expect("pinned");
        }
        assert!(matches!(
            store.check("one-more", ID, &listed(&[("a", "A")])),
            Err(PinError::Full { .. })
        ));
        let big = "y".repeat(MAX_TEXT + 10);
        let pin = Pin::of(&def(&big));
        assert!(pin.cut && pin.text.len() == MAX_TEXT && pin.sha256 == def(&big).sha256);

        std::fs::write(store.path(), b"{\"version\": 1, \"servers\": [").expect("damage");
        let err = store
            .check("s0", ID, &listed(&[("a", "A")]))
            .expect_err("damaged");
        assert!(matches!(err, PinError::Damaged { .. }), "{err}");
        assert!(err.to_string().contains("damaged"), "{err}");
        assert_eq!(
            std::fs::read(store.path()).expect("kept"),
            b"{\"version\": 1, \"servers\": [",
            "a damaged file is left as it is"
        );
        std::fs::write(
            store.path(),
            br#"{"version":1,"servers":[{"name":"s","identity":"x","tools":{}}]}"#,
        )
        .expect("write");
        assert!(matches!(
            store.record("s", "x"),
            Err(PinError::Damaged { .. })
        ));
    }
}
