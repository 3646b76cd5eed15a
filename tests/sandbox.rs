//! The sandbox actor driving the real Python entrypoint as a local process (no engine needed).

use std::time::{Duration, Instant};

use mcp_code_bridge::report::RunStatus;

use crate::support::{process_app, req};

/// Asserts that the run's notice (e.g. "the sandbox was restarted …") mentions `word`.
fn assert_notice(r: &mcp_code_bridge::report::RunReport, word: &str) {
    let notice = r.notice.as_deref().unwrap_or("");
    assert!(notice.contains(word), "notice without {word:?}: {r:?}");
}

#[tokio::test]
async fn state_persists_and_errors_do_not_break_the_session() {
    let (app, _rt) = process_app(&[]);
    let r = app
        .sandbox
        .run(req(
            "import math\nx = 41\ndef f(v):\n    return v + 1\nprint('hi')",
            10,
        ))
        .await;
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    assert_eq!(r.stdout, "hi\n");
    let r = app.sandbox.run(req("1/0", 10)).await;
    assert_eq!(r.status, RunStatus::Error);
    let tb = r.error.expect("traceback");
    assert!(tb.contains("ZeroDivisionError"), "{tb}");
    let r = app
        .sandbox
        .run(req(
            "import asyncio\nawait asyncio.sleep(0.01)\nprint(f(x), math.pi > 3)",
            10,
        ))
        .await;
    assert_eq!(r.stdout, "42 True\n", "{r:?}");
    assert!(r.notice.is_none());
    app.shutdown().await;
}

#[tokio::test]
async fn a_system_exit_carries_its_status_and_keeps_the_session() {
    let (app, _rt) = process_app(&[]);
    for (code, status, message) in [
        ("import sys\nprint('a')\nsys.exit(7)", 7, None),
        ("raise SystemExit", 0, None),
        ("import sys\nsys.exit('bad input')", 1, Some("bad input")),
    ] {
        let r = app.sandbox.run(req(code, 10)).await;
        // run_python's result is what it was: an error with the SystemExit traceback
        assert_eq!(r.status, RunStatus::Error, "{r:?}");
        assert!(
            r.error.as_deref().unwrap_or("").contains("SystemExit"),
            "{r:?}"
        );
        let exit = r.exit.as_ref().expect("a SystemExit is reported");
        assert_eq!(
            (exit.code, exit.message.as_deref()),
            (status, message),
            "{r:?}"
        );
    }
    let r = app.sandbox.run(req("1/0", 10)).await;
    assert_eq!(
        (r.status, r.exit),
        (RunStatus::Error, None),
        "only SystemExit has one"
    );
    let r = app.sandbox.run(req("print('still here')", 10)).await;
    assert_eq!(r.stdout, "still here\n", "{r:?}");
    assert!(r.notice.is_none(), "the sandbox survived");
    app.shutdown().await;
}

#[tokio::test]
async fn timeout_interrupts_and_keeps_state() {
    let (app, _rt) = process_app(&[]);
    app.sandbox.run(req("keep = 'me'", 10)).await;
    let start = Instant::now();
    let r = app
        .sandbox
        .run(req("import time\nprint('before')\ntime.sleep(100)", 1))
        .await;
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(r.status, RunStatus::Timeout, "{r:?}");
    assert!(
        r.error.as_deref().unwrap_or("").contains("interrupted"),
        "{r:?}"
    );
    assert_eq!(
        r.stdout, "before\n",
        "output printed before the timeout is kept"
    );
    let r = app.sandbox.run(req("print(keep)", 10)).await;
    assert_eq!(r.stdout, "me\n", "{r:?}");
    assert!(r.notice.is_none(), "state survived, so no reset notice");
    app.shutdown().await;
}

#[tokio::test]
async fn code_ignoring_interrupts_gets_the_sandbox_killed_and_replaced() {
    let (app, rt) = process_app(&[]);
    app.sandbox.run(req("lost = 1", 10)).await;
    let r = app
        .sandbox
        .run(req(
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
            1,
        ))
        .await;
    assert_eq!(r.status, RunStatus::Timeout);
    assert!(r.error.as_deref().unwrap_or("").contains("killed"), "{r:?}");
    let r = app.sandbox.run(req("print('lost' in globals())", 10)).await;
    assert_eq!(r.stdout, "False\n");
    assert_notice(&r, "restarted");
    assert!(
        rt.calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|c| *c == "create")
            .count()
            == 2
    );
    app.shutdown().await;
}

#[tokio::test]
async fn sandbox_killed_during_and_between_calls() {
    let (app, rt) = process_app(&[]);
    app.sandbox.run(req("x = 1", 10)).await;
    let id = rt.live_ids().pop().expect("one sandbox");
    let pid = rt.pid_of(&id).expect("pid");
    // Killed from outside during a call: reported on that call, promptly.
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let start = Instant::now();
    let r = app
        .sandbox
        .run(req("import time\ntime.sleep(30)", 20))
        .await;
    killer.await.expect("killer");
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    assert!(r.error.as_deref().unwrap_or("").contains("died"), "{r:?}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "death noticed in {:?}",
        start.elapsed()
    );
    let r = app.sandbox.run(req("print('again')", 10)).await;
    assert_eq!(r.stdout, "again\n");
    assert!(r.notice.is_some(), "told that state was reset");
    // Killed between calls: the next call starts a fresh sandbox and says so.
    let id = rt.live_ids().pop().expect("one sandbox");
    unsafe { libc::kill(rt.pid_of(&id).expect("pid") as i32, libc::SIGKILL) };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = app.sandbox.run(req("print('third')", 10)).await;
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    assert_notice(&r, "stopped");
    app.shutdown().await;
}

#[tokio::test]
async fn queued_calls_count_their_wait_against_the_timeout() {
    let (app, _rt) = process_app(&[]);
    app.sandbox.run(req("pass", 10)).await;
    let slow = {
        let sb = app.sandbox.clone();
        tokio::spawn(async move { sb.run(req("import time\ntime.sleep(2.5)", 10)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queued = app.sandbox.run(req("print('late')", 1)).await;
    assert_eq!(queued.status, RunStatus::Timeout, "{queued:?}");
    assert!(
        queued.error.as_deref().unwrap_or("").contains("waiting"),
        "{queued:?}"
    );
    assert_eq!(slow.await.expect("slow run").status, RunStatus::Ok);
    app.shutdown().await;
}

#[tokio::test]
async fn idle_sandbox_is_stopped_and_the_next_call_is_told() {
    let (app, rt) = process_app(&[
        ("MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "1"),
        ("MCP_BRIDGE_SNAPSHOT_MAX", "off"),
    ]);
    app.sandbox.run(req("y = 2", 10)).await;
    assert_eq!(rt.live_ids().len(), 1);
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(rt.live_ids().is_empty(), "idle sandbox removed");
    let r = app.sandbox.run(req("print('y' in globals())", 10)).await;
    assert_eq!(r.stdout, "False\n");
    assert_notice(&r, "idle");
    app.shutdown().await;
}

#[tokio::test]
async fn huge_output_is_cut_with_a_marker() {
    let (app, _rt) = process_app(&[("MCP_BRIDGE_MAX_OUTPUT", "1000")]);
    let r = app
        .sandbox
        .run(req("print('a' * 5_000_000)\nprint('END')", 20))
        .await;
    assert_eq!(r.status, RunStatus::Ok);
    assert!(r.stdout.len() < 2000, "{} bytes", r.stdout.len());
    assert!(r.stdout.contains("characters cut"), "{}", r.stdout);
    assert!(r.stdout.trim_end().ends_with("END"), "the tail is kept");
    let r = app.sandbox.run(req("print('still fine')", 10)).await;
    assert_eq!(r.stdout, "still fine\n");
    app.shutdown().await;
}

#[tokio::test]
async fn many_concurrent_requests_to_the_host() {
    let (app, _rt) = process_app(&[]);
    let code = "from mcp import runtime\nimport asyncio\nr = await asyncio.gather(*[runtime.ping(i) for i in range(200)])\nprint(sum(r), runtime.ping_sync('s'))";
    let r = app.sandbox.run(req(code, 20)).await;
    assert_eq!(r.stdout, "19900 s\n", "{r:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn replies_the_sandbox_does_not_read_are_bounded_by_the_reply_budget() {
    // Hostile sandbox code takes the entrypoint's read lock (so nothing reads the channel), asks
    // for 48 replies of 256 KiB (12 MiB) from 48 threads, and holds the lock for 4 s. Past the
    // 2 MiB budget the bridge turns replies into errors instead of holding them all; without
    // the budget every reply would come back.
    let (app, _rt) = process_app(&[("MCP_BRIDGE_MAX_PENDING_RESULTS", "2m")]);
    let code = "from mcp import runtime\nimport gc, sys, threading, time\n\
Inbox = sys.modules['_mcp_bridge.inbox'].Inbox\n\
box = [o for o in gc.get_objects() if isinstance(o, Inbox)][0]\n\
big = 'x' * (256 << 10)\nout = []\n\
def ask():\n    try:\n        out.append(runtime.ping_sync(big))\n    except Exception as e:\n        out.append(e)\n\
box._lock.acquire()\n\
threads = [threading.Thread(target=ask) for _ in range(48)]\n\
for t in threads: t.start()\n\
time.sleep(4)\n\
box._lock.release()\n\
for t in threads: t.join()\n\
full = sum(1 for o in out if o == big)\n\
dropped = [o for o in out if isinstance(o, Exception)]\n\
print(full, len(dropped), all('MCP_BRIDGE_MAX_PENDING_RESULTS' in str(e) for e in dropped))";
    let r = app.sandbox.run(req(code, 30)).await;
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    let seen: Vec<&str> = r.stdout.split_whitespace().collect();
    let (full, dropped): (usize, usize) = (seen[0].parse().unwrap(), seen[1].parse().unwrap());
    assert_eq!(full + dropped, 48, "{r:?}");
    assert!(dropped > 0, "no reply was refused: {r:?}");
    assert!(full > 0, "{r:?}");
    assert_eq!(seen[2], "True", "{r:?}");
    let r = app.sandbox.run(req("print('next')", 10)).await;
    assert_eq!(r.stdout, "next\n", "{r:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn shutdown_removes_the_sandbox() {
    let (app, rt) = process_app(&[]);
    app.sandbox.run(req("pass", 10)).await;
    assert_eq!(rt.live_ids().len(), 1);
    app.shutdown().await;
    assert!(rt.live_ids().is_empty());
}

#[tokio::test]
async fn engine_failure_is_reported_and_the_next_call_recovers() {
    let (app, rt) = process_app(&[]);
    *rt.fail_create.lock().expect("lock") = Some("disk full".into());
    let r = app.sandbox.run(req("print(1)", 10)).await;
    assert_eq!(r.status, RunStatus::SandboxError);
    assert!(
        r.error.as_deref().unwrap_or("").contains("disk full"),
        "{r:?}"
    );
    *rt.fail_create.lock().expect("lock") = None;
    let r = app.sandbox.run(req("print(1)", 10)).await;
    assert_eq!(r.stdout, "1\n");
    app.shutdown().await;
}

/// Waits up to 15 s for `cond`.
pub(crate) async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while !cond() {
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn prewarm_starts_the_sandbox_before_the_first_call() {
    let (app, rt) = process_app(&[]);
    assert!(rt.live_ids().is_empty(), "nothing starts by itself");
    app.sandbox.prewarm();
    wait_for("the prewarmed sandbox", || rt.live_ids().len() == 1).await;
    let r = app.sandbox.run(req("print(2 + 2)", 10)).await;
    assert_eq!(r.stdout, "4\n", "{r:?}");
    assert!(
        r.notice.is_none(),
        "a prewarmed sandbox is not a reset: {r:?}"
    );
    let creates = rt
        .calls
        .lock()
        .expect("calls")
        .iter()
        .filter(|c| *c == "create")
        .count();
    assert_eq!(creates, 1, "the call used the prewarmed sandbox");
    app.shutdown().await;
}

#[tokio::test]
async fn a_killed_sandbox_is_replaced_before_the_next_call_unless_prewarm_is_off() {
    let stuck =
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass";
    for prewarm in ["1", "0"] {
        let (app, rt) = process_app(&[("MCP_BRIDGE_PREWARM", prewarm)]);
        app.sandbox.run(req("pass", 10)).await;
        let old = rt.live_ids();
        let r = app.sandbox.run(req(stuck, 1)).await;
        assert_eq!(r.status, RunStatus::Timeout, "{r:?}");
        if prewarm == "1" {
            wait_for("the replacement sandbox", || {
                let ids = rt.live_ids();
                ids.len() == 1 && ids != old
            })
            .await;
        } else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert!(
                rt.live_ids().is_empty(),
                "no replacement with MCP_BRIDGE_PREWARM=0"
            );
        }
        let r = app.sandbox.run(req("print('fresh')", 10)).await;
        assert_eq!(r.stdout, "fresh\n", "{r:?}");
        assert_notice(&r, "restarted");
        app.shutdown().await;
    }
}

#[tokio::test]
async fn a_sandbox_weaker_than_configured_is_refused_unless_allowed() {
    // The process double runs unconfined (full capabilities, network, no limits): a sandbox
    // engine that ignored the configuration would look like this from inside.
    let (app, rt) = process_app(&[]);
    rt.claim_isolation
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let r = app.sandbox.run(req("print('ran')", 10)).await;
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    let msg = r.error.unwrap_or_default();
    for part in [
        "weaker than configured",
        "capabilities",
        "memory limit",
        "MCP_BRIDGE_ALLOW_WEAK_SANDBOX",
    ] {
        assert!(msg.contains(part), "{part} missing from: {msg}");
    }
    assert!(!r.stdout.contains("ran"));
    assert!(rt.live_ids().is_empty(), "the refused sandbox was removed");
    app.shutdown().await;

    let (app, rt) = process_app(&[("MCP_BRIDGE_ALLOW_WEAK_SANDBOX", "1")]);
    rt.claim_isolation
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let r = app.sandbox.run(req("print('ran')", 10)).await;
    assert_eq!(r.stdout, "ran\n", "{r:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn code_that_ends_the_sandbox_is_reported_once_with_its_exit_code() {
    for channel in ["auto", "stdio"] {
        let (app, rt) =
            process_app(&[("MCP_BRIDGE_PREWARM", "0"), ("MCP_BRIDGE_CHANNEL", channel)]);
        app.sandbox.run(req("pass", 10)).await;
        let r = app.sandbox.run(req("import os\nos._exit(3)", 10)).await;
        assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
        let msg = r.error.unwrap_or_default();
        assert!(msg.contains("exited with code 3"), "{channel}: {msg}");
        let creates = rt
            .calls
            .lock()
            .expect("calls")
            .iter()
            .filter(|c| *c == "create")
            .count();
        if channel == "auto" {
            // `started` came first: a death after it is this call's, never retried.
            assert_eq!(creates, 1, "no retry on the socket channel: {msg}");
        } else {
            // Lazy `started` on stdio: retried once, then told the code probably did it.
            assert_eq!(creates, 2, "{msg}");
            assert!(msg.contains("the code itself probably ends"), "{msg}");
        }
        app.shutdown().await;
    }
}
