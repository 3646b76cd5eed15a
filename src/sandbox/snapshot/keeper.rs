//! [`Snapshots`]: the one owner of the snapshot feature. It takes the user's namespace from a
//! sandbox about to stop idle, keeps it (`store.rs`), restores it into the next sandbox (and
//! into one replacing a sandbox that died, timed out or lost its engine), drops it on `reset`,
//! and words what the fresh sandbox's first result says about it (`notice.rs`). Saving and
//! restoring are bounded by `MCP_BRIDGE_SNAPSHOT_TIMEOUT`, saving by `MCP_BRIDGE_SNAPSHOT_MAX`
//! too; the bytes pass through opaque. The sandbox actor calls it; the session
//! (`session/keeping.rs`) carries the frames.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::notice::{fresh_sandbox, RestoreOutcome};
use super::store::SnapshotStore;
use crate::calls::SavedNamespace;
use crate::config::Settings;
use crate::sandbox::error::{explain_exit, BridgeError};
use crate::sandbox::protocol::Bounded;
use crate::sandbox::session::{FrameIds, SaveEvent, Session};

/// Snapshot bytes per frame from the sandbox (less when `MCP_BRIDGE_MAX_FRAME` is small).
const SAVE_CHUNK: usize = 1 << 20;
/// Snapshot bytes per frame to the sandbox.
const RESTORE_CHUNK: usize = 256 << 10;
/// How long a sandbox that died while restoring gets to report its exit code.
const EXIT_WAIT: Duration = Duration::from_millis(2000);

/// The snapshot of the user's namespace: taken, kept, restored and reported. Owned by the
/// sandbox actor.
pub struct Snapshots {
    store: Arc<SnapshotStore>,
    settings: Arc<Settings>,
    /// What restoring into the fresh sandbox gave, for the next run's notice.
    restored: Option<RestoreOutcome>,
    /// The snapshot on disk was restored once already: a later restore brings back values
    /// older than the lost sandbox's.
    restored_before: bool,
    ct: CancellationToken,
}

/// What the actor does with the sandbox a restore went into.
#[derive(Debug, PartialEq, Eq)]
pub enum AfterRestore {
    /// Keep it (restored, nothing to restore, or shutting down).
    Keep,
    /// It died or hung while restoring: kill it and start one without the snapshot.
    Replace,
}

/// Why a restore failed.
#[derive(Debug, thiserror::Error)]
enum RestoreFailed {
    /// The snapshot file could not be read.
    #[error("reading the snapshot failed: {0}")]
    Read(#[source] std::io::Error),
    /// The sandbox ended before it reported (why, from its exit code).
    #[error("{0}")]
    Ended(String),
    /// A chunk could not be sent.
    #[error(transparent)]
    Send(#[from] BridgeError),
}

impl Snapshots {
    /// The snapshot feature for this bridge under `settings.state_dir`; `ct` ends a save or
    /// restore when the bridge shuts down.
    /// `slot` names a client sandbox's own snapshot (`serve --http`).
    pub fn new(settings: Arc<Settings>, ct: CancellationToken, slot: Option<&str>) -> Self {
        Snapshots {
            store: Arc::new(SnapshotStore::for_slot(&settings.state_dir, slot)),
            settings,
            restored: None,
            restored_before: false,
            ct,
        }
    }

    /// What `reset` drops, for the dispatcher.
    pub fn saved_namespace(&self) -> Arc<dyn SavedNamespace> {
        Arc::new(Forget(self.store.clone()))
    }

    /// Removes the snapshots of bridges on this host that are gone.
    pub fn remove_dead(&self) {
        let gone = self.store.remove_dead();
        if gone > 0 {
            tracing::info!(removed = gone, "removed snapshots of bridges that are gone");
        }
    }

    /// True when a snapshot is kept (the next sandbox gets it).
    pub fn is_kept(&self) -> bool {
        self.store.saved_at().is_some()
    }

    /// Drops the snapshot: the bridge exits, and a new bridge is a new conversation.
    pub fn discard(&self) {
        self.store.discard();
    }

    /// Saves the namespace of `session` (about to be stopped), replacing what was kept. A
    /// namespace without user names leaves no snapshot.
    ///
    /// # Errors
    /// Why nothing was saved (the old snapshot is dropped too: it no longer matches).
    pub async fn save(&mut self, session: &Session, ids: &mut FrameIds) -> Result<(), String> {
        let Some(limit) = self.settings.snapshot_max else {
            return Ok(());
        };
        let saved = self.save_into_store(session, ids.next(), limit).await;
        if saved.is_err() {
            self.store.discard();
        }
        saved
    }

    async fn save_into_store(
        &mut self,
        session: &Session,
        id: u64,
        limit: usize,
    ) -> Result<(), String> {
        let began = Instant::now();
        // A frame carries a chunk as base64 (4 characters per 3 bytes) plus a few fields.
        let chunk = SAVE_CHUNK.min(self.settings.max_frame.saturating_sub(1024) / 4 * 3);
        let mut rx = session
            .save(id, limit, chunk)
            .await
            .map_err(|e| e.to_string())?;
        let unwritable = |e: std::io::Error| {
            format!("{} could not be written: {e}", self.store.path().display())
        };
        let mut writer = self.store.writer().map_err(unwritable)?;
        let deadline = began + self.settings.snapshot_timeout;
        loop {
            let event = tokio::select! {
                e = tokio::time::timeout_at(deadline, rx.recv()) => e,
                _ = self.ct.cancelled() => return Err("the bridge is shutting down".into()),
            };
            match event {
                Err(_) => {
                    return Err(format!(
                        "it took longer than MCP_BRIDGE_SNAPSHOT_TIMEOUT ({} s)",
                        self.settings.snapshot_timeout.as_secs()
                    ))
                }
                Ok(None) => return Err("the sandbox ended while saving them".into()),
                Ok(Some(SaveEvent::Failed(why))) => return Err(why),
                Ok(Some(SaveEvent::Chunk(bytes))) => {
                    writer.write(&bytes).await.map_err(unwritable)?;
                }
                Ok(Some(SaveEvent::Done { names })) => {
                    if names == 0 || writer.written() == 0 {
                        writer.abort();
                        self.store.discard();
                        return Ok(());
                    }
                    let bytes = self.store.commit(writer).await.map_err(unwritable)?;
                    self.restored_before = false;
                    tracing::info!(
                        names,
                        bytes,
                        ms = began.elapsed().as_millis() as u64,
                        "saved the sandbox's namespace"
                    );
                    return Ok(());
                }
            }
        }
    }

    /// Restores the snapshot, if one is kept, into `session`, just started. When the sandbox
    /// dies or hangs while restoring, the snapshot is dropped and the answer says to replace
    /// the sandbox. What happened goes to the next run's notice ([`Snapshots::notice`]).
    pub async fn restore(&mut self, session: &Session, ids: &mut FrameIds) -> AfterRestore {
        let Some((file, size)) = self.store.open() else {
            return AfterRestore::Keep;
        };
        let age = self
            .store
            .saved_at()
            .map(|t| t.elapsed())
            .unwrap_or_default();
        let stale = std::mem::replace(&mut self.restored_before, true);
        let id = ids.next();
        let began = Instant::now();
        let sending = tokio::time::timeout(
            self.settings.snapshot_timeout,
            send_snapshot(session, id, file, self.settings.memory_bytes),
        );
        let outcome = tokio::select! {
            o = sending => o,
            // Shutting down: the session is closed by the actor's exit; the snapshot goes too.
            _ = self.ct.cancelled() => return AfterRestore::Keep,
        };
        let failure = match outcome {
            Ok(Ok((names, failed))) => {
                tracing::info!(
                    restored = names.total,
                    failed = failed.total,
                    bytes = size,
                    ms = began.elapsed().as_millis() as u64,
                    "restored the saved namespace"
                );
                self.restored = Some(RestoreOutcome::Restored {
                    names,
                    failed,
                    age,
                    stale,
                });
                return AfterRestore::Keep;
            }
            Ok(Err(err)) => format!("the sandbox ended while restoring them: {err}"),
            Err(_) => format!(
                "restoring took longer than MCP_BRIDGE_SNAPSHOT_TIMEOUT ({} s)",
                self.settings.snapshot_timeout.as_secs()
            ),
        };
        tracing::warn!("{failure}; the snapshot is dropped");
        self.store.discard();
        self.restored = Some(RestoreOutcome::Failed(failure));
        AfterRestore::Replace
    }

    /// The notice of a run's result: `why` the sandbox is fresh (if it is), then what the
    /// restore into it brought back. None when the sandbox is not fresh and nothing was
    /// restored. The restore's outcome is reported once.
    pub fn notice(&mut self, why: Option<&str>) -> Option<String> {
        let restored = self.restored.take();
        if why.is_none() && restored.is_none() {
            return None;
        }
        let why = why.unwrap_or("The sandbox was started afresh");
        Some(fresh_sandbox(why, restored.as_ref()))
    }
}

/// Drops the kept snapshot on `reset`.
struct Forget(Arc<SnapshotStore>);

impl SavedNamespace for Forget {
    fn forget(&self) -> bool {
        self.0.discard()
    }
}

/// Sends the snapshot in `file` as restore `id` and waits for the sandbox's report:
/// (names restored, (name, why) of those not).
async fn send_snapshot(
    session: &Session,
    id: u64,
    mut file: tokio::fs::File,
    memory_bytes: u64,
) -> Result<(Bounded<String>, Bounded<(String, String)>), RestoreFailed> {
    let report = session.expect_restored(id);
    let mut buf = vec![0u8; RESTORE_CHUNK];
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) => return Err(RestoreFailed::Read(err)),
            }
        }
        let done = filled < buf.len();
        session.restore_chunk(id, &buf[..filled], done).await?;
        if done {
            break;
        }
    }
    let frame = match report.await {
        Ok(frame) => frame,
        Err(_) => {
            // The report's sender went with the session: wait for the exit code to say why.
            let died = tokio::time::timeout(EXIT_WAIT, session.died()).await;
            let code = died.ok().and_then(|d| d.code);
            return Err(RestoreFailed::Ended(explain_exit(code, memory_bytes)));
        }
    };
    Ok((frame.names, frame.failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshots(state_dir: &std::path::Path) -> Snapshots {
        let dir = state_dir.display().to_string();
        let settings =
            Settings::from_lookup(|k| (k == "MCP_BRIDGE_STATE_DIR").then(|| dir.clone()))
                .expect("settings");
        Snapshots::new(Arc::new(settings), CancellationToken::new(), None)
    }

    #[tokio::test]
    async fn reset_drops_the_kept_snapshot_through_the_owner() {
        let dir = tempfile::tempdir().expect("tempdir");
        let snaps = snapshots(dir.path());
        let reset = snaps.saved_namespace();
        assert!(!snaps.is_kept() && !reset.forget());
        let mut w = snaps.store.writer().expect("writer");
        w.write(b"x").await.expect("write");
        snaps.store.commit(w).await.expect("commit");
        assert!(snaps.is_kept());
        assert!(reset.forget());
        assert!(!snaps.is_kept() && !snaps.store.path().exists());
        assert!(!reset.forget());
    }

    #[test]
    fn the_notice_says_why_the_sandbox_is_fresh_and_reports_a_restore_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut snaps = snapshots(dir.path());
        assert_eq!(snaps.notice(None), None);
        let why = snaps.notice(Some("It died")).expect("a notice");
        assert!(why.starts_with("It died"), "{why}");
        snaps.restored = Some(RestoreOutcome::Failed("it hung".into()));
        let restored = snaps.notice(None).expect("a notice");
        assert!(
            restored.starts_with("The sandbox was started afresh") && restored.contains("it hung"),
            "{restored}"
        );
        assert_eq!(snaps.notice(None), None);
    }
}
