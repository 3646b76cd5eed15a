//! Shutting the upstream layer down: bounded while a server hangs in its start, and flat with
//! many servers (all closed at once, none waited for in turn).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcp_code_bridge::app::{App, SHUTDOWN_TIMEOUT_SECS};
use mcp_code_bridge::config::Servers;
use mcp_code_bridge::upstream::UpstreamPool;
use tokio::time::Instant;

use crate::support::settings;
use crate::upstream::stub;

/// The pids recorded in a stub's `started <pid>` file.
fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect()
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_bridge_shuts_down_within_its_bound_while_a_server_hangs_in_its_start() {
    let d = tempfile::tempdir().expect("tempdir");
    let started = d.path().join("started.txt");
    let servers = serde_json::json!({"mcpServers": {"hang": {
        "command": env!("CARGO_BIN_EXE_stub-mcp"),
        "args": ["--hang-initialize"],
        "env": {"STUB_START_FILE": started.display().to_string()},
    }}});
    std::fs::write(d.path().join("servers.json"), servers.to_string()).expect("config");
    let dir = d.path().display().to_string();
    let state = d.path().join("state").display().to_string();
    let app = App::with_engine(settings(&[
        ("MCP_BRIDGE_CONFIG_DIR", &dir),
        ("MCP_BRIDGE_STATE_DIR", &state),
    ]));
    let pool = app.pool.clone().expect("a pool");
    let far = Instant::now() + Duration::from_secs(120);
    let load = tokio::spawn(async move { pool.load(&["hang".into()], far).await });
    until("the server to start", || !pids(&started).is_empty()).await;
    let pid = pids(&started)[0];
    assert!(alive(pid));
    tokio::time::timeout(Duration::from_secs(SHUTDOWN_TIMEOUT_SECS), app.shutdown())
        .await
        .expect("shutdown ends within its bound while a start hangs");
    let err = load
        .await
        .expect("joined")
        .expect_err("the start was abandoned");
    assert!(err.to_string().contains("shutting down"), "{err}");
    until("the hanging server to be killed", || !alive(pid)).await;
}

#[tokio::test]
async fn fifty_servers_are_closed_at_once_and_all_are_gone_when_shutdown_returns() {
    let d = tempfile::tempdir().expect("tempdir");
    let started = d.path().join("started.txt");
    let env = [("STUB_START_FILE", started.display().to_string())];
    // Each server stays alive after its stdin closes: only the kill after the grace ends it.
    let mut specs: Vec<_> = (0..50)
        .map(|i| stub(&format!("s{i:02}"), &["--linger"], &env))
        .collect();
    specs.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let pool = Arc::new(UpstreamPool::new(
        Arc::new(Servers {
            specs,
            ..Servers::default()
        }),
        d.path(),
    ));
    let far = Instant::now() + Duration::from_secs(120);
    pool.load(&names, far).await.expect("all 50 load");
    let pids = pids(&started);
    assert_eq!(pids.len(), 50);
    assert!(pids.iter().all(|p| alive(*p)));
    let stdins: Vec<String> = pids.iter().map(|p| stdin_pipe(*p)).collect();
    assert_eq!(
        held_by_us(&stdins),
        50,
        "the bridge holds every server's stdin"
    );

    let shutdown = tokio::spawn({
        let pool = pool.clone();
        async move { pool.shutdown().await }
    });
    // Closed at once: by the time the first server is killed, the bridge has closed every
    // server's stdin. Closing them in turn (close, wait, kill, next) kills the first while it
    // still holds the others' stdin.
    until("a server to be killed", || pids.iter().any(|p| !alive(*p))).await;
    let open = held_by_us(&stdins);
    assert_eq!(
        open, 0,
        "{open} servers were not told before the first was killed"
    );
    shutdown.await.expect("shutdown");
    let left: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
    assert!(left.is_empty(), "still running after shutdown: {left:?}");
}

/// The pipe a process reads as its stdin (`pipe:[inode]`).
fn stdin_pipe(pid: i32) -> String {
    let link = std::fs::read_link(format!("/proc/{pid}/fd/0")).expect("stdin of a server");
    link.display().to_string()
}

/// How many of `pipes` this process (the bridge) still has open: stdins not yet closed.
fn held_by_us(pipes: &[String]) -> usize {
    let ours: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .expect("our fds")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.display().to_string())
        .collect();
    pipes.iter().filter(|p| ours.contains(*p)).count()
}
