//! The MCP face over in-memory pipes, with rmcp's client.

use mcp_code_bridge::server::CAPABILITIES_URI;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, NumberOrString,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, RequestMetaObject,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::json;

use crate::support::{mcp_client, process_app, serve_in_memory};

async fn client() -> (RunningService<RoleClient, ()>, mcp_code_bridge::app::App) {
    mcp_client(&[]).await
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    args: serde_json::Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let serde_json::Value::Object(args) = args else {
        panic!("object")
    };
    match client
        .call_tool_once(CallToolRequestParams::new("run_python").with_arguments(args))
        .await?
    {
        CallToolResponse::Complete(r) => Ok(r),
        other => panic!("unexpected response {other:?}"),
    }
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[tokio::test]
async fn lists_exactly_one_small_tool_and_runs_code() {
    let (client, app) = client().await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "run_python");
    let bytes = serde_json::to_string(&tools).expect("json").len();
    assert!(bytes < 1000, "tools/list is {bytes} bytes");

    let r = call(&client, json!({"code": "print(6*7)"}))
        .await
        .expect("call");
    assert_eq!(r.is_error, Some(false));
    assert_eq!(text(&r), "42\n");
    // Text only by default: Claude Code would show the model structuredContent's JSON instead.
    assert_eq!(r.structured_content, None);

    let r = call(
        &client,
        json!({"code": "import sys\nprint('e', file=sys.stderr)\nraise ValueError('boom')"}),
    )
    .await
    .expect("call");
    assert_eq!(r.is_error, Some(true));
    let t = text(&r);
    assert!(
        t.contains("--- stderr ---\ne") && t.contains("ValueError: boom"),
        "{t}"
    );
    client.cancel().await.expect("close");
    app.shutdown().await;
}

#[tokio::test]
async fn structured_content_is_added_when_asked_for() {
    let (client, app) = mcp_client(&[("MCP_BRIDGE_STRUCTURED_CONTENT", "1")]).await;
    let r = call(&client, json!({"code": "print(6*7)"}))
        .await
        .expect("call");
    assert_eq!(text(&r), "42\n");
    let sc = r.structured_content.expect("structured content");
    assert_eq!(
        sc,
        json!({"status": "ok", "stdout": "42\n"}),
        "empty fields dropped"
    );
    client.cancel().await.expect("close");
    app.shutdown().await;
}

#[tokio::test]
async fn malformed_arguments_are_tool_errors_and_unknown_tools_protocol_errors() {
    let (client, app) = client().await;
    for (args, needle) in [
        (json!({}), "'code'"),
        (json!({"code": 5}), "'code'"),
        (json!({"code": "x", "timeout": -1}), "'timeout'"),
    ] {
        // SEP-1303: the model sees the message in a tool result with isError.
        let r = call(&client, args).await.expect("a tool result");
        assert_eq!(r.is_error, Some(true));
        let t = text(&r);
        assert!(
            t.contains("invalid run_python arguments") && t.contains(needle),
            "{t}"
        );
    }
    let err = client
        .call_tool_once(CallToolRequestParams::new("rm_rf"))
        .await
        .expect_err("unknown tool");
    assert!(err.to_string().contains("rm_rf"), "{err}");
    // Still serving after bad requests.
    let r = call(&client, json!({"code": "print('ok')"}))
        .await
        .expect("call");
    assert_eq!(text(&r), "ok\n");
    client.cancel().await.expect("close");
    app.shutdown().await;
}

#[tokio::test]
async fn capabilities_resource_is_listed_and_readable() {
    let (client, app) = client().await;
    let list = client.list_all_resources().await.expect("resources/list");
    assert!(list.iter().any(|r| r.uri == CAPABILITIES_URI));
    let read = client
        .read_resource(ReadResourceRequestParams::new(CAPABILITIES_URI))
        .await
        .expect("read");
    let body = serde_json::to_string(&read).expect("json");
    assert!(body.contains("search_tool_docs"), "{body}");
    client.cancel().await.expect("close");
    app.shutdown().await;
}

#[tokio::test]
async fn mcp_cancellation_interrupts_the_running_code_and_keeps_state() {
    use rmcp::model::{CallToolRequest, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    let (client, app) = client().await;
    // The sandbox is a local process here: the code marks a file once it runs, so the cancel
    // surely hits running code (one sent earlier stops the exec before it runs at all).
    let dir = tempfile::tempdir().expect("tempdir");
    let mark = dir.path().join("running");
    let code = format!(
        "kept = 'yes'\nopen({:?}, 'w').close()\nimport time\ntime.sleep(60)",
        mark.display().to_string()
    );
    let serde_json::Value::Object(args) = json!({"code": code, "timeout": 90}) else {
        panic!("object")
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("run_python").with_arguments(args),
    ));
    let started = std::time::Instant::now();
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("sent");
    while !mark.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the code never ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    handle
        .cancel(Some("the user changed their mind".into()))
        .await
        .expect("notifications/cancelled sent");
    // The sleeping code was interrupted (not waited for, not killed): state is still there.
    let r = call(&client, json!({"code": "print(kept)"}))
        .await
        .expect("call");
    assert_eq!(text(&r), "yes\n", "{r:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the cancelled call stopped running: {:?}",
        started.elapsed()
    );
    client.cancel().await.expect("close");
    app.shutdown().await;
}

/// A client that records the progress notifications it receives.
#[derive(Clone, Default)]
struct ProgressRecorder(std::sync::Arc<std::sync::Mutex<Vec<ProgressNotificationParam>>>);

impl rmcp::ClientHandler for ProgressRecorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.0.lock().expect("lock").push(params);
    }
}

#[tokio::test]
async fn a_call_with_a_progress_token_hears_that_the_sandbox_starts_and_nothing_after_the_result() {
    let (app, _rt) = process_app(&[]);
    let a = serve_in_memory(&app);
    let recorder = ProgressRecorder::default();
    let client = recorder.clone().serve(a).await.expect("handshake");

    let args = json!({"code": "print(1)"}).as_object().cloned();
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = args.clone();
    // rmcp's client puts its own token in (the request id); what it sent does not matter here.
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::String("tok-1".into()),
    )));
    let r = client.call_tool_once(params).await.expect("call");
    assert!(matches!(r, CallToolResponse::Complete(_)), "{r:?}");
    let heard = recorder.0.lock().expect("lock").clone();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0].message.as_deref(), Some("starting the sandbox"));

    // Warm, and without a token: nothing more is sent, before or after the result.
    let mut params = CallToolRequestParams::new("run_python");
    params.arguments = args;
    client.call_tool_once(params).await.expect("call");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(recorder.0.lock().expect("lock").len(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn a_client_that_leaves_before_initialize_is_a_handshake_error() {
    let (app, _rt) = process_app(&[]);
    let handler = mcp_code_bridge::server::BridgeServer::new(
        app.sandbox.clone(),
        app.settings.clone(),
        app.outbox.clone(),
    );
    let (client, ours) = tokio::io::duplex(1 << 10);
    drop(client);
    let (read, write) = tokio::io::split(ours);
    let err = mcp_code_bridge::server::serve_stream(handler, read, write, app.ct.clone())
        .await
        .expect_err("no handshake");
    assert!(
        matches!(err, mcp_code_bridge::server::HandshakeError::Handshake(_)),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "MCP handshake failed");
    app.shutdown().await;
}
