//! A sandbox's host requests are tasks of its session: one still waiting for the backend when
//! the bridge shuts down ends with the session, and shutdown waits for it (bridge's tracker).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::FutureExt;
use mcp_code_bridge::app::App;
use mcp_code_bridge::calls::{
    BackendCall, CallContext, CallError, HostCalls, LoadError, LoadedTools,
};
use mcp_code_bridge::container::process::ProcessRuntime;
use mcp_code_bridge::container::{Connection, ContainerRuntime};
use mcp_code_bridge::sandbox::Connector;
use serde_json::Value;
use tokio::time::Instant;

use crate::support::{req, settings};

/// A backend whose every call waits forever; it notes when one arrives and when one is dropped.
#[derive(Default)]
struct Hanging {
    arrived: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl HostCalls for Hanging {
    async fn load(
        &self,
        _servers: &[String],
        _scope: &mcp_code_bridge::calls::RunScope,
        _deadline: Instant,
    ) -> Result<LoadedTools, LoadError> {
        Ok(LoadedTools::default())
    }

    async fn call(&self, _ctx: &CallContext, _call: BackendCall) -> Result<Value, CallError> {
        let _dropped = SetOnDrop(self.dropped.clone());
        self.arrived.store(true, Ordering::SeqCst);
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_host_call_in_flight_ends_with_its_session_at_shutdown() {
    let rt = ProcessRuntime::new();
    let connector: Connector = Arc::new(move || {
        let runtime: Arc<dyn ContainerRuntime> = rt.clone();
        async move { Ok(Connection::from_runtime(runtime, "process")) }.boxed()
    });
    let backend = Arc::new(Hanging::default());
    let (arrived, dropped) = (backend.arrived.clone(), backend.dropped.clone());
    let app = App::new(settings(&[]), connector, backend);
    let run = app.sandbox.run(req(
        "from mcp import runtime\nawait runtime.list_servers()",
        2,
    ));
    let report = run.await;
    assert!(
        arrived.load(Ordering::SeqCst),
        "the call reached the backend: {report:?}"
    );
    assert!(!dropped.load(Ordering::SeqCst), "the call is still waiting");
    app.shutdown().await;
    assert!(
        dropped.load(Ordering::SeqCst),
        "the host call outlived its session and the bridge's shutdown"
    );
}
