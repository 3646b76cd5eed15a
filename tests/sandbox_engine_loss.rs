//! The engine going away under a sandbox: the call goes on over the socket channel or fails on
//! stdio, the next call reconnects to a fresh sandbox, and this bridge's orphans are removed.

use std::time::{Duration, Instant};

use mcp_code_bridge::report::RunStatus;

use crate::sandbox::wait_for;
use crate::support::{process_app, req};

const SLEEP_THEN_DONE: &str = "import time\ntime.sleep(1.5)\nprint('done')";

/// Cuts the engine 300 ms into the next call.
fn cut_soon(rt: &std::sync::Arc<mcp_code_bridge::container::process::ProcessRuntime>) {
    let rt = rt.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        rt.cut_engine();
    });
}

#[tokio::test]
async fn engine_lost_mid_call_on_the_socket_channel_the_call_finishes_then_a_fresh_sandbox() {
    let (app, rt) = process_app(&[("MCP_BRIDGE_PREWARM", "0")]);
    app.sandbox.run(req("kept = 1", 10)).await;
    let old = rt.live_ids().pop().expect("one sandbox");
    cut_soon(&rt);
    let r = app.sandbox.run(req(SLEEP_THEN_DONE, 20)).await;
    assert_eq!(
        r.status,
        RunStatus::Ok,
        "frames do not need the engine: {r:?}"
    );
    assert_eq!(r.stdout, "done\n");
    // Still gone: a clear failure, at once.
    let start = Instant::now();
    let r = app.sandbox.run(req("print(1)", 20)).await;
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    assert!(
        r.error.as_deref().unwrap_or("").contains("engine is gone"),
        "{r:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    rt.restore_engine();
    let r = app.sandbox.run(req("print('kept' in globals())", 10)).await;
    assert_eq!(r.stdout, "False\n", "{r:?}");
    let notice = r.notice.unwrap_or_default();
    assert!(
        notice.contains("connection to the container engine"),
        "{notice}"
    );
    wait_for("the old sandbox's removal", || {
        !rt.live_ids().contains(&old)
    })
    .await;
    app.shutdown().await;
    assert!(rt.live_ids().is_empty(), "{:?}", rt.live_ids());
}

#[tokio::test]
async fn engine_lost_mid_call_on_stdio_the_call_says_so_and_exit_removes_the_sandbox() {
    let (app, rt) = process_app(&[("MCP_BRIDGE_CHANNEL", "stdio"), ("MCP_BRIDGE_PREWARM", "0")]);
    app.sandbox.run(req("pass", 10)).await;
    cut_soon(&rt);
    let r = app.sandbox.run(req(SLEEP_THEN_DONE, 20)).await;
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    let err = r.error.unwrap_or_default();
    assert!(
        err.contains("lost the connection to the container engine"),
        "{err}"
    );
    assert!(
        !rt.live_ids().is_empty(),
        "the lost engine could not remove it"
    );
    // The engine comes back, but no call reconnects: the bridge's exit removes the leftover.
    rt.restore_engine();
    app.shutdown().await;
    assert!(rt.live_ids().is_empty(), "left behind: {:?}", rt.live_ids());
}
