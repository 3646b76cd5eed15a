//! Data in: an engine that cannot mount the shared folders says so, naming the setting.

use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::Ordering;

use mcp_code_bridge::report::RunStatus;

use crate::support::{process_app, req};

#[tokio::test]
async fn an_engine_that_cannot_see_a_shared_folder_names_the_setting() {
    let data = tempfile::tempdir().expect("temp");
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mounts = format!("{}:/data", data.path().display());
    let (app, rt) = process_app(&[("MCP_BRIDGE_MOUNTS", &mounts)]);
    rt.refuse_host_mounts.store(true, Ordering::Relaxed);
    let r = app.sandbox.run(req("print(1)", 20)).await;
    assert_eq!(r.status, RunStatus::SandboxError, "{r:?}");
    let error = r.error.unwrap_or_default();
    assert!(
        error.contains("MCP_BRIDGE_MOUNTS cannot be used")
            && error.contains("could not mount")
            && error.contains("/data")
            && error.contains("shared with the VM"),
        "{error}"
    );
    rt.refuse_host_mounts.store(false, Ordering::Relaxed);
    let r = app.sandbox.run(req("print(1)", 20)).await;
    assert_eq!(
        r.stdout, "1\n",
        "the next sandbox starts once the engine can: {r:?}"
    );
    app.shutdown().await;
}
