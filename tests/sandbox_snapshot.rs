//! The user's namespace across sandboxes, against the real entrypoint (ProcessRuntime): saved
//! when an idle sandbox stops, restored into the next one with a notice naming what came back,
//! bounded and refused when the sandbox misbehaves, dropped by `runtime.reset()` and at exit.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_code_bridge::report::{RunReport, RunStatus};

use crate::support::{process_app, req};

/// Settings for a bridge that stops its sandbox after 1 s idle and keeps state in `dir`.
fn idle_bridge(dir: &Path, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs = vec![
        (
            "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT".to_string(),
            "1".to_string(),
        ),
        (
            "MCP_BRIDGE_STATE_DIR".to_string(),
            dir.display().to_string(),
        ),
    ];
    pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    pairs
}

fn pairs(owned: &[(String, String)]) -> Vec<(&str, &str)> {
    owned
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The snapshot files in `state`.
fn snapshots(state: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(state.join("snapshots"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn notice(r: &RunReport) -> &str {
    r.notice.as_deref().unwrap_or("")
}

/// Waits until the idle sandbox has been stopped (1 s idle, then the save).
async fn until_stopped(rt: &mcp_code_bridge::container::process::ProcessRuntime) {
    for _ in 0..100 {
        if rt.live_ids().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the idle sandbox was not stopped");
}

const DEFINE: &str = "import json as j\nimport threading\nrows = [{'a': i} for i in range(1000)]\n\
scale = 3\ndef times(x):\n    return x * scale\nclass Point:\n    def __init__(self, x):\n        self.x = x\n\
p = Point(4)\ngen = (i for i in range(3))\nlock = threading.Lock()";

#[tokio::test]
async fn an_idle_sandbox_is_saved_and_its_names_come_back_in_the_next_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let owned = idle_bridge(dir.path(), &[]);
    let (app, rt) = process_app(&pairs(&owned));
    let r = app.sandbox.run(req(DEFINE, 10)).await;
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    until_stopped(&rt).await;
    let files = snapshots(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let mode = std::fs::metadata(&files[0])
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let r = app
        .sandbox
        .run(req(
            "scale = 10\nprint(len(rows), times(2), j.dumps(p.x), isinstance(p, Point), 'gen' in globals())",
            10,
        ))
        .await;
    assert_eq!(r.stdout, "1000 20 4 True False\n", "{r:?}");
    let n = notice(&r);
    assert!(n.contains("stopped after 1 s idle"), "{n}");
    assert!(
        n.contains("Restored from the snapshot saved when the sandbox stopped"),
        "{n}"
    );
    assert!(
        n.contains("j, threading, rows, scale, times, Point, p."),
        "{n}"
    );
    assert!(n.contains("gen (cannot be pickled: TypeError"), "{n}");
    assert!(n.contains("lock (cannot be pickled"), "{n}");
    assert!(!n.contains("are gone"), "{n}");
    // Told once: the next result has no notice.
    let r = app.sandbox.run(req("print(scale)", 10)).await;
    assert_eq!((r.stdout.as_str(), r.notice.as_deref()), ("10\n", None));
    app.shutdown().await;
    assert!(snapshots(dir.path()).is_empty(), "removed at exit");
}

#[tokio::test]
async fn a_sandbox_that_dies_after_a_restore_gets_the_snapshot_again_marked_as_old() {
    let dir = tempfile::tempdir().expect("tempdir");
    let owned = idle_bridge(dir.path(), &[]);
    let (app, rt) = process_app(&pairs(&owned));
    app.sandbox.run(req("kept = 'then'", 10)).await;
    until_stopped(&rt).await;
    let r = app
        .sandbox
        .run(req("kept = 'now'\nprint('restored')", 10))
        .await;
    assert!(notice(&r).contains("kept"), "{r:?}");
    let r = app.sandbox.run(req("import os\nos._exit(9)", 10)).await;
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    let r = app.sandbox.run(req("print(kept)", 10)).await;
    assert_eq!(r.stdout, "then\n", "{r:?}");
    let n = notice(&r);
    assert!(n.contains("restarted after it died"), "{n}");
    assert!(
        n.contains("values are from then; later changes are lost"),
        "{n}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn reset_clears_the_namespace_and_drops_the_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let owned = idle_bridge(dir.path(), &[]);
    let (app, rt) = process_app(&pairs(&owned));
    app.sandbox.run(req("a = 1\nb = 2", 10)).await;
    until_stopped(&rt).await;
    let r = app
        .sandbox
        .run(req(
            "from mcp import runtime\nprint(sorted(runtime.reset()), 'a' in globals())",
            10,
        ))
        .await;
    assert_eq!(r.stdout, "['a', 'b', 'runtime'] False\n", "{r:?}");
    assert!(snapshots(dir.path()).is_empty(), "the snapshot is dropped");
    let id = rt.live_ids().pop().expect("one sandbox");
    unsafe { libc::kill(rt.pid_of(&id).expect("pid") as i32, libc::SIGKILL) };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = app.sandbox.run(req("print('a' in globals())", 10)).await;
    assert_eq!(r.stdout, "False\n", "{r:?}");
    assert!(notice(&r).contains("are gone"), "{r:?}");
    app.shutdown().await;
}

/// Hostile sandbox code replaces the entrypoint's answer to `save` with `body` (Python using
/// `frame`, `send` (a frame), `chunk` (base64 bytes as a `snapshot` frame) and `b64`).
fn hostile_save(body: &str) -> String {
    format!(
        "import sys, base64\nP = sys.modules['_mcp_bridge.protocol']\nb64 = base64.b64encode\n\
def evil(frame, ns, writer, *_):\n    send = writer.send\n    chunk = lambda d: writer.send_line(P.snapshot_line(frame['id'], d))\n{}\n\
sys.modules['_mcp_bridge.keeper'].serve_save = evil\nx = 1",
        body.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

#[tokio::test]
async fn a_hostile_snapshot_is_refused_and_the_bridge_keeps_serving() {
    let cases = [
        // Five times 512 KiB against a 1 MiB limit: refused while it arrives.
        (
            "for _ in range(5):\n    chunk(b64(b'x' * 524288))\nsend(P.saved_frame(frame['id'], 5 * 524288, 1))",
            "more than the snapshot limit",
        ),
        (
            "chunk(b'!!not base64!!')\nsend(P.saved_frame(frame['id'], 3, 1))",
            "not base64",
        ),
        (
            "chunk(b64(b'abc'))\nsend(P.saved_frame(frame['id'], 999, 1))",
            "said it sent 999 bytes",
        ),
        ("import time\ntime.sleep(60)", "MCP_BRIDGE_SNAPSHOT_TIMEOUT"),
    ];
    for (body, why) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let owned = idle_bridge(
            dir.path(),
            &[
                ("MCP_BRIDGE_SNAPSHOT_MAX", "1m"),
                ("MCP_BRIDGE_SNAPSHOT_TIMEOUT", "2"),
            ],
        );
        let (app, rt) = process_app(&pairs(&owned));
        let r = app.sandbox.run(req(&hostile_save(body), 10)).await;
        assert_eq!(r.status, RunStatus::Ok, "{r:?}");
        until_stopped(&rt).await;
        assert!(snapshots(dir.path()).is_empty(), "{why}: nothing kept");
        let r = app.sandbox.run(req("print('x' in globals())", 10)).await;
        assert_eq!(r.stdout, "False\n", "{why}: {r:?}");
        let n = notice(&r);
        assert!(
            n.contains("could not be saved") && n.contains(why),
            "{why}: {n}"
        );
        assert!(n.contains("are gone"), "{n}");
        app.shutdown().await;
    }
}

#[tokio::test]
async fn a_snapshot_that_kills_the_sandbox_when_restored_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let owned = idle_bridge(dir.path(), &[]);
    let (app, rt) = process_app(&pairs(&owned));
    let code = "import os\nclass Boom:\n    def __reduce__(self):\n        return (os._exit, (3,))\nboom = Boom()\nfine = 1";
    assert_eq!(app.sandbox.run(req(code, 10)).await.status, RunStatus::Ok);
    until_stopped(&rt).await;
    let r = app.sandbox.run(req("print('fine' in globals())", 10)).await;
    assert_eq!(
        (r.status, r.stdout.as_str()),
        (RunStatus::Ok, "False\n"),
        "{r:?}"
    );
    let n = notice(&r);
    assert!(
        n.contains("could not be restored (the sandbox ended"),
        "{n}"
    );
    assert!(snapshots(dir.path()).is_empty());
    app.shutdown().await;
}
