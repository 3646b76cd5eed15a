//! The upstream pool against the real stub MCP server binary (rmcp, stdio).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use mcp_code_bridge::config::{ServerSpec, Servers, Transport};
use mcp_code_bridge::upstream::client::UpstreamTasks;
use mcp_code_bridge::upstream::{UpstreamError, UpstreamPool};
use serde_json::json;
use tokio::time::Instant;

pub(crate) fn stub(name: &str, args: &[&str], env: &[(&str, String)]) -> ServerSpec {
    let stdio = Transport::Stdio {
        command: env!("CARGO_BIN_EXE_stub-mcp").into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        cwd: None,
    };
    ServerSpec::new(name, stdio, std::path::Path::new("/test/stub.json"))
}

fn pool(specs: Vec<ServerSpec>, dir: &std::path::Path) -> UpstreamPool {
    pool_on(true, specs, dir)
}

/// A pool whose calls take the lane (`lane`) or rmcp's request path (`MCP_BRIDGE_CALL_LANE=0`).
fn pool_on(lane: bool, specs: Vec<ServerSpec>, dir: &std::path::Path) -> UpstreamPool {
    pool_capped(lane, UpstreamTasks::detached().max_message, specs, dir)
}

/// [`pool_on`] accepting messages of at most `max_message` bytes from a server.
fn pool_capped(
    lane: bool,
    max_message: usize,
    specs: Vec<ServerSpec>,
    dir: &std::path::Path,
) -> UpstreamPool {
    let mut specs = specs;
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    let tasks = UpstreamTasks {
        call_lane: lane,
        max_message,
        ..UpstreamTasks::detached()
    };
    let servers = Servers {
        specs,
        ..Servers::default()
    };
    UpstreamPool::with_tasks(Arc::new(servers), dir, tasks)
}

/// Runs the test `$name(lane: bool)` on both call paths: `$name::lane` and `$name::rmcp`.
macro_rules! on_both_paths {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn lane() {
                super::$name(true).await
            }
            #[tokio::test]
            async fn rmcp() {
                super::$name(false).await
            }
        }
    )*};
}

on_both_paths!(
    loads_calls_and_reports_tool_errors,
    a_crashed_server_is_reported_with_stderr_and_restarted,
    a_hung_tool_hits_the_deadline_and_the_server_stays_usable,
    an_oversized_message_fails_the_call_at_once_and_the_server_restarts,
    concurrent_calls_run_concurrently,
    garbage_on_a_servers_stdout_is_skipped_and_calls_still_work,
    arguments_are_checked_against_the_schema_before_the_call,
);

fn soon(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

fn obj(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    v.as_object().cloned().expect("object")
}

async fn loads_calls_and_reports_tool_errors(lane: bool) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool_on(lane, vec![stub("stub", &[], &[])], d.path());
    let loaded = p.load(&["stub".into()], soon(20)).await.expect("load");
    for t in ["echo", "add", "slow", "crash", "big", "fail", "whoami"] {
        assert!(
            loaded["stub"].iter().any(|n| n.name == t),
            "missing {t}: {loaded:?}"
        );
    }
    let up = p.get("stub").expect("configured");
    let r = up
        .call("echo", obj(json!({"text": "hi"})), soon(10))
        .await
        .expect("echo");
    assert_eq!(r.structured_content, Some(json!({"text": "hi"})));
    let r = up
        .call("fail", obj(json!({"message": "nope"})), soon(10))
        .await
        .expect("a tool-level error is a result");
    assert_eq!(r.is_error, Some(true));
    let err = up
        .call("nosuch", obj(json!({})), soon(10))
        .await
        .expect_err("unknown tool");
    assert!(
        matches!(err, UpstreamError::UnknownTool { .. }) && err.to_string().contains("echo"),
        "{err}"
    );
    assert!(matches!(
        p.get("ghost"),
        Err(UpstreamError::UnknownServer { .. })
    ));
    p.shutdown().await;
}

async fn a_crashed_server_is_reported_with_stderr_and_restarted(lane: bool) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool_on(lane, vec![stub("stub", &[], &[])], d.path());
    let up = p.get("stub").expect("configured").clone();
    let err = up
        .call("crash", obj(json!({})), soon(10))
        .await
        .expect_err("crash");
    let msg = err.to_string();
    assert!(matches!(err, UpstreamError::Crashed { .. }), "{msg}");
    assert!(
        msg.contains("'stub'") && msg.contains("crashing on purpose"),
        "names the server and its stderr: {msg}"
    );
    let r = up
        .call("echo", obj(json!({"text": "back"})), soon(20))
        .await
        .expect("restarted");
    assert_eq!(r.structured_content, Some(json!({"text": "back"})));
    assert_eq!(up.starts(), 2);
    p.shutdown().await;
}

async fn a_hung_tool_hits_the_deadline_and_the_server_stays_usable(lane: bool) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool_on(lane, vec![stub("stub", &[], &[])], d.path());
    let up = p.get("stub").expect("configured").clone();
    up.connect(soon(20)).await.expect("start");
    let t = StdInstant::now();
    let err = up
        .call(
            "slow",
            obj(json!({"seconds": 60})),
            Instant::now() + Duration::from_millis(500),
        )
        .await
        .expect_err("deadline");
    assert!(matches!(err, UpstreamError::Timeout { .. }), "{err}");
    assert!(t.elapsed() < Duration::from_secs(2));
    // The server is told the bridge gave up (notifications/cancelled), so it stops the work.
    let told = StdInstant::now();
    while !up.stderr_tail().contains("slow: cancelled") {
        assert!(
            told.elapsed() < Duration::from_secs(10),
            "the server was not told of the cancellation; stderr: {}",
            up.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its late reply to the withdrawn call is dropped; the next call gets its own reply.
    let r = up
        .call("echo", obj(json!({"text": "ok"})), soon(10))
        .await
        .expect("still usable");
    assert_eq!(r.structured_content, Some(json!({"text": "ok"})));
    p.shutdown().await;
}

async fn an_oversized_message_fails_the_call_at_once_and_the_server_restarts(lane: bool) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool_capped(lane, 4 << 20, vec![stub("stub", &[], &[])], d.path());
    let up = p.get("stub").expect("configured").clone();
    let t = StdInstant::now();
    let big = 5 << 20; // over the 4 MiB message limit
    let err = up
        .call("big", obj(json!({ "bytes": big })), soon(60))
        .await
        .expect_err("too large");
    assert!(matches!(err, UpstreamError::Crashed { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("larger than MCP_BRIDGE_MAX_SERVER_MESSAGE (4 MiB)"),
        "the message names the setting to raise: {err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "failed at once, not at the deadline"
    );
    let r = up
        .call("big", obj(json!({ "bytes": 3 << 20 })), soon(60))
        .await
        .expect("a 3 MiB result fits after the restart");
    assert_eq!(up.starts(), 2);
    assert!(r.content[0].as_text().expect("text").text.len() == 3 << 20);
    p.shutdown().await;
    // The setting lifts the cap: the same 5 MiB result passes with 8 MiB.
    let p = pool_capped(lane, 8 << 20, vec![stub("stub", &[], &[])], d.path());
    let up = p.get("stub").expect("configured").clone();
    let r = up
        .call("big", obj(json!({ "bytes": big })), soon(60))
        .await
        .expect("under the raised cap");
    assert_eq!(
        r.content[0].as_text().expect("text").text.len(),
        big as usize
    );
    p.shutdown().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_backs_off() {
    let d = tempfile::tempdir().expect("tempdir");
    let stdio = Transport::Stdio {
        command: "/nonexistent/mcp".into(),
        args: vec![],
        env: BTreeMap::new(),
        cwd: None,
    };
    let bad = ServerSpec::new("broken", stdio, std::path::Path::new("/x.json"));
    let p = pool(vec![bad], d.path());
    let err = p
        .load(&["broken".into()], soon(5))
        .await
        .expect_err("cannot start");
    assert!(
        err.to_string().contains("could not be started") && err.to_string().contains("broken"),
        "{err}"
    );
    let again = p
        .load(&["broken".into()], soon(5))
        .await
        .expect_err("in backoff");
    assert!(again.to_string().contains("retrying in"), "{again}");
}

#[tokio::test]
async fn tool_lists_are_cached_for_servers_never_started_and_indexing_stops_them() {
    let d = tempfile::tempdir().expect("tempdir");
    let starts = d.path().join("starts.txt");
    let spec = stub(
        "cal",
        &["--extra-tools", "20"],
        &[("STUB_START_FILE", starts.display().to_string())],
    );
    let p = pool(vec![spec.clone()], d.path());
    assert!(p.known_tools().is_empty(), "nothing known, nothing started");
    assert!(!starts.exists(), "lazy: not started until named");
    p.ensure_indexed().await;
    let known = p.known_tools();
    assert_eq!(known.len(), 1);
    assert!(known[0].1.len() >= 27, "{}", known[0].1.len());
    assert_eq!(
        p.get("cal").expect("cal").state_name(),
        "idle",
        "indexing does not load the server"
    );
    // A new pool (a new bridge) finds the cache on disk without starting anything.
    let fresh = pool(vec![spec], d.path());
    assert_eq!(fresh.known_tools().len(), 1);
    fresh.ensure_indexed().await;
    let lines = std::fs::read_to_string(&starts)
        .expect("start file")
        .lines()
        .count();
    assert_eq!(lines, 1, "started exactly once, by the first indexing");
}

async fn concurrent_calls_run_concurrently(lane: bool) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool_on(lane, vec![stub("stub", &[], &[])], d.path());
    let up = p.get("stub").expect("configured").clone();
    up.connect(soon(20)).await.expect("start");
    let t = StdInstant::now();
    let calls = (0..20).map(|_| up.call("slow", obj(json!({"seconds": 0.5})), soon(20)));
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(|r| r.is_ok()));
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "20 × 0.5 s in {:?}: not serialized",
        t.elapsed()
    );
    p.shutdown().await;
}

async fn garbage_on_a_servers_stdout_is_skipped_and_calls_still_work(lane: bool) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool_on(
        lane,
        vec![stub("stub", &["--garbage-stdout"], &[])],
        d.path(),
    );
    let up = p.get("stub").expect("configured").clone();
    for i in 0..3 {
        let r = up
            .call(
                "echo",
                obj(json!({"text": format!("after garbage {i}")})),
                soon(10),
            )
            .await
            .expect("the garbage line does not break the connection");
        assert_eq!(
            r.structured_content,
            Some(json!({"text": format!("after garbage {i}")}))
        );
    }
    assert_eq!(up.starts(), 1, "no restart was needed");
    p.shutdown().await;
}

async fn arguments_are_checked_against_the_schema_before_the_call(lane: bool) {
    use mcp_code_bridge::calls::{BackendCall, CallContext, HostCalls, ToolCall};
    use mcp_code_bridge::upstream::UpstreamHostCalls;

    let d = tempfile::tempdir().expect("tempdir");
    let p = Arc::new(pool_on(lane, vec![stub("my-stub", &[], &[])], d.path()));
    let host = UpstreamHostCalls::new(p.clone());
    let servers = vec!["my-stub".to_string()];
    let scope = mcp_code_bridge::calls::RunScope::plain("test");
    host.load(&servers, &scope, soon(20)).await.expect("load");
    let ctx = CallContext {
        servers: Arc::from(servers),
        deadline: soon(10),
        run: mcp_code_bridge::calls::RunScope::plain("test"),
    };
    let call = |tool: &str, args: serde_json::Value| {
        host.call(
            &ctx,
            BackendCall::CallTool(ToolCall {
                server: "my-stub".into(),
                tool: tool.into(),
                arguments: obj(args),
            }),
        )
    };
    let err = call("add", json!({"a": "1", "bb": 2}))
        .await
        .expect_err("invalid");
    assert_eq!(err.kind.as_str(), "invalid_arguments");
    assert_eq!(
        err.message,
        "mcp_my_stub.add(a: float, b: float) -> str:\n  missing required argument 'b'\n  \
         argument 'a' must be number, got string \"1\"\n  unknown argument 'bb' (did you mean 'b'?)"
    );
    let err = call("ad", json!({})).await.expect_err("unknown tool");
    assert_eq!(err.kind.as_str(), "unknown_tool");
    assert!(
        err.message.contains("(did you mean 'add'?)"),
        "{}",
        err.message
    );
    assert_eq!(
        call("add", json!({"a": 1, "b": 2})).await.expect("valid"),
        json!({"sum": 3})
    );
    p.shutdown().await;
}

/// The error a failing call gives on one path, without the stderr tail (pids differ).
async fn failures_on(lane: bool) -> Vec<String> {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool_on(lane, vec![stub("stub", &[], &[])], d.path());
    let up = p.get("stub").expect("configured").clone();
    let mut seen = Vec::new();
    let cases = [
        ("crash", json!({}), 10_000),
        ("big", json!({ "bytes": 65 << 20 }), 60_000),
        ("slow", json!({"seconds": 60}), 300),
        ("nosuch", json!({}), 10_000),
    ];
    for (tool, args, ms) in cases {
        up.connect(soon(20)).await.expect("start");
        let deadline = Instant::now() + Duration::from_millis(ms);
        let err = up.call(tool, obj(args), deadline).await.expect_err(tool);
        seen.push(match err {
            UpstreamError::Crashed { reason, .. } => format!("crashed: {reason}"),
            UpstreamError::Timeout { server, tool, .. } => format!("timeout: {server}.{tool}"),
            other => other.to_string(),
        });
    }
    p.shutdown().await;
    seen
}

#[tokio::test]
async fn failures_read_the_same_on_the_lane_and_on_rmcps_path() {
    let (lane, rmcp) = (failures_on(true).await, failures_on(false).await);
    assert_eq!(lane, rmcp);
}

/// A run naming the same servers as the last one, for the same client, with no tool list
/// changed, gets the very same loaded tools (nothing is built per server); a changed tool list,
/// other servers or another client get a fresh answer that shows the change.
#[tokio::test]
async fn a_load_is_handed_back_while_nothing_changed() {
    use mcp_code_bridge::calls::{Caller, HostCalls, RunScope};
    use mcp_code_bridge::upstream::UpstreamHostCalls;

    let d = tempfile::tempdir().expect("tempdir");
    let count = d.path().join("extra-tools");
    std::fs::write(&count, "0").expect("write");
    let env = [("STUB_EXTRA_TOOLS_FILE", count.display().to_string())];
    let p = Arc::new(pool(
        vec![stub("a", &[], &env), stub("b", &[], &[])],
        d.path(),
    ));
    let host = UpstreamHostCalls::new(p.clone());
    let both = vec!["a".to_string(), "b".to_string()];
    let scope = RunScope::plain("test");
    let first = host.load(&both, &scope, soon(20)).await.expect("load");
    let again = host.load(&both, &scope, soon(20)).await.expect("load");
    assert!(
        Arc::ptr_eq(&first, &again),
        "the same servers, nothing changed"
    );
    assert!(!first["a"].get().contains("tool_0"));

    // Other servers, then the first ones again: each a fresh answer.
    let one = host.load(&both[..1], &scope, soon(20)).await.expect("load");
    assert_eq!(one.keys().collect::<Vec<_>>(), ["a"]);
    let back = host.load(&both, &scope, soon(20)).await.expect("load");
    assert!(!Arc::ptr_eq(&first, &back));
    let text = |l: &mcp_code_bridge::calls::LoadedTools| {
        l.iter()
            .map(|(k, v)| format!("{k}={}", v.get()))
            .collect::<Vec<_>>()
    };
    assert_eq!(text(&first), text(&back));

    // Another client.
    let other = RunScope::new("x", None, None).with_caller(Some(Arc::new(Caller {
        token: "t".into(),
        sandbox: "s2".into(),
        identity: None,
    })));
    let theirs = host.load(&both, &other, soon(20)).await.expect("load");
    assert!(!Arc::ptr_eq(&back, &theirs));

    // Server a comes back with another tool list: the next load shows it.
    let mine = host.load(&both, &scope, soon(20)).await.expect("load");
    std::fs::write(&count, "1").expect("write");
    let up = p.get("a").expect("configured").clone();
    up.call("crash", obj(json!({})), soon(10))
        .await
        .expect_err("crash");
    let changed = host.load(&both, &scope, soon(20)).await.expect("load");
    assert!(!Arc::ptr_eq(&mine, &changed));
    assert!(changed["a"].get().contains("tool_0"), "{}", changed["a"]);
    assert!(
        Arc::ptr_eq(&mine["b"], &changed["b"]),
        "b's entries are kept"
    );
    p.shutdown().await;
}
