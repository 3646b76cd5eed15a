//! The actor's side of keeping the user's namespace: saved to the store before an idle sandbox
//! is stopped, restored into the next sandbox before its first run (and, when a snapshot
//! exists, into the sandbox that replaces one that died, timed out or lost its engine). Both
//! are bounded by `MCP_BRIDGE_SNAPSHOT_TIMEOUT`, the save by `MCP_BRIDGE_SNAPSHOT_MAX` too; the
//! bytes pass through opaque.

use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::Actor;
use crate::bridge::error::{explain_exit, BridgeError};
use crate::bridge::protocol::Bounded;
use crate::bridge::session::{SaveEvent, Session};
use crate::bridge::snapshot::RestoreOutcome;

/// Snapshot bytes per frame from the sandbox (less when `MCP_BRIDGE_MAX_FRAME` is small).
const SAVE_CHUNK: usize = 1 << 20;
/// Snapshot bytes per frame to the sandbox.
const RESTORE_CHUNK: usize = 256 << 10;
/// How long a sandbox that died while restoring gets to report its exit code.
const EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(2000);

impl Actor {
    /// Saves the namespace of `session` (about to be stopped) to the store, replacing what was
    /// there. A namespace without user names leaves no snapshot.
    ///
    /// # Errors
    /// Why nothing was saved (the old snapshot is dropped too: it no longer matches).
    pub(super) async fn save_namespace(&mut self, session: &Session) -> Result<(), String> {
        let Some(limit) = self.settings.snapshot_max else {
            return Ok(());
        };
        let saved = self.save_into_store(session, limit).await;
        if saved.is_err() {
            self.store.discard();
        }
        saved
    }

    async fn save_into_store(&mut self, session: &Session, limit: usize) -> Result<(), String> {
        let began = Instant::now();
        let id = self.take_id();
        // A frame carries a chunk as base64 (4 characters per 3 bytes) plus a few fields.
        let chunk = SAVE_CHUNK.min(self.settings.max_frame.saturating_sub(1024) / 4 * 3);
        let mut rx = session
            .save(id, limit, chunk)
            .await
            .map_err(|e| e.to_string())?;
        let mut writer = self
            .store
            .writer()
            .map_err(|e| format!("{} could not be written: {e}", self.store.path().display()))?;
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
                    writer.write(&bytes).await.map_err(|e| {
                        format!("{} could not be written: {e}", self.store.path().display())
                    })?;
                }
                Ok(Some(SaveEvent::Done { names })) => {
                    if names == 0 || writer.written() == 0 {
                        writer.abort();
                        self.store.discard();
                        return Ok(());
                    }
                    let bytes = self.store.commit(writer).await.map_err(|e| {
                        format!("{} could not be written: {e}", self.store.path().display())
                    })?;
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

    /// Restores the snapshot, if there is one, into the sandbox just started. When the
    /// sandbox dies or hangs while restoring, the snapshot is dropped and a sandbox without it
    /// takes its place. What happened goes to the next run's notice.
    ///
    /// # Errors
    /// Only when starting the replacement sandbox fails.
    pub(super) async fn restore_namespace(&mut self) -> Result<(), BridgeError> {
        let Some((file, size)) = self.store.open() else {
            return Ok(());
        };
        let age = self
            .store
            .saved_at()
            .map(|t| t.elapsed())
            .unwrap_or_default();
        let stale = std::mem::replace(&mut self.restored_before, true);
        let id = self.take_id();
        let session = self.session.as_ref().expect("a session was just started");
        let began = Instant::now();
        let sending = tokio::time::timeout(
            self.settings.snapshot_timeout,
            send_snapshot(session, id, file, self.settings.memory_bytes),
        );
        let outcome = tokio::select! {
            o = sending => o,
            // Shutting down: the session is closed by the actor's exit; the snapshot goes too.
            _ = self.ct.cancelled() => return Ok(()),
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
                return Ok(());
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
        if let Some(s) = self.session.take() {
            s.kill().await;
        }
        self.session = Some(self.engine.start_sandbox(&self.dispatcher).await?);
        Ok(())
    }

    /// A fresh id for an exec, save or restore.
    pub(super) fn take_id(&mut self) -> u64 {
        self.next_exec += 1;
        self.next_exec - 1
    }
}

/// Sends the snapshot in `file` as restore `id` and waits for the sandbox's report:
/// (names restored, (name, why) of those not).
async fn send_snapshot(
    session: &Session,
    id: u64,
    mut file: tokio::fs::File,
    memory_bytes: u64,
) -> Result<(Bounded<String>, Bounded<(String, String)>), BridgeError> {
    let report = session.expect_restored(id);
    let mut buf = vec![0u8; RESTORE_CHUNK];
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read(&mut buf[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) => {
                    return Err(BridgeError::Protocol(format!(
                        "reading the snapshot failed: {err}"
                    )))
                }
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
            return Err(BridgeError::Protocol(explain_exit(code, memory_bytes)));
        }
    };
    Ok((frame.names, frame.failed))
}
