//! The upstream pool against rmcp's own streamable HTTP server in this process: which path a
//! call takes (the HTTP lane, or rmcp's with `MCP_BRIDGE_CALL_LANE=0`), a server's question on
//! a call's event stream answered, and a call given up withdrawn downstream.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_code_bridge::config::{ServerSpec, Servers, Transport};
use mcp_code_bridge::upstream::client::UpstreamTasks;
use mcp_code_bridge::upstream::{UpstreamError, UpstreamPool};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use tokio::time::Instant;

/// The lane's first request id (2^40, `upstream/lane`); rmcp's ids count up from 0.
const LANE_IDS: u64 = 1 << 40;

/// A server whose tools say which request id they were called with, ask the client a
/// question, and wait to be cancelled.
#[derive(Clone, Default)]
struct Probe {
    cancelled: Arc<AtomicUsize>,
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(t.into())]).into())
}

impl ServerHandler for Probe {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(
            json!({"type": "object"})
                .as_object()
                .cloned()
                .expect("object"),
        );
        Ok(ListToolsResult::with_all_items(
            ["request_id", "ask", "wait"]
                .into_iter()
                .map(|n| Tool::new(n, "probe", schema.clone()))
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match &*request.name {
            "request_id" => text(json!(context.id).to_string()),
            "ask" => {
                let question: ElicitRequestParams = serde_json::from_value(json!({
                    "mode": "url", "message": "sign here", "url": "https://example.com/s",
                    "elicitationId": "e-1"}))
                .expect("a URL question");
                match context.peer.create_elicitation(question).await {
                    Ok(answer) => text(json!(answer.action).to_string()),
                    Err(e) => text(format!("no answer: {e}")),
                }
            }
            _ => {
                tokio::select! {
                    _ = context.ct.cancelled() => {
                        self.cancelled.fetch_add(1, Ordering::SeqCst);
                    }
                    _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                }
                text("waited")
            }
        }
    }
}

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// rmcp's streamable HTTP server for `probe` on a loopback port: its URL.
async fn serve(probe: Probe) -> String {
    serve_with(probe, Arc::default()).await
}

/// [`serve`] with `sessions` as its session manager.
async fn serve_with(probe: Probe, sessions: Arc<LocalSessionManager>) -> String {
    crate::support::rmcp_http::serve_rmcp(move || probe.clone(), sessions).await
}

fn pool(lane: bool, url: String, dir: &std::path::Path) -> UpstreamPool {
    let transport = Transport::Http {
        url,
        headers: Default::default(),
    };
    let spec = ServerSpec::new("probe", transport, std::path::Path::new("/test/http.json"));
    let servers = Servers {
        specs: vec![spec],
        ..Servers::default()
    };
    let tasks = UpstreamTasks {
        call_lane: lane,
        ..UpstreamTasks::detached()
    };
    UpstreamPool::with_tasks(Arc::new(servers), dir, tasks)
}

fn soon(secs: u64) -> Instant {
    Instant::now() + Duration::from_secs(secs)
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .expect("a text result")
}

async fn request_id_seen(lane: bool) -> u64 {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool(lane, serve(Probe::default()).await, d.path());
    let up = p.get("probe").expect("configured");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let r = up
            .call("request_id", Default::default(), soon(20))
            .await
            .expect("a call");
        ids.push(text_of(&r).parse::<u64>().expect("a number"));
    }
    p.shutdown().await;
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "fresh ids: {ids:?}");
    ids[0]
}

#[tokio::test]
async fn calls_take_the_http_lane_when_it_is_on_and_rmcps_path_when_it_is_off() {
    assert!(request_id_seen(true).await >= LANE_IDS, "the lane's ids");
    assert!(request_id_seen(false).await < LANE_IDS, "rmcp's ids");
}

#[tokio::test]
async fn a_question_on_a_lane_calls_stream_reaches_the_bridges_client_and_is_answered() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = pool(true, serve(Probe::default()).await, d.path());
    let up = p.get("probe").expect("configured");
    // No run is in flight to ask, so the bridge's client declines at once; without the lane
    // handing the question to rmcp, nobody would answer and the call would reach its deadline.
    let r = up
        .call("ask", Default::default(), soon(20))
        .await
        .expect("the call ends with the answer");
    assert_eq!(text_of(&r), "\"decline\"");
    let r = up
        .call("request_id", Default::default(), soon(20))
        .await
        .expect("a call");
    assert!(text_of(&r).parse::<u64>().expect("a number") >= LANE_IDS);
    p.shutdown().await;
}

#[tokio::test]
async fn a_lane_call_given_up_is_cancelled_downstream_and_the_server_stays_usable() {
    let d = tempfile::tempdir().expect("tempdir");
    let probe = Probe::default();
    let p = pool(true, serve(probe.clone()).await, d.path());
    let up = p.get("probe").expect("configured");
    up.call("request_id", Default::default(), soon(20))
        .await
        .expect("warm");
    let err = up
        .call(
            "wait",
            Default::default(),
            Instant::now() + Duration::from_millis(500),
        )
        .await
        .expect_err("the deadline");
    assert!(matches!(err, UpstreamError::Timeout { .. }), "{err}");
    let began = Instant::now();
    while probe.cancelled.load(Ordering::SeqCst) == 0 {
        assert!(
            began.elapsed() < Duration::from_secs(20),
            "never cancelled downstream"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = up
        .call("request_id", Default::default(), soon(20))
        .await
        .expect("still usable");
    assert!(text_of(&r).parse::<u64>().expect("a number") >= LANE_IDS);
    p.shutdown().await;
}

#[tokio::test]
async fn a_session_the_server_forgot_is_made_again_and_the_call_goes_through() {
    let d = tempfile::tempdir().expect("tempdir");
    let sessions = Arc::new(LocalSessionManager::default());
    let p = pool(
        true,
        serve_with(Probe::default(), sessions.clone()).await,
        d.path(),
    );
    let up = p.get("probe").expect("configured");
    up.call("request_id", Default::default(), soon(20))
        .await
        .expect("warm");
    // The server forgets every session (as after its restart): the lane's POST gets a 404,
    // which the server answers before reading the call, so rmcp's path makes a new session
    // and the call.
    sessions.sessions.write().await.clear();
    let r = up
        .call("request_id", Default::default(), soon(20))
        .await
        .expect("a call on a new session");
    assert!(
        text_of(&r).parse::<u64>().expect("a number") < LANE_IDS,
        "rmcp's path"
    );
    assert_eq!(sessions.sessions.read().await.len(), 1, "a new session");
    let r = up
        .call("request_id", Default::default(), soon(20))
        .await
        .expect("the lane again");
    assert!(
        text_of(&r).parse::<u64>().expect("a number") >= LANE_IDS,
        "the lane again"
    );
    p.shutdown().await;
}
