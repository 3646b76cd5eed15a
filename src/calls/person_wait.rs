//! [`PersonWaits`]: the time a run spends waiting for a person (a downstream server's question
//! relayed to the user), which does not count against the run's timeout. The sandbox actor and
//! the upstream call each check their deadline against [`PersonWaits::extended`] when it
//! passes: never expired while a wait is out, and moved on by the waits that ended.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How soon a deadline is looked at again while a wait is out.
const RECHECK: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct Clock {
    /// Time of the waits that ended.
    done: Duration,
    /// Waits out now.
    out: u32,
    /// When the first of the waits out began.
    since: Option<Instant>,
}

/// One run's waits for a person.
#[derive(Debug, Default)]
pub struct PersonWaits(Mutex<Clock>);

/// A wait out, ended when dropped.
#[must_use = "the wait ends when the guard is dropped"]
pub struct PersonWait<'a>(&'a PersonWaits);

impl Drop for PersonWait<'_> {
    fn drop(&mut self) {
        let mut c = self.0 .0.lock().expect("person waits lock");
        c.out = c.out.saturating_sub(1);
        if c.out == 0 {
            if let Some(since) = c.since.take() {
                c.done += since.elapsed();
            }
        }
    }
}

impl PersonWaits {
    /// A wait begins; it ends when the guard is dropped. Overlapping waits count once.
    pub fn begin(&self) -> PersonWait<'_> {
        let mut c = self.0.lock().expect("person waits lock");
        c.out += 1;
        if c.out == 1 {
            c.since = Some(Instant::now());
        }
        PersonWait(self)
    }

    /// `deadline` moved on by the time spent waiting for a person: by the waits that ended,
    /// and, while one is out, never sooner than a moment from now.
    pub fn extended(&self, deadline: Instant) -> Instant {
        let c = self.0.lock().expect("person waits lock");
        let now = Instant::now();
        let mut later = deadline + c.done;
        if let Some(since) = c.since {
            later = (later + now.saturating_duration_since(since)).max(now + RECHECK);
        }
        later
    }

    /// Waits for `fut` by `deadline` as [`PersonWaits::extended`] moves it; `Err(())` once the
    /// moved deadline passes.
    pub async fn timeout_at<F: std::future::Future>(
        &self,
        deadline: Instant,
        fut: F,
    ) -> Result<F::Output, ()> {
        tokio::pin!(fut);
        let mut until = deadline;
        loop {
            match tokio::time::timeout_at(until, &mut fut).await {
                Ok(v) => return Ok(v),
                Err(_) => {
                    let later = self.extended(deadline);
                    if later <= Instant::now() {
                        return Err(());
                    }
                    until = later;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_person_moves_the_deadline_on_by_its_length() {
        let waits = PersonWaits::default();
        let deadline = Instant::now() + Duration::from_secs(1);
        assert_eq!(waits.extended(deadline), deadline);
        let wait = waits.begin();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(
            waits.extended(deadline) > Instant::now(),
            "not expired while out"
        );
        drop(wait);
        assert_eq!(waits.extended(deadline), deadline + Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_outlives_its_deadline_only_by_the_waits() {
        let waits = PersonWaits::default();
        let deadline = Instant::now() + Duration::from_secs(1);
        let slow = tokio::time::sleep(Duration::from_secs(3));
        assert!(
            waits.timeout_at(deadline, slow).await.is_err(),
            "no wait: timed out"
        );
        let deadline = Instant::now() + Duration::from_secs(1);
        let asking = async {
            let _w = waits.begin();
            tokio::time::sleep(Duration::from_secs(10)).await;
        };
        let work = async {
            asking.await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(
            waits.timeout_at(deadline, work).await.is_ok(),
            "the wait did not count"
        );
    }
}
