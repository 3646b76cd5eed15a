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
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::calls::RunScope;

    impl Limits {
        /// `try_admit`, the reservation dropped (given back) at once; a wait is a failure.
        fn admit_now(
            &self,
            ctx: &CallContext,
            server: &str,
            overrides: &LimitOverrides,
            file: &str,
        ) -> Result<(), Decision> {
            match self.try_admit(ctx, (server, "t"), overrides, file) {
                Admit::Go(_) => Ok(()),
                Admit::Refused(d) => Err(d),
                Admit::Wait(_) => panic!("waits"),
            }
        }
    }

    fn ctx() -> CallContext {
        CallContext {
            servers: Arc::from(Vec::new()),
            deadline: Instant::now() + Duration::from_secs(600),
            run: RunScope::plain("test"),
        }
    }

    fn settings(per_minute: u64, calls: u64, bytes: u64) -> LimitSettings {
        LimitSettings {
            calls_per_minute: per_minute,
            run_max_calls: calls,
            run_max_result_bytes: bytes,
        }
    }

    const NONE: LimitOverrides = LimitOverrides {
        calls_per_minute: None,
        max_calls_per_run: None,
        max_result_bytes_per_run: None,
    };

    fn message(d: Decision) -> (Verdict, String, String) {
        let e = d.error.expect("an error");
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        (d.verdict, d.rule.unwrap_or_default(), e.message)
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_limit_is_per_server_over_all_runs_and_refills() {
        let limits = Limits::new(settings(3, 0, 0));
        for _ in 0..3 {
            limits.admit_now(&ctx(), "a", &NONE, "/f").expect("within");
        }
        let (verdict, rule, msg) = message(
            limits
                .admit_now(&ctx(), "a", &NONE, "/f")
                .expect_err("refused"),
        );
        assert_eq!(verdict, Verdict::Limited);
        assert_eq!(rule, "MCP_BRIDGE_CALLS_PER_MINUTE=3");
        assert!(msg.contains("3 calls per minute to server 'a'"), "{msg}");
        assert!(
            msg.contains("about 20 s") && msg.contains("the run goes on"),
            "{msg}"
        );
        // Another server has its own bucket.
        limits.admit_now(&ctx(), "b", &NONE, "/f").expect("b");
        // One token back every 20 s.
        tokio::time::advance(Duration::from_secs(19)).await;
        assert!(limits.admit_now(&ctx(), "a", &NONE, "/f").is_err());
        tokio::time::advance(Duration::from_secs(2)).await;
        limits
            .admit_now(&ctx(), "a", &NONE, "/f")
            .expect("refilled");
        assert!(limits.admit_now(&ctx(), "a", &NONE, "/f").is_err());
        // The entry overrides the setting, and 0 there means no limit.
        let entry = LimitOverrides {
            calls_per_minute: Some(1),
            ..NONE
        };
        limits
            .admit_now(&ctx(), "c", &entry, "/e.json")
            .expect("first");
        let (_, rule, _) = message(
            limits
                .admit_now(&ctx(), "c", &entry, "/e.json")
                .expect_err("refused"),
        );
        assert_eq!(rule, "\"callsPerMinute\": 1 in /e.json");
        let off = LimitOverrides {
            calls_per_minute: Some(0),
            ..NONE
        };
        for _ in 0..10 {
            limits
                .admit_now(&ctx(), "d", &off, "/e.json")
                .expect("no limit");
        }
        assert!(limits.buckets.lock().expect("lock").len() <= 3);
    }

    fn ctx_of(token: &str, sandbox: &str) -> CallContext {
        let caller = crate::calls::Caller {
            token: token.into(),
            sandbox: sandbox.into(),
            identity: None,
        };
        CallContext {
            run: Arc::new(RunScope::new("test", None, None).with_caller(Some(Arc::new(caller)))),
            ..ctx()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn with_callers_the_rate_limit_is_per_token_and_server() {
        let limits = Limits::new(settings(2, 0, 0));
        // Two sandboxes of one token share its bucket.
        limits
            .admit_now(&ctx_of("alice", "s1"), "a", &NONE, "/f")
            .expect("1");
        limits
            .admit_now(&ctx_of("alice", "s2"), "a", &NONE, "/f")
            .expect("2");
        let refused = limits
            .admit_now(&ctx_of("alice", "s1"), "a", &NONE, "/f")
            .expect_err("alice used hers");
        let (_, rule, _) = message(refused);
        assert_eq!(rule, "MCP_BRIDGE_CALLS_PER_MINUTE=2");
        // Another token has its own, so has alice for another server, so have runs without
        // a caller (stdio `run`, `exec`).
        limits
            .admit_now(&ctx_of("bob", "s3"), "a", &NONE, "/f")
            .expect("bob's own");
        limits
            .admit_now(&ctx_of("alice", "s1"), "b", &NONE, "/f")
            .expect("another server");
        limits
            .admit_now(&ctx(), "a", &NONE, "/f")
            .expect("no caller");
        assert_eq!(limits.buckets.lock().expect("lock").len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_most_buckets_kept_only_refilled_ones_are_dropped() {
        let limits = Limits::new(settings(2, 0, 0));
        let fill = |first: usize| {
            for i in first..MAX_BUCKETS {
                limits
                    .admit_now(&ctx_of(&format!("t{i}"), "s"), "a", &NONE, "/f")
                    .expect("own bucket");
            }
        };
        fill(0);
        assert_eq!(limits.buckets.lock().expect("lock").len(), MAX_BUCKETS);
        // A minute on, every bucket has refilled: the next new one drops them all.
        tokio::time::advance(Duration::from_secs(60)).await;
        limits
            .admit_now(&ctx_of("new", "s"), "a", &NONE, "/f")
            .expect("new");
        assert_eq!(limits.buckets.lock().expect("lock").len(), 1);
        // Buckets still refilling are kept: dropping one would give its token a fresh burst.
        fill(1);
        limits
            .admit_now(&ctx_of("other", "s"), "a", &NONE, "/f")
            .expect("other");
        assert_eq!(limits.buckets.lock().expect("lock").len(), MAX_BUCKETS + 1);
    }

    #[tokio::test]
    async fn run_budgets_count_calls_and_result_bytes() {
        let limits = Limits::new(settings(0, 3, 100));
        let run = ctx();
        limits.admit_now(&run, "a", &NONE, "/f").expect("1");
        limits.admit_now(&run, "b", &NONE, "/f").expect("2");
        limits.admit_now(&run, "a", &NONE, "/f").expect("3");
        let (_, rule, msg) = message(
            limits
                .admit_now(&run, "b", &NONE, "/f")
                .expect_err("refused"),
        );
        assert_eq!(rule, "MCP_BRIDGE_RUN_MAX_CALLS=3");
        assert!(msg.contains("made its 3 tool calls"), "{msg}");
        // A new run starts afresh.
        let next = ctx();
        limits.admit_now(&next, "a", &NONE, "/f").expect("new run");
        Tally::add(&next.run.tally.result_bytes, 100);
        limits.received(&next, "a", 100);
        let (_, rule, msg) = message(
            limits
                .admit_now(&next, "a", &NONE, "/f")
                .expect_err("refused"),
        );
        assert_eq!(rule, "MCP_BRIDGE_RUN_MAX_RESULT_BYTES=100");
        assert!(msg.contains("received 100 bytes"), "{msg}");
    }

    /// One call of `run` to `server`: admitted (then, after `delay`, `bytes` received) or not.
    async fn one_call(
        limits: Arc<Limits>,
        run: CallContext,
        (server, tool): (&'static str, &'static str),
        overrides: LimitOverrides,
        bytes: u64,
    ) -> bool {
        match limits
            .admit(&run, (server, tool), &overrides, "/e.json")
            .await
        {
            Ok(reservation) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Tally::add(&run.run.tally.result_bytes, bytes);
                limits.received(&run, server, bytes);
                if let Some(r) = reservation {
                    r.settle(bytes);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// 60 calls of `bytes` each made together; how many were admitted.
    async fn gathered(
        limits: &Arc<Limits>,
        run: &CallContext,
        call: (&'static str, &'static str),
        overrides: LimitOverrides,
        bytes: u64,
    ) -> usize {
        let calls = (0..60).map(|_| {
            tokio::spawn(one_call(
                limits.clone(),
                run.clone(),
                call,
                overrides,
                bytes,
            ))
        });
        let admitted = futures::future::join_all(calls).await;
        admitted
            .into_iter()
            .filter(|r| *r.as_ref().expect("joined"))
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn gathered_calls_pass_a_result_byte_budget_by_one_call_at_most() {
        // 60 calls made together, 10,000 bytes each, under 1,000: one goes through.
        let limits = Arc::new(Limits::new(settings(0, 0, 1000)));
        let run = ctx();
        let ok = gathered(&limits, &run, ("a", "t"), NONE, 10_000).await;
        assert_eq!(ok, 1);
        assert_eq!(Tally::get(&run.run.tally.result_bytes), 10_000);
        // The same under an entry's maxResultBytesPerRun.
        let entry = LimitOverrides {
            max_result_bytes_per_run: Some(1000),
            ..NONE
        };
        let limits = Arc::new(Limits::new(LimitSettings::default()));
        let run = ctx();
        let ok = gathered(&limits, &run, ("a", "t"), entry, 10_000).await;
        assert_eq!(ok, 1);
        // Small results: after the first, they go together, and no more than fit.
        let limits = Arc::new(Limits::new(settings(0, 0, 1000)));
        let run = ctx();
        let started = Instant::now();
        let ok = gathered(&limits, &run, ("a", "t"), NONE, 50).await;
        assert_eq!(ok, 20);
        assert_eq!(Tally::get(&run.run.tally.result_bytes), 1000);
        // Two rounds of 10 ms: the first call alone, then the other 19 together.
        assert!(
            started.elapsed() <= Duration::from_millis(30),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            run.run.tally.budgets.lock().expect("lock").reserved_bytes,
            0,
            "every reservation given back"
        );
        // A small tool's estimate does not let another tool's big results through.
        let limits = Arc::new(Limits::new(settings(0, 0, 1000)));
        let run = ctx();
        assert!(one_call(limits.clone(), run.clone(), ("a", "small"), NONE, 6).await);
        let ok = gathered(&limits, &run, ("a", "big"), NONE, 10_000).await;
        assert_eq!(ok, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_waiting_for_room_held_until_its_deadline_is_refused_saying_so() {
        let limits = Limits::new(settings(0, 0, 1000));
        let run = ctx();
        let first = limits
            .admit(&run, ("a", "t"), &NONE, "/f")
            .await
            .expect("first");
        let (_, rule, msg) = message(
            limits
                .admit(&run, ("a", "t"), &NONE, "/f")
                .await
                .expect_err("held"),
        );
        assert_eq!(rule, "MCP_BRIDGE_RUN_MAX_RESULT_BYTES=1000");
        assert!(
            msg.contains("stayed reserved by its calls in flight"),
            "{msg}"
        );
        assert!(Instant::now() >= run.deadline);
        drop(first);
    }

    #[tokio::test]
    async fn per_server_budgets_come_from_the_entry() {
        let limits = Limits::new(LimitSettings::default());
        assert!(limits.is_off());
        let entry = LimitOverrides {
            max_calls_per_run: Some(2),
            max_result_bytes_per_run: Some(10),
            ..NONE
        };
        let run = ctx();
        limits.admit_now(&run, "a", &entry, "/e.json").expect("1");
        limits.admit_now(&run, "a", &entry, "/e.json").expect("2");
        let (_, rule, msg) = message(
            limits
                .admit_now(&run, "a", &entry, "/e.json")
                .expect_err("refused"),
        );
        assert_eq!(rule, "\"maxCallsPerRun\": 2 in /e.json");
        assert!(msg.contains("made its 2 calls to server 'a'"), "{msg}");
        limits
            .admit_now(&run, "b", &NONE, "/e.json")
            .expect("other server");
        let run = ctx();
        limits.admit_now(&run, "a", &entry, "/e.json").expect("1");
        limits.received(&run, "a", 10);
        let (_, rule, _) = message(
            limits
                .admit_now(&run, "a", &entry, "/e.json")
                .expect_err("refused"),
        );
        assert_eq!(rule, "\"maxResultBytesPerRun\": 10 in /e.json");
        let budgets = run.run.tally.budgets.lock().expect("lock");
        assert_eq!(budgets.servers.len(), 1);
        assert_eq!(budgets.servers["a"].result_bytes, 10);
    }
}
