//! [`Limits`]: the rate limit (calls per minute per server, over all runs) and the run budgets
//! (tool calls and result bytes per run, in total and per server), each a setting a server's
//! config entry may override. A call over one is refused naming the limit, its value and where
//! it was set; the run goes on.
//!
//! The rate limit is a token bucket per server (one small state per configured server: the
//! policy only asks about servers the config defines), and per client token too when the run
//! has a [`Caller`](crate::calls::Caller) (`serve --http`: one client's calls never use up
//! another's): `N` calls per minute allow a burst of `N`, refilled at `N` per minute. A run's
//! counts live in its [`Tally`](crate::calls::Tally); each call in flight holds a
//! [`Reservation`] of the result-byte budgets (`reserve.rs`).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::Instant;

use crate::calls::{CallContext, ErrorKind, Tally};
use crate::config::{LimitOverrides, Limits as LimitSettings};

use super::bucket::Bucket;
use super::decision::{Decision, Verdict};
use super::reserve::{room, Reservation, Room};

/// What one look at the limits found.
enum Admit {
    /// Admitted (and counted), holding this share of the result-byte budgets.
    Go(Option<Reservation>),
    /// Refused.
    Refused(Decision),
    /// A result-byte budget's room is held by calls in flight: look again when one ends, or
    /// refuse with this at the deadline.
    Wait(Decision),
}

/// Buckets kept before the full ones are dropped: a bucket refilled to the brim is the same as
/// none (tokens × servers; tokens come from the operator's tokens file).
const MAX_BUCKETS: usize = 4096;

/// The limits, and the buckets they count in.
pub struct Limits {
    /// The settings' values (`0` = none).
    defaults: LimitSettings,
    /// Per configured server, and client token when the run has one: its rate bucket.
    buckets: Mutex<HashMap<BucketKey, Bucket>>,
}

/// Whose calls to which server a bucket counts: a client token's (its name), or, for runs
/// without a caller (stdio `run`, `exec`), all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct BucketKey {
    token: Option<String>,
    server: String,
}

/// One limit in force: its value and where it was set.
struct Limit {
    value: u64,
    /// `MCP_BRIDGE_CALLS_PER_MINUTE=60`, or `"callsPerMinute": 30 in FILE`.
    source: String,
}

/// The per-server cap `key` of the entry in `file`, when it sets one (`0` sets none).
fn entry_cap(value: Option<u64>, key: &str, file: &str) -> Option<Limit> {
    value.filter(|v| *v > 0).map(|v| Limit {
        value: v,
        source: format!("\"{key}\": {v} in {file}"),
    })
}

/// The limit of `key` in the entry (`file`) when it overrides, else of the setting `row`;
/// `None` when neither sets one (`0`).
fn pick(entry: Option<u64>, key: &str, file: &str, setting: u64, row: &str) -> Option<Limit> {
    let (value, source) = match entry {
        Some(v) => (v, format!("\"{key}\": {v} in {file}")),
        None => (setting, format!("{row}={setting}")),
    };
    (value > 0).then_some(Limit { value, source })
}

impl Limits {
    /// Limits with `defaults` from the settings.
    pub fn new(defaults: LimitSettings) -> Self {
        Limits {
            defaults,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Whether no limit is set (every server may still override).
    pub fn is_off(&self) -> bool {
        self.defaults == LimitSettings::default()
    }

    /// Admits one call of `ctx`'s run to `server` (defined in `file` with `overrides`),
    /// counting it and reserving its share of the result-byte budgets (`reserve.rs`), or
    /// refuses it naming the limit. A call finding a result-byte budget held by calls in
    /// flight waits for one of them to end, by the call's deadline.
    pub async fn admit(
        &self,
        ctx: &CallContext,
        (server, tool): (&str, &str),
        overrides: &LimitOverrides,
        file: &str,
    ) -> Result<Option<Reservation>, Decision> {
        loop {
            let released = ctx.run.tally.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            match self.try_admit(ctx, (server, tool), overrides, file) {
                Admit::Go(reservation) => return Ok(reservation),
                Admit::Refused(decision) => return Err(decision),
                Admit::Wait(decision) => {
                    if tokio::time::timeout_at(ctx.deadline, released)
                        .await
                        .is_err()
                    {
                        return Err(decision);
                    }
                }
            }
        }
    }

    /// One look at the limits for [`Limits::admit`].
    fn try_admit(
        &self,
        ctx: &CallContext,
        (server, tool): (&str, &str),
        overrides: &LimitOverrides,
        file: &str,
    ) -> Admit {
        if self.is_off() && *overrides == LimitOverrides::default() {
            return Admit::Go(None);
        }
        let d = &self.defaults;
        let tally = &ctx.run.tally;
        let mut run = tally.budgets.lock().expect("budgets lock");
        let used = run.servers.get(server).copied().unwrap_or_default();
        let estimate = run
            .largest_result
            .get(&(server.to_string(), tool.to_string()))
            .copied();
        let run_calls = (d.run_max_calls > 0).then(|| Limit {
            value: d.run_max_calls,
            source: format!("MCP_BRIDGE_RUN_MAX_CALLS={}", d.run_max_calls),
        });
        if let Some(l) = run_calls.filter(|l| run.calls >= l.value) {
            return Admit::Refused(refused(
                server,
                &l,
                format!("this run made its {} tool calls", l.value),
            ));
        }
        let run_bytes = (d.run_max_result_bytes > 0).then(|| Limit {
            value: d.run_max_result_bytes,
            source: format!("MCP_BRIDGE_RUN_MAX_RESULT_BYTES={}", d.run_max_result_bytes),
        });
        let got = Tally::get(&tally.result_bytes);
        let mut reserve_run = 0;
        if let Some(l) = run_bytes {
            let spent = || {
                refused(
                    server,
                    &l,
                    format!(
                        "this run received {got} bytes of tool results, the most it may ({})",
                        l.value
                    ),
                )
            };
            match room(l.value, got, run.reserved_bytes, estimate) {
                Room::Spent => return Admit::Refused(spent()),
                Room::Held => return Admit::Wait(held(server, &l)),
                Room::Reserve(n) => reserve_run = n,
            }
        }
        let server_calls = entry_cap(overrides.max_calls_per_run, "maxCallsPerRun", file);
        if let Some(l) = server_calls.filter(|l| used.calls >= l.value) {
            return Admit::Refused(refused(
                server,
                &l,
                format!("this run made its {} calls to server '{server}'", l.value),
            ));
        }
        let server_bytes = entry_cap(
            overrides.max_result_bytes_per_run,
            "maxResultBytesPerRun",
            file,
        );
        let mut reserve_server = 0;
        if let Some(l) = server_bytes {
            let spent = || {
                refused(
                    server,
                    &l,
                    format!(
                        "this run received {} bytes of results from server '{server}', the \
                         most it may ({})",
                        used.result_bytes, l.value
                    ),
                )
            };
            match room(l.value, used.result_bytes, used.reserved_bytes, estimate) {
                Room::Spent => return Admit::Refused(spent()),
                Room::Held => return Admit::Wait(held(server, &l)),
                Room::Reserve(n) => reserve_server = n,
            }
        }
        let rate = pick(
            overrides.calls_per_minute,
            "callsPerMinute",
            file,
            d.calls_per_minute,
            "MCP_BRIDGE_CALLS_PER_MINUTE",
        );
        if let Some(l) = rate {
            let now = Instant::now();
            let key = BucketKey {
                token: ctx.run.caller.as_ref().map(|c| c.token.clone()),
                server: server.to_string(),
            };
            let mut buckets = self.buckets.lock().expect("buckets lock");
            if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&key) {
                buckets.retain(|_, b| !b.is_full(now));
            }
            let bucket = buckets
                .entry(key)
                .or_insert_with(|| Bucket::full(l.value, now));
            if bucket.per_minute != l.value {
                *bucket = Bucket::full(l.value, now);
            }
            if let Err(wait) = bucket.take(now) {
                let secs = wait.as_secs_f64().ceil().max(1.0);
                return Admit::Refused(refused(
                    server,
                    &l,
                    format!(
                        "the rate limit of {} calls per minute to server '{server}' is \
                         reached; a call may go again in about {secs} s",
                        l.value
                    ),
                ));
            }
        }
        run.calls += 1;
        run.reserved_bytes += reserve_run;
        let entry = run.servers.entry(server.to_string()).or_default();
        entry.calls += 1;
        entry.reserved_bytes += reserve_server;
        let reserved = reserve_run > 0 || reserve_server > 0;
        Admit::Go(reserved.then(|| {
            Reservation::new(ctx.run.clone(), (server, tool), reserve_run, reserve_server)
        }))
    }

    /// Whether any result-byte budget applies to a call with these entry `overrides` (the
    /// setting, or the entry's `maxResultBytesPerRun`).
    pub fn counts_bytes(&self, overrides: Option<&LimitOverrides>) -> bool {
        self.defaults.run_max_result_bytes > 0
            || overrides.is_some_and(|o| o.max_result_bytes_per_run.is_some_and(|v| v > 0))
    }

    /// Counts `result_bytes` received by `ctx`'s run from `server` (the run's total is the
    /// tally's `result_bytes`, counted by the caller).
    pub fn received(&self, ctx: &CallContext, server: &str, result_bytes: u64) {
        if result_bytes == 0 {
            return;
        }
        let mut run = ctx.run.tally.budgets.lock().expect("budgets lock");
        if let Some(used) = run.servers.get_mut(server) {
            used.result_bytes = used.result_bytes.saturating_add(result_bytes);
        }
    }
}

/// The refusal of a call that waited for room in result-byte budget `l` until its deadline.
fn held(server: &str, l: &Limit) -> Decision {
    refused(
        server,
        l,
        "the rest of this run's result-byte budget stayed reserved by its calls in flight \
         until this call's deadline"
            .to_string(),
    )
}

/// The refusal of a call to `server` by limit `l`: `what` happened, where the limit was set,
/// and that the run goes on.
fn refused(server: &str, l: &Limit, what: String) -> Decision {
    let message = format!(
        "call to MCP server '{server}' refused: {what} (limit {}); the run goes on, and \
         this error can be caught",
        l.source
    );
    Decision::refused(
        Verdict::Limited,
        l.source.clone(),
        ErrorKind::LimitExceeded,
        message,
    )
}

#[cfg(test)]
mod tests;
