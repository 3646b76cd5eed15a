//! The frame channel a sandbox gets: the socket by default, stdio when configured, and stdio
//! for good only when the engine refuses to mount the socket's directory.

use mcp_code_bridge::report::RunStatus;

use crate::support::{process_app, req};

const HAS_SOCKET: &str = "import os, stat\n# the entrypoint keeps its frame fds at 100 and above
print(any(stat.S_ISSOCK(os.fstat(int(f)).st_mode) for f in os.listdir('/proc/self/fd') if f.isdigit() and int(f) >= 100 and os.path.exists('/proc/self/fd/' + f)))";

#[tokio::test]
async fn frames_use_the_socket_channel_by_default_and_stdio_when_it_is_off() {
    let (app, _rt) = process_app(&[]);
    let r = app.sandbox.run(req(HAS_SOCKET, 10)).await;
    assert_eq!(r.stdout, "True\n", "{r:?}");
    app.shutdown().await;

    let (app, _rt) = process_app(&[("MCP_BRIDGE_CHANNEL", "stdio")]);
    let r = app.sandbox.run(req(HAS_SOCKET, 10)).await;
    assert_eq!(r.stdout, "False\n", "{r:?}");
    let code = "from mcp import runtime\nimport asyncio\nr = await asyncio.gather(*[runtime.ping(i) for i in range(200)])\nprint(sum(r), runtime.ping_sync('s'))";
    let r = app.sandbox.run(req(code, 20)).await;
    assert_eq!(r.stdout, "19900 s\n", "{r:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn sandbox_code_closing_the_channel_gets_a_fresh_sandbox() {
    let (app, _rt) = process_app(&[]);
    app.sandbox.run(req("kept = 1", 10)).await;
    let close = "import os, socket, stat\nfor f in os.listdir('/proc/self/fd'):\n    try:\n        if stat.S_ISSOCK(os.fstat(int(f)).st_mode):\n            socket.socket(fileno=os.dup(int(f))).shutdown(socket.SHUT_RDWR)\n    except OSError:\n        pass\nimport time\ntime.sleep(30)";
    let r = app.sandbox.run(req(close, 20)).await;
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    let r = app.sandbox.run(req("print('kept' in globals())", 10)).await;
    assert_eq!(r.stdout, "False\n", "{r:?}");
    assert!(r.notice.is_some(), "told that state was reset: {r:?}");
    app.shutdown().await;
}

#[tokio::test]
async fn an_ordinary_engine_error_keeps_the_socket_channel_for_the_next_sandbox() {
    let (app, rt) = process_app(&[("MCP_BRIDGE_PREWARM", "0")]);
    *rt.fail_create.lock().expect("lock") = Some("disk full".into());
    let r = app.sandbox.run(req("print(1)", 10)).await;
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    *rt.fail_create.lock().expect("lock") = None;
    let r = app.sandbox.run(req(HAS_SOCKET, 10)).await;
    assert_eq!(
        r.stdout, "True\n",
        "a failed create is no refused mount: {r:?}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_refused_mount_moves_frames_to_stdio_for_every_later_sandbox() {
    let (app, rt) = process_app(&[("MCP_BRIDGE_PREWARM", "0")]);
    rt.refuse_mount
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let r = app.sandbox.run(req(HAS_SOCKET, 10)).await;
    assert_eq!(r.stdout, "False\n", "started without the socket: {r:?}");
    // The engine would mount it now, but the bridge does not ask again: the next sandbox
    // (this one killed) is on stdio too.
    rt.refuse_mount
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let id = rt.live_ids().pop().expect("one sandbox");
    unsafe { libc::kill(rt.pid_of(&id).expect("pid") as i32, libc::SIGKILL) };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let r = app.sandbox.run(req(HAS_SOCKET, 10)).await;
    assert_eq!(r.stdout, "False\n", "{r:?}");
    assert!(r.notice.is_some(), "a fresh sandbox: {r:?}");
    app.shutdown().await;
}
