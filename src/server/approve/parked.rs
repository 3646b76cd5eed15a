//! [`Parked`]: the runs waiting for a 2026-07-28 client's answer, between its rounds. One
//! owner (the handler of `run_python`); at most [`PER_CALLER`] runs of one caller (a client
//! token and its session) and [`CAPACITY`] in all, so that one caller's unanswered questions
//! do not block everyone's; a run leaves when the retry that answers it takes it (only its
//! own caller's retry), or when its question expires (then it is stopped). The questions
//! already answered are remembered (a bounded list) so that a replayed state is named as such.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::calls::{Answer, Reply};

/// Runs waiting for an answer at most, all callers together.
pub const CAPACITY: usize = 64;
/// Runs of one caller waiting for an answer at most.
pub const PER_CALLER: usize = 8;
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
    /// Who the run is for (the caller's binding: token and session); only that caller's
    /// retry takes it.
    pub caller: String,
    /// Where the answer goes (the asking call waits on it).
    pub reply: Waiting,
    /// When the question expires.
    pub expires: Instant,
}

/// What a parked run waits for: the answer to an approval question, or to a downstream
/// server's question relayed.
pub enum Waiting {
    /// An approval.
    Approval(oneshot::Sender<Answer>),
    /// A relayed question.
    Relay(oneshot::Sender<Reply>),
}

impl Waiting {
    /// Tells the waiting call that nobody could be asked, and why.
    pub fn unavailable(self, why: String) {
        match self {
            Waiting::Approval(tx) => {
                let _ = tx.send(Answer::Unavailable(why));
            }
            Waiting::Relay(tx) => {
                let _ = tx.send(Reply::Unavailable(why));
            }
        }
    }
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
    /// The run waits for another caller's answer: told as a state that does not verify.
    #[error("{}", NOT_VERIFIED)]
    Foreign,
}

/// What a retry is told when its `requestState` does not verify (forged, altered, other
/// arguments, another caller's, expired): one answer for all.
pub const NOT_VERIFIED: &str = "requestState refused: it does not verify (forged, altered, sent \
     with other arguments or by another client, or expired)";

/// Why a run could not be parked (it is given back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Its caller has [`PER_CALLER`] runs waiting already.
    Caller,
    /// [`CAPACITY`] runs wait already.
    All,
}

impl Full {
    /// The reason the run's question is told.
    pub fn reason(self) -> String {
        match self {
            Full::Caller => format!("{PER_CALLER} runs of this client wait for approval already"),
            Full::All => format!("{CAPACITY} runs wait for approval already"),
        }
    }
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
    /// Parks `run`; gives it back, with why, when its caller has [`PER_CALLER`] runs waiting
    /// or [`CAPACITY`] runs wait in all. A timer drops it once its question expires.
    pub fn park(self: &Arc<Self>, run: ParkedRun<R>) -> Result<(), (ParkedRun<R>, Full)> {
        let expires = run.expires;
        {
            let mut inner = self.inner.lock().expect("parked lock");
            inner.prune();
            let mine = inner.runs.iter().filter(|p| p.caller == run.caller).count();
            if mine >= PER_CALLER {
                return Err((run, Full::Caller));
            }
            if inner.runs.len() >= CAPACITY {
                return Err((run, Full::All));
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

    /// Takes the run `run` waiting on `question` for `caller`, marking the question answered.
    ///
    /// # Errors
    /// [`TakeError`] when no run waits on that question, or it waits for another caller (the
    /// run stays parked for its own).
    pub fn take(&self, run: &str, question: &str, caller: &str) -> Result<ParkedRun<R>, TakeError> {
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
        if inner.runs[i].caller != caller {
            return Err(TakeError::Foreign);
        }
        if inner.spent.len() >= SPENT {
            inner.spent.pop_front();
        }
        inner.spent.push_back(key);
        Ok(inner.runs.swap_remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(caller: &str, n: usize) -> (ParkedRun<()>, oneshot::Receiver<Answer>) {
        let (reply, rx) = oneshot::channel();
        let parked = ParkedRun {
            run: (),
            run_id: format!("r{caller}{n}"),
            question: format!("q{n}"),
            caller: caller.to_string(),
            reply: Waiting::Approval(reply),
            expires: Instant::now() + std::time::Duration::from_secs(60),
        };
        (parked, rx)
    }

    #[tokio::test]
    async fn capacity_is_per_caller_and_in_total() {
        let parked = Arc::new(Parked::<()>::default());
        let mut keep = Vec::new();
        for n in 0..PER_CALLER {
            let (p, rx) = run("a", n);
            assert!(parked.park(p).is_ok());
            keep.push(rx);
        }
        let (p, _rx) = run("a", PER_CALLER);
        assert_eq!(parked.park(p).err().map(|e| e.1), Some(Full::Caller));
        // One caller's full share blocks no one else.
        let (p, _rx) = run("b", 0);
        assert!(parked.park(p).is_ok(), "another caller still parks");
        let mut caller = 0;
        while parked.inner.lock().expect("lock").runs.len() < CAPACITY {
            caller += 1;
            for n in 0..PER_CALLER {
                let (p, rx) = run(&format!("c{caller}"), n);
                if parked.park(p).is_err() {
                    break;
                }
                keep.push(rx);
            }
        }
        let (p, _rx) = run("z", 0);
        assert_eq!(parked.park(p).err().map(|e| e.1), Some(Full::All));
    }

    #[tokio::test]
    async fn only_the_callers_own_retry_takes_its_run() {
        let parked = Arc::new(Parked::<()>::default());
        let (p, _rx) = run("a", 0);
        let (id, q) = (p.run_id.clone(), p.question.clone());
        assert!(parked.park(p).is_ok());
        assert_eq!(parked.take(&id, &q, "b").err(), Some(TakeError::Foreign));
        assert_eq!(TakeError::Foreign.to_string(), NOT_VERIFIED);
        assert!(
            parked.take(&id, &q, "a").is_ok(),
            "still there for its own caller"
        );
        assert_eq!(parked.take(&id, &q, "a").err(), Some(TakeError::Replayed));
    }
}
