//! Shared test helpers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use mcp_code_bridge::app::App;
use mcp_code_bridge::calls::NoHostCalls;
use mcp_code_bridge::config::Settings;
use mcp_code_bridge::container::process::ProcessRuntime;
use mcp_code_bridge::container::{Connection, ContainerRuntime};
use mcp_code_bridge::sandbox::{Connector, Progress, RunRequest};
use tokio_util::sync::CancellationToken;

pub mod rmcp_http;

/// Settings from defaults plus `pairs`.
pub fn settings(pairs: &[(&str, &str)]) -> Arc<Settings> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Arc::new(Settings::from_lookup(|k| map.get(k).cloned()).expect("valid test settings"))
}

/// A bridge whose "containers" are local processes running the real entrypoint.
pub fn process_app(pairs: &[(&str, &str)]) -> (App, Arc<ProcessRuntime>) {
    let rt = ProcessRuntime::new();
    let for_connector = rt.clone();
    let connector: Connector = Arc::new(move || {
        let runtime: Arc<dyn ContainerRuntime> = for_connector.clone();
        async move { Ok(Connection::from_runtime(runtime, "process")) }.boxed()
    });
    (
        App::new(settings(pairs), connector, Arc::new(NoHostCalls)),
        rt,
    )
}

/// A run request for `code` with `timeout_secs`.
pub fn req(code: &str, timeout_secs: u64) -> RunRequest {
    RunRequest {
        code: code.to_string(),
        servers: Vec::new().into(),
        timeout: Duration::from_secs(timeout_secs),
        arrived: tokio::time::Instant::now(),
        cancel: CancellationToken::new(),
        progress: Progress::none(),
        scope: mcp_code_bridge::calls::RunScope::plain(code),
    }
}

/// Serves the bridge's MCP face for `app` over an in-memory pipe; returns the client's end.
pub fn serve_in_memory(app: &App) -> tokio::io::DuplexStream {
    let handler = mcp_code_bridge::server::BridgeServer::new(
        app.sandbox.clone(),
        app.settings.clone(),
        app.outbox.clone(),
    );
    let (a, b) = tokio::io::duplex(1 << 20);
    let ct = app.ct.clone();
    let (read, write) = tokio::io::split(b);
    tokio::spawn(
        async move { mcp_code_bridge::server::serve_stream(handler, read, write, ct).await },
    );
    a
}

/// rmcp's client, connected in memory to a bridge on the process runtime with `pairs` as settings.
pub async fn mcp_client(
    pairs: &[(&str, &str)],
) -> (
    rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
    App,
) {
    use rmcp::ServiceExt;
    let (app, _rt) = process_app(pairs);
    let client = ().serve(serve_in_memory(&app)).await.expect("handshake");
    (client, app)
}

/// A pseudo-terminal: the master to type into, the slave as a child's stdin.
pub fn pty() -> (std::fs::File, std::os::fd::OwnedFd) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two new descriptors into the given ints; the null pointers ask for
    // no name and default terminal settings.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nothing else.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
        )
    }
}
