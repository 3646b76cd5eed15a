//! Tests of `limits`.

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
