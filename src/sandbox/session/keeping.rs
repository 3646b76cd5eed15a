//! The snapshot frames of one session: the chunks of a save on their way to the sandbox actor,
//! bounded while they arrive (the bytes are opaque: never parsed here), and the report of a
//! restore. Frames nobody asked for are ignored (the caller counts them); a save that breaks a rule ends with a reason.

use std::sync::Mutex;

use base64::Engine as _;
use tokio::sync::{mpsc, oneshot};

use crate::log_limit::clipped;
use crate::sandbox::protocol::{RestoredFrame, SavedFrame};

/// The smallest snapshot chunk the entrypoint sends but for the last (`keeper.MIN_CHUNK`).
pub const MIN_CHUNK: usize = 1024;

/// What a save yields, in order: chunks, then `Done` or `Failed`.
#[derive(Debug, PartialEq, Eq)]
pub enum SaveEvent {
    /// The next bytes of the snapshot.
    Chunk(Vec<u8>),
    /// The snapshot is complete; `names` user names were in the namespace (0: nothing to save).
    Done {
        /// User names in the namespace, saved or not.
        names: u64,
    },
    /// The save failed; nothing more comes.
    Failed(String),
}

struct Saving {
    id: u64,
    limit: usize,
    received: usize,
    /// Chunks still allowed, plus one: an honest save sends at most `limit / chunk + 1`.
    chunks_left: usize,
    tx: mpsc::UnboundedSender<SaveEvent>,
}

/// A session's save and restore in progress (at most one of each).
#[derive(Default)]
pub(super) struct Keeping {
    saving: Mutex<Option<Saving>>,
    restoring: Mutex<Option<(u64, oneshot::Sender<RestoredFrame>)>>,
}

impl Keeping {
    /// Expects the chunks of save `id`, at most `limit` bytes in all, in chunks of `chunk`
    /// bytes (the entrypoint sends every chunk but the last full, and at least
    /// [`MIN_CHUNK`] bytes). The receiver is unbounded but never holds more than `limit` bytes
    /// in at most `limit / MIN_CHUNK + 2` chunks: chunks past either end the save.
    pub(super) fn begin_save(
        &self,
        id: u64,
        limit: usize,
        chunk: usize,
    ) -> mpsc::UnboundedReceiver<SaveEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.saving.lock().expect("saving lock") = Some(Saving {
            id,
            limit,
            received: 0,
            chunks_left: limit / chunk.max(MIN_CHUNK) + 3,
            tx,
        });
        rx
    }

    /// A `snapshot` frame: the next chunk of save `id`, base64. False when nobody asked for it.
    pub(super) fn chunk(&self, id: u64, data: &str) -> bool {
        let mut saving = self.saving.lock().expect("saving lock");
        let Some(s) = saving.as_mut().filter(|s| s.id == id) else {
            return false;
        };
        let room = s.limit - s.received;
        let over = format!(
            "the sandbox sent more than the snapshot limit (MCP_BRIDGE_SNAPSHOT_MAX, {} bytes)",
            s.limit
        );
        s.chunks_left = s.chunks_left.saturating_sub(1);
        // Bounded before decoding: base64 carries 3 bytes in every 4 characters.
        let outcome = if s.chunks_left == 0 {
            Err("the sandbox sent the snapshot in more chunks than it was asked to".into())
        } else if data.len() / 4 * 3 > room + 3 {
            Err(over)
        } else {
            match base64::engine::general_purpose::STANDARD.decode(data) {
                Ok(bytes) if bytes.len() <= room => Ok(bytes),
                Ok(_) => Err(over),
                Err(err) => Err(format!(
                    "the sandbox sent a snapshot chunk that is not base64 ({err})"
                )),
            }
        };
        match outcome {
            Ok(bytes) => {
                s.received += bytes.len();
                let _ = s.tx.send(SaveEvent::Chunk(bytes));
            }
            Err(why) => {
                let _ = s.tx.send(SaveEvent::Failed(why));
                *saving = None;
            }
        }
        true
    }

    /// A `saved` frame: save `id` is complete (or failed in the sandbox). False when nobody
    /// asked for it.
    pub(super) fn saved(&self, frame: SavedFrame) -> bool {
        let mut saving = self.saving.lock().expect("saving lock");
        let Some(s) = saving.take_if(|s| s.id == frame.id) else {
            return false;
        };
        let event = match frame.error {
            Some(err) => {
                SaveEvent::Failed(format!("the sandbox could not save: {}", clipped(&err)))
            }
            None if frame.bytes != s.received as u64 => SaveEvent::Failed(format!(
                "the sandbox said it sent {} bytes of snapshot but sent {}",
                frame.bytes, s.received
            )),
            None => SaveEvent::Done { names: frame.names },
        };
        let _ = s.tx.send(event);
        true
    }

    /// Expects the report of restore `id`.
    pub(super) fn begin_restore(&self, id: u64) -> oneshot::Receiver<RestoredFrame> {
        let (tx, rx) = oneshot::channel();
        *self.restoring.lock().expect("restoring lock") = Some((id, tx));
        rx
    }

    /// A `restored` frame. False when nobody asked for it.
    pub(super) fn restored(&self, frame: RestoredFrame) -> bool {
        let waiting = self
            .restoring
            .lock()
            .expect("restoring lock")
            .take_if(|(id, _)| *id == frame.id);
        match waiting {
            Some((_, tx)) => {
                let _ = tx.send(frame);
                true
            }
            None => false,
        }
    }

    /// The session ended: a save or restore in progress ends with it (its receiver closes).
    pub(super) fn end(&self) {
        *self.saving.lock().expect("saving lock") = None;
        *self.restoring.lock().expect("restoring lock") = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<SaveEvent>) -> Vec<SaveEvent> {
        let mut got = Vec::new();
        while let Ok(e) = rx.try_recv() {
            got.push(e);
        }
        got
    }

    #[test]
    fn chunks_arrive_within_the_limit_and_the_total_is_checked() {
        let k = Keeping::default();
        let mut rx = k.begin_save(3, 10, MIN_CHUNK);
        k.chunk(2, &b64(b"other save"));
        k.chunk(3, &b64(b"abcd"));
        k.chunk(3, &b64(b"efgh"));
        k.saved(SavedFrame {
            id: 3,
            bytes: 8,
            names: 2,
            error: None,
        });
        assert_eq!(
            drain(&mut rx),
            vec![
                SaveEvent::Chunk(b"abcd".to_vec()),
                SaveEvent::Chunk(b"efgh".to_vec()),
                SaveEvent::Done { names: 2 }
            ]
        );
        let mut rx = k.begin_save(4, 10, MIN_CHUNK);
        k.chunk(4, &b64(b"abc"));
        k.saved(SavedFrame {
            id: 4,
            bytes: 99,
            names: 1,
            error: None,
        });
        assert!(matches!(drain(&mut rx).pop(), Some(SaveEvent::Failed(w)) if w.contains("99")));
    }

    #[test]
    fn too_much_or_garbage_ends_the_save_and_later_frames_are_ignored() {
        let k = Keeping::default();
        let mut rx = k.begin_save(1, 10, MIN_CHUNK);
        k.chunk(1, &b64(b"0123456"));
        k.chunk(1, &b64(b"7890")); // 11 bytes in all
        k.chunk(1, &b64(b"x"));
        let got = drain(&mut rx);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(matches!(&got[1], SaveEvent::Failed(w) if w.contains("MCP_BRIDGE_SNAPSHOT_MAX")));
        let mut rx = k.begin_save(2, 1 << 20, MIN_CHUNK);
        k.chunk(2, "not base64 at all!");
        assert!(matches!(drain(&mut rx).pop(), Some(SaveEvent::Failed(w)) if w.contains("base64")));
        // A huge chunk is refused by its length, before it is decoded.
        let mut rx = k.begin_save(5, 16, MIN_CHUNK);
        k.chunk(5, &"A".repeat(1 << 20));
        assert!(matches!(drain(&mut rx).pop(), Some(SaveEvent::Failed(_))));
    }

    #[test]
    fn a_save_in_more_chunks_than_asked_for_ends() {
        let k = Keeping::default();
        let mut rx = k.begin_save(1, 4 * MIN_CHUNK, MIN_CHUNK);
        let mut taken = 0;
        while k.chunk(1, "") {
            taken += 1;
            assert!(taken < 100, "empty chunks are taken without end");
        }
        let got = drain(&mut rx);
        assert_eq!(got.len(), 7, "{got:?}");
        assert!(matches!(got.last(), Some(SaveEvent::Failed(w)) if w.contains("chunks")));
    }

    #[test]
    fn a_restore_report_goes_to_whoever_waits_for_it_and_death_ends_both() {
        let k = Keeping::default();
        let mut rx = k.begin_restore(7);
        k.restored(RestoredFrame {
            id: 6,
            ..Default::default()
        });
        assert!(rx.try_recv().is_err());
        k.restored(RestoredFrame {
            id: 7,
            names: vec!["df".to_string()].into(),
            failed: Default::default(),
        });
        assert_eq!(
            rx.try_recv().expect("report").names.items,
            vec!["df".to_string()]
        );
        let mut save = k.begin_save(8, 10, MIN_CHUNK);
        let mut restore = k.begin_restore(9);
        k.end();
        assert!(save.try_recv().is_err() && save.is_closed());
        assert!(matches!(
            restore.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
    }
}
