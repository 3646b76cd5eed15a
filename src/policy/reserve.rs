//! [`Reservation`]: the result bytes one call in flight holds of its run's result-byte budgets
//! (`MCP_BRIDGE_RUN_MAX_RESULT_BYTES`, an entry's `maxResultBytesPerRun`), so that calls made
//! together (`asyncio.gather`) cannot all pass a budget nothing has been counted against yet.
//!
//! A call reserves an estimate of its result: the largest result the run has received from
//! the same tool so far, or, before any arrived, all the room left (the tool's first call runs
//! alone and its size teaches the estimate). A call finding no room beyond what calls in flight
//! reserved waits for one of them to end (by the call's deadline); a budget already used up
//! refuses. When its result arrives the call gives back its reservation ([`Reservation::settle`]);
//! dropped unsettled (the call was refused later, or never answered) it gives it back too.
//! So the total passes a budget by at most one call's result, as long as a tool's results are
//! no larger than its earlier ones.

use std::sync::Arc;

use crate::calls::RunScope;

/// Tools a run keeps a result-size estimate of (`RunBudgets::largest_result`; tool names come
/// from the sandbox): a tool past this has none, so its calls go one at a time.
pub const MAX_TOOL_ESTIMATES: usize = 1024;

/// Result bytes held of a run's budgets by one call in flight; given back when settled or
/// dropped.
#[derive(Debug)]
pub struct Reservation {
    run: Arc<RunScope>,
    server: String,
    tool: String,
    /// Held of the run's budget.
    run_bytes: u64,
    /// Held of the server's budget.
    server_bytes: u64,
    settled: bool,
}

impl Reservation {
    /// A reservation by a call of `tool` of `run_bytes` of `run`'s budget and `server_bytes`
    /// of `server`'s, already counted in the run's budgets by the caller (under their lock).
    pub(super) fn new(
        run: Arc<RunScope>,
        (server, tool): (&str, &str),
        run_bytes: u64,
        server_bytes: u64,
    ) -> Self {
        Reservation {
            run,
            server: server.to_string(),
            tool: tool.to_string(),
            run_bytes,
            server_bytes,
            settled: false,
        }
    }

    /// The call's result of `received` bytes arrived (counted by the caller): gives back the
    /// reservation and learns the size for the next estimate.
    pub fn settle(mut self, received: u64) {
        self.release(Some(received));
    }

    fn release(&mut self, received: Option<u64>) {
        if self.settled {
            return;
        }
        self.settled = true;
        {
            let mut budgets = self.run.tally.budgets.lock().expect("budgets lock");
            budgets.reserved_bytes = budgets.reserved_bytes.saturating_sub(self.run_bytes);
            if let Some(used) = budgets.servers.get_mut(&self.server) {
                used.reserved_bytes = used.reserved_bytes.saturating_sub(self.server_bytes);
            }
            if let Some(n) = received {
                let key = (self.server.clone(), self.tool.clone());
                let known = budgets.largest_result.len();
                match budgets.largest_result.get_mut(&key) {
                    Some(largest) => *largest = (*largest).max(n),
                    None if known < MAX_TOOL_ESTIMATES => {
                        budgets.largest_result.insert(key, n);
                    }
                    None => {}
                }
            }
        }
        self.run.tally.released.notify_waiters();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release(None);
    }
}

/// What a budget of `limit` bytes allows a new call, with `received` counted and `reserved` held
/// by calls in flight, estimating its result as `largest` (unknown: all the room left).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Room {
    /// Used up: refuse.
    Spent,
    /// Held by calls in flight: wait for one to end.
    Held,
    /// Go, reserving this much.
    Reserve(u64),
}

/// See [`Room`].
pub(super) fn room(limit: u64, received: u64, reserved: u64, largest: Option<u64>) -> Room {
    if received >= limit {
        return Room::Spent;
    }
    let left = limit - received;
    if reserved >= left {
        return Room::Held;
    }
    let free = left - reserved;
    Room::Reserve(largest.map_or(free, |l| l.clamp(1, free)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_call_reserves_all_the_room_then_the_largest_result_seen() {
        assert_eq!(room(1000, 0, 0, None), Room::Reserve(1000));
        assert_eq!(room(1000, 0, 1000, None), Room::Held);
        assert_eq!(room(1000, 10, 0, Some(10)), Room::Reserve(10));
        assert_eq!(room(1000, 10, 980, Some(10)), Room::Reserve(10));
        assert_eq!(room(1000, 10, 985, Some(10)), Room::Reserve(5));
        assert_eq!(room(1000, 10, 990, Some(10)), Room::Held);
        assert_eq!(room(1000, 1000, 0, Some(10)), Room::Spent);
        assert_eq!(room(1000, 4000, 0, Some(4000)), Room::Spent);
        // An empty result still reserves a byte: the estimate is never nothing.
        assert_eq!(room(1000, 0, 0, Some(0)), Room::Reserve(1));
    }

    #[test]
    fn settling_or_dropping_gives_the_reservation_back_once() {
        let run = RunScope::plain("x");
        {
            let mut b = run.tally.budgets.lock().expect("lock");
            b.reserved_bytes = 30;
            b.servers.entry("s".into()).or_default().reserved_bytes = 30;
        }
        let a = Reservation::new(run.clone(), ("s", "t"), 10, 10);
        let b = Reservation::new(run.clone(), ("s", "u"), 20, 20);
        a.settle(7);
        drop(b);
        let budgets = run.tally.budgets.lock().expect("lock");
        assert_eq!(budgets.reserved_bytes, 0);
        assert_eq!(budgets.servers["s"].reserved_bytes, 0);
        // Only a settled call teaches its tool's estimate.
        let key = |t: &str| ("s".to_string(), t.to_string());
        assert_eq!(budgets.largest_result.get(&key("t")), Some(&7));
        assert_eq!(budgets.largest_result.get(&key("u")), None);
    }

    #[test]
    fn estimates_are_kept_for_a_bounded_number_of_tools() {
        let run = RunScope::plain("x");
        for i in 0..MAX_TOOL_ESTIMATES + 10 {
            Reservation::new(run.clone(), ("s", &format!("t{i}")), 0, 0).settle(1);
        }
        let budgets = run.tally.budgets.lock().expect("lock");
        assert_eq!(budgets.largest_result.len(), MAX_TOOL_ESTIMATES);
    }
}
