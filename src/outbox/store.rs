//! [`Outbox`]: this bridge session's folder of files copied out of the sandbox
//! (`<state>/outbox/<session>/`), the index of them that `resources/read` and
//! `resources/list` serve, and the bound on what all sessions keep together.
//!
//! Only the host names files here (`names.rs`); a file is received into a fresh part file
//! (created exclusively, so nothing there is followed or overwritten) and linked to its final
//! name without replacing anything. The session folder is made when its first file arrives;
//! then the folders of earlier sessions older than `MCP_BRIDGE_OUTBOX_KEEP_DAYS` are removed,
//! and while all folders together would pass `MCP_BRIDGE_OUTBOX_MAX_TOTAL`, the oldest
//! earlier ones go. The folder of another bridge that is still running is left alone.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::names::{mime_for, numbered, sanitize};
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};
use crate::config::{ImageBudget, OutboxLimits, Settings};
use crate::report::SavedFile;

/// The process name of a running bridge, as `/proc/PID/comm` shows it.
const BRIDGE_COMM: &str = "mcp-code-bridge";

/// This session's delivered files, and the space all sessions use.
pub struct Outbox {
    /// `<state>/outbox`.
    root: PathBuf,
    /// `<root>/<session id>`.
    dir: PathBuf,
    /// `MCP_BRIDGE_STATE_DIR`, checked (`private_dir`) before anything is made in it.
    state_dir: PathBuf,
    limits: OutboxLimits,
    images: ImageBudget,
    next_part: AtomicU64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The session folder, once made (and earlier sessions swept).
    folder: Option<Arc<CheckedDir>>,
    /// Delivered files by URI, and their order.
    by_uri: HashMap<String, SavedFile>,
    order: Vec<String>,
    /// File names taken in the folder.
    names: HashSet<String>,
    /// Bytes of this session's files, part files included.
    used: u64,
    /// Earlier sessions' folders, oldest first, with their sizes.
    others: Vec<(PathBuf, u64)>,
}

impl Outbox {
    /// The outbox of a new session under `settings.state_dir`. Touches nothing on disk until
    /// a file arrives.
    pub fn new(settings: &Settings) -> Arc<Outbox> {
        static SESSIONS: AtomicU64 = AtomicU64::new(1);
        let secs = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let session = format!(
            "{secs}-{}-{}",
            std::process::id(),
            SESSIONS.fetch_add(1, Ordering::Relaxed)
        );
        let root = settings.state_dir.join("outbox");
        Arc::new(Outbox {
            dir: root.join(session),
            root,
            state_dir: settings.state_dir.clone(),
            limits: settings.data.outbox,
            images: settings.data.images,
            next_part: AtomicU64::new(1),
            state: Mutex::default(),
        })
    }

    /// This session's folder (it exists once a file was delivered).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits files are received under.
    pub fn limits(&self) -> OutboxLimits {
        self.limits
    }

    /// How pictures are returned.
    pub fn images(&self) -> ImageBudget {
        self.images
    }

    /// A new, empty part file in the session folder (made, and earlier sessions swept, on
    /// first use), created exclusively with mode 0600.
    ///
    /// # Errors
    /// The folder or the file could not be created.
    pub fn new_part(&self) -> io::Result<(PathBuf, File)> {
        let folder = self.ensure_folder().map_err(DirError::into_io)?;
        let n = self.next_part.fetch_add(1, Ordering::Relaxed);
        let name = format!(".part-{n}");
        let file = folder.create_file(&name, 0o600)?;
        Ok((folder.join(&name), file))
    }

    /// Makes the session folder (0700, fresh) in `<state>/outbox` (0700), both checked
    /// (`private_dir`: owned by this user, no one else may write there), on first use.
    fn ensure_folder(&self) -> Result<Arc<CheckedDir>, DirError> {
        let mut state = self.state.lock().expect("outbox lock");
        if let Some(folder) = &state.folder {
            return Ok(folder.clone());
        }
        let root = CheckedDir::open(&self.state_dir, Access::Shared, FIX_STATE)?.sub(
            "outbox",
            Access::Private,
            FIX_STATE,
        )?;
        let session = self
            .dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("session");
        let folder = Arc::new(root.fresh_sub(session, 0o700, FIX_STATE)?);
        state.others = sweep(&self.root, &self.dir, self.limits.keep);
        state.folder = Some(folder.clone());
        Ok(folder)
    }

    /// Counts `bytes` more against `MCP_BRIDGE_OUTBOX_MAX_TOTAL`, removing the oldest earlier
    /// sessions' folders while they are in the way; false when even then they do not fit.
    pub fn reserve(&self, bytes: u64) -> bool {
        let mut state = self.state.lock().expect("outbox lock");
        loop {
            let others: u64 = state.others.iter().map(|(_, b)| b).sum();
            if state.used + others + bytes <= self.limits.max_total {
                state.used += bytes;
                return true;
            }
            if state.others.is_empty() {
                return false;
            }
            let (oldest, _) = state.others.remove(0);
            remove_folder(&oldest);
        }
    }

    /// Gives back `bytes` reserved for a file that was not delivered.
    pub fn release(&self, bytes: u64) {
        let mut state = self.state.lock().expect("outbox lock");
        state.used = state.used.saturating_sub(bytes);
    }

    /// Gives the received `part` (`size` bytes) its final name, from `wanted` (untrusted):
    /// sanitized, and numbered when taken. Nothing is replaced.
    ///
    /// # Errors
    /// Linking or removing the part failed.
    pub fn commit(&self, part: &Path, wanted: &str, size: u64) -> io::Result<SavedFile> {
        let base = sanitize(wanted);
        let mut state = self.state.lock().expect("outbox lock");
        let mut n = 1;
        let (name, path) = loop {
            let name = if n == 1 {
                base.clone()
            } else {
                numbered(&base, n)
            };
            n += 1;
            if state.names.contains(&name) {
                continue;
            }
            let path = self.dir.join(&name);
            match std::fs::hard_link(part, &path) {
                Ok(()) => break (name, path),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        std::fs::remove_file(part)?;
        let file = SavedFile {
            uri: file_uri(&path),
            mime: mime_for(&name).to_string(),
            name: name.clone(),
            path,
            size,
            picture: None,
        };
        state.names.insert(name);
        state.order.push(file.uri.clone());
        state.by_uri.insert(file.uri.clone(), file.clone());
        Ok(file)
    }

    /// The delivered file with `uri`, if this session delivered one.
    pub fn find(&self, uri: &str) -> Option<SavedFile> {
        self.state
            .lock()
            .expect("outbox lock")
            .by_uri
            .get(uri)
            .cloned()
    }

    /// This session's delivered files, oldest first.
    pub fn list(&self) -> Vec<SavedFile> {
        let state = self.state.lock().expect("outbox lock");
        state
            .order
            .iter()
            .filter_map(|u| state.by_uri.get(u).cloned())
            .collect()
    }

    /// The content of delivered file `file`, read back from disk (at most its recorded size).
    ///
    /// # Errors
    /// The file is gone or unreadable, or it changed size on the host.
    pub fn read(&self, file: &SavedFile) -> io::Result<Vec<u8>> {
        let bytes = std::fs::read(&file.path)?;
        if bytes.len() as u64 != file.size {
            return Err(io::Error::other(
                "the file changed on the host since it was saved",
            ));
        }
        Ok(bytes)
    }
}

/// The `file://` URI of a host path, its bytes outside the unreserved set percent-encoded.
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Removes earlier sessions' folders under `root` older than `keep`, and returns the others
/// (not `ours`, not a running bridge's) oldest first with their sizes.
fn sweep(root: &Path, ours: &Path, keep: std::time::Duration) -> Vec<(PathBuf, u64)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let now = SystemTime::now();
    let mut others = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if path == ours || !meta.is_dir() || session_running(&entry.file_name()) {
            continue;
        }
        let modified = meta.modified().unwrap_or(now);
        if now.duration_since(modified).unwrap_or_default() > keep {
            remove_folder(&path);
            continue;
        }
        let size = std::fs::read_dir(&path)
            .map(|files| {
                files
                    .flatten()
                    .filter_map(|f| f.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        others.push((modified, path, size));
    }
    others.sort_by_key(|(modified, _, _)| *modified);
    others.into_iter().map(|(_, p, s)| (p, s)).collect()
}

/// True when the session folder `name` (`<secs>-<pid>-<n>`) belongs to a bridge that is
/// still running (its pid is a process named like the bridge).
fn session_running(name: &std::ffi::OsStr) -> bool {
    let Some(pid) = name
        .to_str()
        .and_then(|n| n.split('-').nth(1))
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == BRIDGE_COMM)
}

fn remove_folder(path: &Path) {
    match std::fs::remove_dir_all(path) {
        Ok(()) => tracing::debug!(folder = %path.display(), "removed an earlier session's outbox"),
        Err(err) => {
            tracing::warn!(folder = %path.display(), cause = %err, "could not remove an earlier session's outbox")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap as Map;
    use std::io::Write;

    fn outbox(state: &Path, extra: &[(&str, &str)]) -> Arc<Outbox> {
        let mut map: Map<String, String> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.insert("MCP_BRIDGE_STATE_DIR".into(), state.display().to_string());
        let settings = Settings::from_lookup(|k| map.get(k).cloned()).expect("settings");
        Outbox::new(&settings)
    }

    fn deliver(o: &Outbox, name: &str, data: &[u8]) -> SavedFile {
        let (part, mut f) = o.new_part().expect("part");
        f.write_all(data).expect("write");
        assert!(o.reserve(data.len() as u64));
        o.commit(&part, name, data.len() as u64).expect("commit")
    }

    #[test]
    fn files_are_named_by_the_host_and_never_replaced() {
        let state = tempfile::tempdir().expect("temp");
        let o = outbox(state.path(), &[]);
        let a = deliver(&o, "plot.png", b"1");
        let b = deliver(&o, "plot.png", b"22");
        let c = deliver(&o, "../../../etc/passwd", b"333");
        assert_eq!(
            (a.name.as_str(), b.name.as_str()),
            ("plot.png", "plot-2.png")
        );
        assert_eq!(c.name, "_.._.._etc_passwd");
        for f in [&a, &b, &c] {
            assert_eq!(f.path.parent(), Some(o.dir()), "{f:?}");
            assert!(f.uri.starts_with("file:///"), "{}", f.uri);
            assert_eq!(o.find(&f.uri).as_ref(), Some(f));
        }
        assert_eq!(std::fs::read(&a.path).expect("read"), b"1");
        assert_eq!(o.read(&b).expect("read"), b"22");
        assert_eq!(o.list().len(), 3);
        // a file the host put there itself is not replaced either
        std::fs::write(o.dir().join("x.csv"), "mine").expect("write");
        let d = deliver(&o, "x.csv", b"theirs");
        assert_eq!(d.name, "x-2.csv");
        assert_eq!(
            std::fs::read_to_string(o.dir().join("x.csv")).expect("read"),
            "mine"
        );
        let names: Vec<_> = std::fs::read_dir(o.dir())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().into_string().expect("utf8"))
            .collect();
        assert!(!names.iter().any(|n| n.starts_with(".part")), "{names:?}");
    }

    #[test]
    fn old_and_excess_sessions_are_removed() {
        let state = tempfile::tempdir().expect("temp");
        let root = state.path().join("outbox");
        let old = root.join("1000-1-1");
        let recent = root.join("2000-1-1");
        for (dir, bytes) in [(&old, 10), (&recent, 600 << 10)] {
            std::fs::create_dir_all(dir).expect("mkdir");
            std::fs::write(dir.join("f"), vec![0u8; bytes]).expect("write");
        }
        let ancient = SystemTime::now() - std::time::Duration::from_secs(30 * 86_400);
        File::open(&old)
            .and_then(|f| f.set_modified(ancient))
            .expect("age the folder");
        let o = outbox(state.path(), &[("MCP_BRIDGE_OUTBOX_MAX_TOTAL", "1m")]);
        deliver(&o, "a", b"x");
        assert!(!old.exists(), "older than the keep days");
        assert!(recent.exists(), "recent, and room left");
        assert!(
            o.reserve(500 << 10),
            "room is made by removing the oldest session"
        );
        assert!(!recent.exists());
        assert!(
            !o.reserve(1 << 20),
            "this session alone cannot pass the total"
        );
    }

    #[test]
    fn uris_are_percent_encoded() {
        assert_eq!(
            file_uri(Path::new("/s/out/a b%#?.png")),
            "file:///s/out/a%20b%25%23%3F.png"
        );
    }
}
