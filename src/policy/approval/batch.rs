//! [`Batches`]: the calls of one run that need approval, asked together. The first such call
//! opens a batch and waits until no other call has joined it for a short window (the calls of
//! one `asyncio.gather` arrive within milliseconds), then asks the run's [`Asker`] once for all
//! of them; every member gets the same answer. A run asks one question at a time: calls that
//! arrive while a question is open join the next batch, which is asked (without the calls
//! approved "for the rest of this run" meanwhile) once the open one is answered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::calls::{Answer, AskedCall, Asker, Question, RunScope};

/// The longest a batch gathers calls before it is asked, however many keep arriving.
const MAX_GATHER: Duration = Duration::from_secs(1);

/// The open batches of every run that has calls waiting for approval; an entry lives while
/// one of its calls waits.
#[derive(Default)]
pub(super) struct Batches {
    runs: Mutex<HashMap<String, Arc<RunQueue>>>,
}

/// One run's questions.
#[derive(Default)]
struct RunQueue {
    /// Calls waiting in this run (changed under the `Batches` lock).
    users: Mutex<usize>,
    /// The batch still gathering calls, if any.
    open: Mutex<Option<Arc<Batch>>>,
    /// Held while a question of the run is asked: one at a time.
    turn: tokio::sync::Mutex<()>,
}

/// Calls asked together, and their answer once there is one.
struct Batch {
    calls: Mutex<Vec<AskedCall>>,
    answer: watch::Sender<Option<Answer>>,
}

impl Batch {
    fn joined(&self) -> usize {
        self.calls.lock().expect("batch lock").len()
    }
}

/// Removes the run's entry when its last waiting call is done (or dropped).
struct Waiting<'a> {
    batches: &'a Batches,
    run: &'a str,
    queue: Arc<RunQueue>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut runs = self.batches.runs.lock().expect("batches lock");
        let mut users = self.queue.users.lock().expect("users lock");
        *users -= 1;
        if *users == 0 {
            runs.remove(self.run);
        }
    }
}

impl Batches {
    /// Asks for `call` of `run`, with whichever calls of the run arrive together with it,
    /// waiting no later than `deadline`; `window` is how long a batch stays open after the
    /// last call joined it.
    pub(super) async fn ask(
        &self,
        run: &RunScope,
        asker: &Arc<dyn Asker>,
        call: AskedCall,
        deadline: Instant,
        window: Duration,
    ) -> Answer {
        let waiting = self.enter(&run.id);
        let (batch, leads) = {
            let mut open = waiting.queue.open.lock().expect("open lock");
            match &*open {
                Some(batch) => {
                    batch.calls.lock().expect("batch lock").push(call);
                    (batch.clone(), false)
                }
                None => {
                    let (answer, _) = watch::channel(None);
                    let batch = Arc::new(Batch {
                        calls: Mutex::new(vec![call]),
                        answer,
                    });
                    *open = Some(batch.clone());
                    (batch, true)
                }
            }
        };
        let mut rx = batch.answer.subscribe();
        if leads {
            let asked = self.lead(&waiting.queue, &batch, run, asker, deadline, window);
            let answer = tokio::time::timeout_at(deadline, asked)
                .await
                .unwrap_or(Answer::TimedOut);
            batch.answer.send_replace(Some(answer.clone()));
            return answer;
        }
        loop {
            if let Some(answer) = rx.borrow_and_update().clone() {
                return answer;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                // The asking call went away (its run was stopped) before an answer came.
                Ok(Err(_)) => return Answer::Unavailable("the question was withdrawn".into()),
                Err(_) => return Answer::TimedOut,
            }
        }
    }

    /// The run's queue, counted as used until the returned guard drops.
    fn enter<'a>(&'a self, run: &'a str) -> Waiting<'a> {
        let mut runs = self.runs.lock().expect("batches lock");
        let queue = runs.entry(run.to_string()).or_default().clone();
        *queue.users.lock().expect("users lock") += 1;
        Waiting {
            batches: self,
            run,
            queue,
        }
    }

    /// Gathers the batch, waits for the run's turn, closes the batch and asks.
    async fn lead(
        &self,
        queue: &RunQueue,
        batch: &Arc<Batch>,
        run: &RunScope,
        asker: &Arc<dyn Asker>,
        deadline: Instant,
        window: Duration,
    ) -> Answer {
        let started = Instant::now();
        let mut seen = batch.joined();
        loop {
            tokio::time::sleep(window).await;
            let now = batch.joined();
            if now == seen || started.elapsed() >= MAX_GATHER {
                break;
            }
            seen = now;
        }
        let _turn = queue.turn.lock().await;
        {
            let mut open = queue.open.lock().expect("open lock");
            if open.as_ref().is_some_and(|b| Arc::ptr_eq(b, batch)) {
                *open = None;
            }
        }
        let calls = std::mem::take(&mut *batch.calls.lock().expect("batch lock"));
        let calls: Vec<AskedCall> = {
            let approved = run.tally.approved_for_run.lock().expect("tally lock");
            calls
                .into_iter()
                .filter(|c| !approved.contains(&(c.server.clone(), c.tool.clone())))
                .collect()
        };
        if calls.is_empty() {
            // Everything was approved for the run while this batch waited for its turn.
            return Answer::Approved { for_run: false };
        }
        let question = Question {
            run: run.id.clone(),
            calls,
        };
        asker.ask(question, deadline).await
    }

    /// Runs with calls waiting (for tests).
    #[cfg(test)]
    pub(super) fn runs_waiting(&self) -> usize {
        self.runs.lock().expect("batches lock").len()
    }
}
