//! The on-disk tool-list cache: lets `search_tool_docs` cover servers never started this session.
//!
//! One JSON file per server under `<state dir>/tool-cache/`, keyed by a stable hash of the
//! server's name and transport, so editing a server's config invalidates its entry. Written
//! whenever a server connects; read lazily and kept in memory. A list written by the
//! background indexer is not kept (most are never asked for: 50 servers' lists are megabytes);
//! it is read back when a search or a discovery call needs it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};

use crate::checked_dir::new_file::WriteError;
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};
use crate::config::ServerSpec;

/// The cache's folder in the state folder.
const DIR: &str = "tool-cache";

#[derive(Deserialize)]
struct Entry {
    server: String,
    tools: Vec<Tool>,
}

/// An [`Entry`] to write, borrowed.
#[derive(Serialize)]
struct EntryRef<'a> {
    server: &'a str,
    tools: &'a [Tool],
}

/// Cached tool lists.
pub struct ToolCache {
    /// `MCP_BRIDGE_STATE_DIR`, checked (`checked_dir`) before the cache in it is used.
    state_dir: PathBuf,
    dir: PathBuf,
    memory: Mutex<HashMap<String, Option<Arc<Vec<Tool>>>>>,
    /// Bumped by every change of a list kept in memory ([`ToolCache::changes`]).
    changes: AtomicU64,
}

impl ToolCache {
    /// A cache stored under `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        ToolCache {
            dir: state_dir.join(DIR),
            state_dir: state_dir.to_path_buf(),
            memory: Mutex::new(HashMap::new()),
            changes: AtomicU64::new(0),
        }
    }

    fn file_name(spec: &ServerSpec) -> String {
        let transport = serde_json::to_string(&spec.transport).unwrap_or_default();
        // `allowedTools` and `disabledTools` are part of the key: the cached list is the
        // filtered one.
        let hidden = spec.policy.tools.visibility_key();
        format!(
            "{:016x}.json",
            fnv1a(&format!("{}\0{transport}\0{hidden}", spec.name))
        )
    }

    /// `<state>/tool-cache`, made when missing and checked: owned by this user, writable by
    /// no one else (a list another user wrote there would reach the model as tool docs).
    fn checked_dir(&self) -> Result<CheckedDir, DirError> {
        CheckedDir::open(&self.state_dir, Access::Shared, FIX_STATE)?.sub(
            DIR,
            Access::Shared,
            FIX_STATE,
        )
    }

    fn read(&self, spec: &ServerSpec) -> Option<Entry> {
        if !self.dir.is_dir() {
            return None;
        }
        let dir = match self.checked_dir() {
            Ok(dir) => dir,
            Err(err) => {
                tracing::warn!(cause = %err, "the tool cache is not used");
                return None;
            }
        };
        let mut file = dir
            .open_file(&Self::file_name(spec), libc::O_RDONLY, 0)
            .ok()?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).ok()?;
        serde_json::from_slice::<Entry>(&bytes).ok()
    }

    /// The cached tools of `spec`, if any.
    pub fn get(&self, spec: &ServerSpec) -> Option<Arc<Vec<Tool>>> {
        let mut mem = self.memory.lock().expect("cache lock");
        if let Some(hit) = mem.get(&spec.name) {
            return hit.clone();
        }
        // Refused tools are dropped again: a list on disk is never trusted to be filtered.
        let loaded = self.read(spec).filter(|e| e.server == spec.name).map(|e| {
            let mut tools = e.tools;
            tools.retain(|t| spec.tool_refusal(&t.name).is_none());
            Arc::new(tools)
        });
        mem.insert(spec.name.clone(), loaded.clone());
        loaded
    }

    /// Whether `spec` has a cached tool list (a list on disk is read to tell, not kept).
    pub fn has(&self, spec: &ServerSpec) -> bool {
        if let Some(hit) = self.memory.lock().expect("cache lock").get(&spec.name) {
            return hit.is_some();
        }
        self.read(spec).is_some_and(|e| e.server == spec.name)
    }

    /// How many times a kept list was replaced or dropped: equal readings mean that what
    /// [`ToolCache::get`] answers for a name it answered before is still that answer.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Records the tools of `spec` (memory and disk; disk failures are only logged).
    pub fn put(&self, spec: &ServerSpec, tools: Arc<Vec<Tool>>) {
        self.changes.fetch_add(1, Ordering::AcqRel);
        self.memory
            .lock()
            .expect("cache lock")
            .insert(spec.name.clone(), Some(tools.clone()));
        self.write(spec, &tools);
    }

    /// Records the tools of `spec` on disk only: [`ToolCache::get`] reads them back when asked.
    /// When they cannot be written they are kept in memory, as [`ToolCache::put`] does.
    pub fn put_on_disk(&self, spec: &ServerSpec, tools: Arc<Vec<Tool>>) {
        self.changes.fetch_add(1, Ordering::AcqRel);
        let written = self.write(spec, &tools);
        let mut memory = self.memory.lock().expect("cache lock");
        if written {
            memory.remove(&spec.name);
        } else {
            memory.insert(spec.name.clone(), Some(tools));
        }
    }

    /// Writes the entry of `spec`; false when it could not be (logged).
    fn write(&self, spec: &ServerSpec, tools: &[Tool]) -> bool {
        let entry = EntryRef {
            server: &spec.name,
            tools,
        };
        let write = || -> std::io::Result<()> {
            let dir = self.checked_dir().map_err(DirError::into_io)?;
            // A random name, created exclusively, in a folder only this user can write to.
            let mut new = dir.new_file(&Self::file_name(spec))?;
            let mut out = std::io::BufWriter::new(new.file());
            serde_json::to_writer(&mut out, &entry)?;
            std::io::Write::flush(&mut out)?;
            drop(out);
            new.commit(0o600).map_err(WriteError::into_io)
        };
        match write() {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(server = %crate::shown::Shown(&spec.name), cause = %err, "could not write the tool cache");
                false
            }
        }
    }
}

/// 64-bit FNV-1a: a stable hash for cache keys (std's hasher may change between releases).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Transport;

    fn spec(name: &str, cmd: &str) -> ServerSpec {
        let stdio = Transport::Stdio {
            command: cmd.into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        };
        ServerSpec::new(name, stdio, std::path::Path::new("/x.json"))
    }

    #[test]
    fn round_trips_and_is_keyed_by_config() {
        let d = tempfile::tempdir().expect("tempdir");
        let tool = Tool::new("echo", "Echo text", Arc::new(serde_json::Map::new()));
        let cache = ToolCache::new(d.path());
        let before = cache.changes();
        cache.put(&spec("a", "one"), Arc::new(vec![tool.clone()]));
        assert_ne!(cache.changes(), before, "a put is a change");
        let before = cache.changes();
        cache.get(&spec("a", "one"));
        assert_eq!(cache.changes(), before, "a read is none");
        cache.put_on_disk(&spec("a", "one"), Arc::new(vec![tool]));
        assert_ne!(
            cache.changes(),
            before,
            "a list dropped from memory is a change"
        );
        let fresh = ToolCache::new(d.path());
        assert_eq!(
            fresh.get(&spec("a", "one")).expect("cached")[0].name,
            "echo"
        );
        assert!(
            ToolCache::new(d.path()).get(&spec("a", "two")).is_none(),
            "config change invalidates"
        );
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn the_tool_rules_are_part_of_the_key_and_refused_tools_never_come_back() {
        let d = tempfile::tempdir().expect("tempdir");
        let tool = |n: &str| Tool::new(n.to_string(), "t", Arc::new(serde_json::Map::new()));
        let plain = spec("a", "one");
        ToolCache::new(d.path()).put(&plain, Arc::new(vec![tool("get"), tool("drop")]));
        let mut ruled = spec("a", "one");
        let mut policy = crate::config::ServerPolicy::default();
        policy.tools.disabled = vec![crate::config::Pattern::new("dr*")];
        ruled.policy = Arc::new(policy);
        assert!(ToolCache::new(d.path()).get(&ruled).is_none(), "new key");
        // A file under the ruled key that still holds a refused tool (written by hand, or by
        // an older version) is filtered on reading.
        let file = d.path().join(DIR).join(ToolCache::file_name(&plain));
        std::fs::copy(&file, d.path().join(DIR).join(ToolCache::file_name(&ruled))).expect("copy");
        let got = ToolCache::new(d.path()).get(&ruled).expect("cached");
        let names: Vec<&str> = got.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["get"]);
    }

    #[test]
    fn a_list_put_on_disk_only_is_read_back_when_asked() {
        let d = tempfile::tempdir().expect("tempdir");
        let tool = Tool::new("echo", "Echo text", Arc::new(serde_json::Map::new()));
        let cache = ToolCache::new(d.path());
        let a = spec("a", "one");
        assert!(!cache.has(&a));
        cache.put_on_disk(&a, Arc::new(vec![tool]));
        assert!(cache.memory.lock().expect("lock").is_empty(), "not kept");
        assert!(cache.has(&a));
        assert!(
            cache.memory.lock().expect("lock").is_empty(),
            "has() keeps nothing"
        );
        assert_eq!(cache.get(&a).expect("read back")[0].name, "echo");
        assert!(cache.has(&spec("b", "one")) == cache.get(&spec("b", "one")).is_some());
    }

    #[test]
    fn a_list_another_user_could_have_written_is_not_read() {
        if crate::checked_dir::euid() != 0 {
            return; // chown needs root; CI runs the tests as root
        }
        let d = tempfile::tempdir().expect("tempdir");
        let tool = Tool::new("echo", "Echo text", Arc::new(serde_json::Map::new()));
        let a = spec("a", "one");
        ToolCache::new(d.path()).put(&a, Arc::new(vec![tool]));
        let file = d.path().join(DIR).join(ToolCache::file_name(&a));
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).expect("chown");
        assert!(
            ToolCache::new(d.path()).get(&a).is_none(),
            "another user's file"
        );
        std::os::unix::fs::chown(&file, Some(0), Some(0)).expect("chown");
        assert!(ToolCache::new(d.path()).get(&a).is_some());
        let folder = d.path().join(DIR);
        std::os::unix::fs::chown(&folder, Some(65534), Some(65534)).expect("chown");
        assert!(
            ToolCache::new(d.path()).get(&a).is_none(),
            "another user's folder"
        );
    }
}
