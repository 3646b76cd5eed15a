//! [`Parked`]: the runs waiting for a 2026-07-28 client's answer, between its rounds. One
//! owner (the handler of `run_python`); at most [`CAPACITY`] runs; a run leaves when the retry
//! that answers it takes it, or when its question expires (then it is stopped). The questions
//! already answered are remembered (a bounded list) so that a replayed state is named as such.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::calls::Answer;

/// Runs waiting for an answer at most.
pub const CAPACITY: usize = 8;
/// Answered questions remembered, to name a replay.
const SPENT: usize = 64;

/// A run (`R`) waiting for the answer to one question.
pub struct ParkedRun<R> {
    /// The run.
    pub run: R,
    /// The run's id.
    pub run_id: String,
    /// The question's id.
    pub question: String,
    /// Where the answer goes (the asking call waits on it).
    pub reply: oneshot::Sender<Answer>,
    /// When the question expires.
    pub expires: Instant,
}

/// Why a retry found no run to answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TakeError {
    /// The question was answered already: the state is replayed.
    #[error("requestState refused: its question was already answered (a replayed state)")]
    Replayed,
    /// No run waits on that question (it ended, or its question expired).
    #[error(
        "requestState refused: no run waits for that answer (it ended, or the question expired)"
    )]
    Unknown,
}

/// The waiting runs.
pub struct Parked<R> {
    inner: Mutex<Inner<R>>,
}

impl<R> Default for Parked<R> {
    fn default() -> Self {
        Parked {
            inner: Mutex::new(Inner {
                runs: Vec::new(),
                spent: VecDeque::new(),
            }),
        }
    }
}

struct Inner<R> {
    runs: Vec<ParkedRun<R>>,
    spent: VecDeque<(String, String)>,
}

impl<R> Inner<R> {
    /// Drops the runs whose question expired (stopping them).
    fn prune(&mut self) {
        let now = Instant::now();
        self.runs.retain(|p| p.expires > now);
    }
}

impl<R: Send + 'static> Parked<R> {
    /// Parks `run`; gives it back when [`CAPACITY`] runs wait already. A timer drops it once
    /// its question expires.
    pub fn park(self: &Arc<Self>, run: ParkedRun<R>) -> Result<(), ParkedRun<R>> {
        let expires = run.expires;
        {
            let mut inner = self.inner.lock().expect("parked lock");
            inner.prune();
            if inner.runs.len() >= CAPACITY {
                return Err(run);
            }
            inner.runs.push(run);
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep_until(expires).await;
            if let Some(me) = me.upgrade() {
                // Dropped outside the lock: dropping a run stops it.
                let expired: Vec<ParkedRun<R>> = {
                    let mut inner = me.inner.lock().expect("parked lock");
                    let now = Instant::now();
                    let (gone, kept) = std::mem::take(&mut inner.runs)
                        .into_iter()
                        .partition(|p| p.expires <= now);
                    inner.runs = kept;
                    gone
                };
                drop(expired);
            }
        });
        Ok(())
    }

    /// Takes the run `run` waiting on `question`, marking the question answered.
    ///
    /// # Errors
    /// [`TakeError`] when no run waits on that question.
    pub fn take(&self, run: &str, question: &str) -> Result<ParkedRun<R>, TakeError> {
        let mut inner = self.inner.lock().expect("parked lock");
        inner.prune();
        let key = (run.to_string(), question.to_string());
        let Some(i) = inner
            .runs
            .iter()
            .position(|p| p.run_id == run && p.question == question)
        else {
            return Err(if inner.spent.contains(&key) {
                TakeError::Replayed
            } else {
                TakeError::Unknown
            });
        };
        if inner.spent.len() >= SPENT {
            inner.spent.pop_front();
        }
        inner.spent.push_back(key);
        Ok(inner.runs.swap_remove(i))
    }
}
