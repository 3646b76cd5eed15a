//! Servers shared by many clients (`serve --http`), against the real stub MCP server: a
//! `"perClient"` server is one process per client, the others one for all; replies never cross
//! between clients; a released client leaves no process behind; past the cap nothing starts.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mcp_code_bridge::calls::{BackendCall, CallContext, Caller, HostCalls, RunScope, ToolCall};
use mcp_code_bridge::config::Servers;
use mcp_code_bridge::upstream::client::UpstreamTasks;
use mcp_code_bridge::upstream::{UpstreamHostCalls, UpstreamPool};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::upstream::stub;

/// A pool of `own` (`"perClient": true`) and `shared`, on the lane or rmcp's request path.
fn pool(lane: bool, max_clients: usize, dir: &std::path::Path) -> Arc<UpstreamPool> {
    let mut own = stub("own", &[], &[]);
    own.per_client = true;
    let servers = Servers {
        specs: vec![own, stub("shared", &[], &[])],
        ..Servers::default()
    };
    let tasks = UpstreamTasks {
        call_lane: lane,
        ..UpstreamTasks::detached()
    };
    Arc::new(UpstreamPool::with_tasks(Arc::new(servers), dir, tasks).with_max_clients(max_clients))
}

/// A run of client `sandbox` (token `token`); no client at all for `None` (stdio `run`).
fn scope(client: Option<(&str, &str)>) -> Arc<RunScope> {
    let caller = client.map(|(token, sandbox)| {
        Arc::new(Caller {
            token: token.into(),
            sandbox: sandbox.into(),
            identity: None,
        })
    });
    Arc::new(RunScope::new("code", None, None).with_caller(caller))
}

fn ctx(run: &Arc<RunScope>) -> CallContext {
    CallContext {
        servers: Arc::from(vec!["own".to_string(), "shared".to_string()]),
        deadline: Instant::now() + Duration::from_secs(60),
        run: run.clone(),
    }
}

fn call(server: &str, tool: &str, arguments: Value) -> BackendCall {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    BackendCall::CallTool(ToolCall {
        server: server.into(),
        tool: tool.into(),
        arguments,
    })
}

/// The pid of the process of `server` the run of `run` reaches.
async fn pid(host: &UpstreamHostCalls, run: &Arc<RunScope>, server: &str) -> i64 {
    let who = host
        .call(&ctx(run), call(server, "whoami", json!({})))
        .await
        .expect("whoami");
    who["pid"].as_i64().expect("a pid")
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test]
async fn two_clients_get_two_processes_of_a_per_client_server_and_one_of_the_others() {
    let d = tempfile::tempdir().expect("tempdir");
    let pool = pool(true, 16, d.path());
    let host = UpstreamHostCalls::new(pool.clone());
    let (a, b) = (scope(Some(("alice", "sb-a"))), scope(Some(("bob", "sb-b"))));
    let none = scope(None);
    let names = ["own".to_string(), "shared".to_string()];
    let far = Instant::now() + Duration::from_secs(60);
    for run in [&a, &b, &none] {
        let loaded = host.load(&names, run, far).await.expect("load");
        assert_eq!(loaded.len(), 2);
    }
    assert_eq!(pool.per_client_count(), 2, "one own process per client");
    let (own_a, own_b, own_none) = (
        pid(&host, &a, "own").await,
        pid(&host, &b, "own").await,
        pid(&host, &none, "own").await,
    );
    let distinct: HashSet<i64> = [own_a, own_b, own_none].into();
    assert_eq!(
        distinct.len(),
        3,
        "a, b and the caller-less run each have their own"
    );
    // The same client reaches the same process again, through any helper.
    assert_eq!(pid(&host, &a, "own").await, own_a);
    let shared: HashSet<i64> = [
        pid(&host, &a, "shared").await,
        pid(&host, &b, "shared").await,
        pid(&host, &none, "shared").await,
    ]
    .into();
    assert_eq!(shared.len(), 1, "one process of a shared server for all");
    let shared = *shared.iter().next().expect("one");
    // One definition, one tool list: listing from a client needs no start of its own.
    let listed = host
        .call(
            &ctx(&scope(Some(("carol", "sb-c")))),
            BackendCall::ListTools {
                server: "own".into(),
            },
        )
        .await
        .expect("list_tools");
    assert!(listed.as_array().is_some_and(|t| !t.is_empty()));
    assert_eq!(
        pool.per_client_count(),
        2,
        "listing from the cache made nothing"
    );

    pool.release_caller("sb-a").await;
    assert!(!alive(own_a), "a's own process is gone once it is released");
    assert!(alive(own_b) && alive(own_none) && alive(shared));
    assert_eq!(pool.per_client_count(), 1);
    pool.release_caller("sb-a").await; // twice: nothing left to do
    pool.shutdown().await;
    let left: Vec<i64> = [own_b, own_none, shared]
        .into_iter()
        .filter(|p| alive(*p))
        .collect();
    assert!(left.is_empty(), "still running after shutdown: {left:?}");
    assert_eq!(pool.per_client_count(), 0);
}

#[tokio::test]
async fn a_flood_of_interleaved_calls_from_two_clients_to_one_server_each_reply_to_its_own() {
    for lane in [true, false] {
        let d = tempfile::tempdir().expect("tempdir");
        let pool = pool(lane, 16, d.path());
        let host = UpstreamHostCalls::new(pool.clone());
        let clients = [scope(Some(("alice", "sb-a"))), scope(Some(("bob", "sb-b")))];
        let per_client = 300;
        let calls = (0..per_client).flat_map(|i| {
            clients.iter().map(move |run| {
                let who = run.caller.as_ref().expect("a caller").token.clone();
                (run.clone(), format!("{who}:{i}"))
            })
        });
        let replies = futures::future::join_all(calls.map(|(run, payload)| {
            let host = &host;
            async move {
                let text = json!({ "text": payload });
                let got = host.call(&ctx(&run), call("shared", "echo", text)).await;
                (run, payload, got)
            }
        }))
        .await;
        assert_eq!(replies.len(), 2 * per_client);
        for (run, payload, got) in replies {
            let got = got.expect("echo");
            assert_eq!(got["text"], json!(payload), "lane {lane}");
            let who = &run.caller.as_ref().expect("a caller").token;
            assert!(payload.starts_with(&format!("{who}:")));
        }
        assert_eq!(pool.get("shared").expect("shared").starts(), 1);
        pool.shutdown().await;
    }
}

#[tokio::test]
async fn past_the_cap_a_new_client_gets_a_limit_error_and_nothing_starts() {
    let d = tempfile::tempdir().expect("tempdir");
    // One client at most, one per-client server: one own process at most.
    let pool = pool(true, 1, d.path());
    let host = UpstreamHostCalls::new(pool.clone());
    let (a, b) = (scope(Some(("alice", "sb-a"))), scope(Some(("bob", "sb-b"))));
    let own_a = pid(&host, &a, "own").await;
    let err = host
        .call(&ctx(&b), call("own", "whoami", json!({})))
        .await
        .expect_err("no room for b");
    assert_eq!(err.kind.as_str(), "limit_exceeded");
    assert!(
        err.message
            .contains("MCP server 'own' runs one process per client")
            && err.message.contains("MCP_BRIDGE_MAX_SANDBOXES"),
        "{}",
        err.message
    );
    let far = Instant::now() + Duration::from_secs(60);
    let load = host.load(&["own".to_string()], &b, far).await;
    assert!(load.is_err_and(|e| e.to_string().contains("runs one process per client")));
    // A shared server still serves b; a's own process is untouched.
    pid(&host, &b, "shared").await;
    assert_eq!(pool.per_client_count(), 1);
    assert_eq!(pid(&host, &a, "own").await, own_a);
    pool.release_caller("sb-a").await;
    let own_b = pid(&host, &b, "own").await;
    assert_ne!(own_b, own_a);
    pool.shutdown().await;
    assert!(!alive(own_a) && !alive(own_b));
}
