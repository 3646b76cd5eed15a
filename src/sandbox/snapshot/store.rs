//! [`SnapshotStore`]: the one file holding this bridge's namespace snapshot, under
//! `<MCP_BRIDGE_STATE_DIR>/snapshots/` (0700), mode 0600, replaced atomically (written to a
//! temporary file, then renamed over it), removed when the bridge exits. The bytes are opaque:
//! the host never unpickles them. Files of bridges that died without removing theirs are
//! removed by the next bridge on the host.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use tokio::io::AsyncWriteExt;

use crate::checked_dir::own_file::{self, Keep};
use crate::checked_dir::{Access, CheckedDir, DirError, FIX_STATE};
use crate::container::{Owner, LABEL_HOST, LABEL_PID, LABEL_STARTED};

/// Folder of the state dir the snapshots live in.
const DIR: &str = "snapshots";
/// File name prefix; the rest is `<pid>-<pid start time>-<host>`.
const PREFIX: &str = "snap-";

/// The snapshot file of this bridge process; a cheap handle is an `Arc` of it.
#[derive(Debug)]
pub struct SnapshotStore {
    /// `MCP_BRIDGE_STATE_DIR`, checked (`checked_dir`) before anything is made in it.
    state_dir: PathBuf,
    dir: PathBuf,
    path: PathBuf,
    tmp: PathBuf,
    /// When the snapshot on disk was saved; None when there is none.
    saved: Mutex<Option<Instant>>,
}

/// A snapshot being written; [`SnapshotStore::commit`] puts it in place.
pub struct SnapshotWriter {
    file: tokio::fs::File,
    tmp: PathBuf,
    written: u64,
}

impl SnapshotStore {
    /// The store of this bridge process under `state_dir` (nothing is created yet).
    #[cfg(test)]
    pub fn new(state_dir: &Path) -> Self {
        SnapshotStore::for_slot(state_dir, None)
    }

    /// The store of the client sandbox `slot` of this bridge process (`serve --http`): its
    /// file name adds `-<slot>` (made file-safe) to the process's.
    pub fn for_slot(state_dir: &Path, slot: Option<&str>) -> Self {
        let me = Owner::current();
        let dir = state_dir.join(DIR);
        let started = me.started.map(|s| s.to_string()).unwrap_or_default();
        let mut name = format!("{PREFIX}{}-{started}-{}", me.pid, file_safe(&me.host));
        if let Some(slot) = slot {
            name.push('-');
            name.push_str(&file_safe(slot));
        }
        SnapshotStore {
            path: dir.join(&name),
            tmp: dir.join(format!("{name}.tmp")),
            dir,
            state_dir: state_dir.to_path_buf(),
            saved: Mutex::new(None),
        }
    }

    /// Where the snapshot is kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When the snapshot on disk was saved, if there is one.
    pub fn saved_at(&self) -> Option<Instant> {
        *self.saved.lock().expect("snapshot lock")
    }

    /// Starts writing a new snapshot (the old one stays until [`SnapshotStore::commit`]).
    ///
    /// # Errors
    /// When the folder is refused (`checked_dir`: another user could reach it) or the
    /// temporary file cannot be created.
    pub fn writer(&self) -> std::io::Result<SnapshotWriter> {
        let dir = self.checked_dir().map_err(DirError::into_io)?;
        let tmp = self
            .tmp
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        // Left by a failed write of this process.
        match dir.remove_file(tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = dir.create_file(tmp, 0o600)?;
        Ok(SnapshotWriter {
            file: tokio::fs::File::from_std(file),
            tmp: self.tmp.clone(),
            written: 0,
        })
    }

    /// Replaces the snapshot with what `writer` wrote.
    ///
    /// # Errors
    /// When the file cannot be flushed or renamed; the old snapshot is then gone too (it no
    /// longer matches the namespace).
    pub async fn commit(&self, writer: SnapshotWriter) -> std::io::Result<u64> {
        let SnapshotWriter {
            mut file,
            tmp,
            written,
        } = writer;
        let flushed = file.flush().await;
        drop(file);
        let done = flushed.and_then(|()| std::fs::rename(&tmp, &self.path));
        match done {
            Ok(()) => {
                *self.saved.lock().expect("snapshot lock") = Some(Instant::now());
                Ok(written)
            }
            Err(err) => {
                let _ = std::fs::remove_file(&tmp);
                self.discard();
                Err(err)
            }
        }
    }

    /// Drops the snapshot (and a half-written one); true when there was one.
    pub fn discard(&self) -> bool {
        let had = self.saved.lock().expect("snapshot lock").take().is_some();
        let _ = std::fs::remove_file(&self.tmp);
        let _ = std::fs::remove_file(&self.path);
        had
    }

    /// Opens the snapshot to read it back, with its size; None when there is none.
    pub fn open(&self) -> Option<(tokio::fs::File, u64)> {
        self.saved_at()?;
        let file = own_file::open(&self.path, libc::O_RDONLY, Keep::Private).ok()?;
        let size = file.metadata().ok()?.len();
        Some((tokio::fs::File::from_std(file), size))
    }

    /// `<state>/snapshots` (0700) in the state folder, both checked: owned by this user and
    /// writable by no one else.
    fn checked_dir(&self) -> Result<CheckedDir, DirError> {
        CheckedDir::open(&self.state_dir, Access::Shared, FIX_STATE)?.sub(
            DIR,
            Access::Private,
            FIX_STATE,
        )
    }

    /// Removes the snapshot files of bridges on this host that are no longer running (only
    /// in a folder that passes the checks). Returns how many were removed.
    pub fn remove_dead(&self) -> usize {
        let me = Owner::current();
        if !self.dir.exists() || self.checked_dir().is_err() {
            return 0;
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(labels) = name.to_str().and_then(|n| owner_labels(n, &me)) else {
                continue;
            };
            if me.is_dead_owner(&labels) && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

impl SnapshotWriter {
    /// Appends `bytes`.
    ///
    /// # Errors
    /// When the disk refuses.
    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes).await?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Gives up: the temporary file is removed, the old snapshot stays.
    pub fn abort(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// `host` with every character but `[A-Za-z0-9.]` replaced by `_` (no `-`: it separates fields).
fn file_safe(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The owner labels a snapshot file name stands for (`snap-<pid>-<start>-<host>[.tmp]`), as
/// `Owner::is_dead_owner` reads them; None for any other name.
fn owner_labels(name: &str, me: &Owner) -> Option<HashMap<String, String>> {
    let rest = name.strip_prefix(PREFIX)?;
    let rest = rest.strip_suffix(".tmp").unwrap_or(rest);
    // `<pid>-<start>-<host>[-<slot>]`: the host and the slot are file-safe (no `-`).
    let mut fields = rest.splitn(4, '-');
    let (pid, started, host) = (fields.next()?, fields.next()?, fields.next()?);
    pid.parse::<u32>().ok()?;
    // The file name carries the host made file-safe; compare it the same way.
    let host = if host == file_safe(&me.host) {
        me.host.clone()
    } else {
        host.to_string()
    };
    Some(HashMap::from([
        (LABEL_HOST.to_string(), host),
        (LABEL_PID.to_string(), pid.to_string()),
        (LABEL_STARTED.to_string(), started.to_string()),
    ]))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[tokio::test]
    async fn a_snapshot_is_written_aside_then_replaced_private_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SnapshotStore::new(dir.path());
        assert!(store.open().is_none());
        let mut w = store.writer().expect("writer");
        w.write(b"first").await.expect("write");
        assert!(store.open().is_none(), "nothing in place before commit");
        assert_eq!(store.commit(w).await.expect("commit"), 5);
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(store.path()), 0o600);
        assert_eq!(mode(&dir.path().join(DIR)), 0o700);
        let mut w = store.writer().expect("writer");
        w.write(b"second, longer").await.expect("write");
        assert_eq!(std::fs::read(store.path()).expect("old"), b"first");
        w.abort();
        assert_eq!(std::fs::read(store.path()).expect("kept"), b"first");
        let mut w = store.writer().expect("writer");
        w.write(b"second").await.expect("write");
        store.commit(w).await.expect("commit");
        let (_, size) = store.open().expect("open");
        assert_eq!(size, 6);
        assert!(store.discard());
        assert!(!store.path().exists() && store.open().is_none());
        assert!(!store.discard());
    }

    #[tokio::test]
    async fn a_symlink_in_place_of_the_temporary_file_is_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SnapshotStore::new(dir.path());
        std::fs::create_dir_all(dir.path().join(DIR)).expect("dir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").expect("victim");
        std::os::unix::fs::symlink(&victim, &store.tmp).expect("link");
        let mut w = store.writer().expect("the link is removed, not followed");
        w.write(b"x").await.expect("write");
        store.commit(w).await.expect("commit");
        assert_eq!(std::fs::read(&victim).expect("victim"), b"keep");
    }

    #[tokio::test]
    async fn only_files_of_dead_bridges_on_this_host_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SnapshotStore::new(dir.path());
        let mut w = store.writer().expect("writer");
        w.write(b"mine").await.expect("write");
        store.commit(w).await.expect("commit");
        let me = Owner::current();
        let host = file_safe(&me.host);
        let folder = dir.path().join(DIR);
        // pid 2^22 + 1 is above Linux's pid_max: never running.
        let dead = folder.join(format!("{PREFIX}4194305-1-{host}"));
        let dead_tmp = folder.join(format!("{PREFIX}4194305-1-{host}.tmp"));
        let elsewhere = folder.join(format!("{PREFIX}4194305-1-another_host"));
        let dead_slot = folder.join(format!("{PREFIX}4194305-1-{host}-abc"));
        let live_slot = SnapshotStore::for_slot(dir.path(), Some("s1"));
        let mut w = live_slot.writer().expect("writer");
        w.write(b"client").await.expect("write");
        live_slot.commit(w).await.expect("commit");
        assert_ne!(live_slot.path(), store.path());
        let unrelated = folder.join("notes.txt");
        for f in [&dead, &dead_tmp, &elsewhere, &unrelated, &dead_slot] {
            std::fs::write(f, b"x").expect("write");
        }
        assert_eq!(store.remove_dead(), 3);
        assert!(!dead.exists() && !dead_tmp.exists() && !dead_slot.exists());
        assert!(elsewhere.exists() && unrelated.exists() && store.path().exists());
        assert!(
            live_slot.path().exists(),
            "a live client sandbox's snapshot stays"
        );
    }

    #[test]
    fn no_snapshot_goes_into_a_folder_another_user_owns() {
        if crate::checked_dir::euid() != 0 {
            return; // chown needs root; CI runs the tests as root
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SnapshotStore::new(dir.path());
        let theirs = dir.path().join(DIR);
        std::fs::create_dir(&theirs).expect("dir");
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).expect("chown");
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = store.writer().err().expect("refused");
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(std::fs::read_dir(&theirs).expect("list").count(), 0);
    }
}
