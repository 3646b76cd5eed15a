//! The transport against scripted servers on a loopback port: what it sends, what it accepts,
//! and how it ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::JsonRpcMessage;
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::transport::{DynamicTransportError, Transport};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use super::*;

const STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n";

/// Reads one request's head (and a body of its content-length); returns them as text.
async fn read_request(conn: &mut TcpStream) -> String {
    crate::test_support::read_http_request(conn).await.0
}

/// A server that answers the GET with `STREAM_HEAD` then `first`, answers every POST with
/// 202 (recording each request), and writes `then` on the stream after the first POST.
struct Scripted {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

async fn scripted(first: &'static [u8], then: Vec<u8>) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/sse", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let get = read_request(&mut stream).await;
        kept.lock().expect("lock").push(get);
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("head");
        stream.write_all(first).await.expect("first");
        let (mut post, _) = listener.accept().await.expect("accept a POST");
        let posted = read_request(&mut post).await;
        kept.lock().expect("lock").push(posted);
        let accepted = "HTTP/1.1 202 Accepted\r\ncontent-length: 8\r\n\r\nAccepted";
        post.write_all(accepted.as_bytes()).await.expect("202");
        let _ = stream.write_all(&then).await;
        drop(stream); // the stream ends
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(post);
    });
    Scripted { url, seen }
}

async fn connect(
    url: &str,
    max: usize,
    wait: Duration,
) -> (Result<SseTransport, SseError>, EndReason) {
    let entry = std::collections::BTreeMap::from([("X-Key".to_string(), "v-1".to_string())]);
    let headers = RemoteHeaders::from_entry(&entry).expect("headers");
    let ended = EndReason::default();
    let t = SseTransport::connect_within(url, headers, "s", ended.clone(), max, wait).await;
    (t, ended)
}

fn ping() -> TxJsonRpcMessage<RoleClient> {
    serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .expect("a request")
}

#[tokio::test]
async fn headers_reach_the_get_and_the_post_and_message_events_are_read() {
    let reply = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n";
    let s = scripted(
        b": hello\n\nevent: endpoint\ndata: /messages/?session_id=7\n\n",
        reply.to_vec(),
    )
    .await;
    let (t, ended) = connect(&s.url, 1 << 20, Duration::from_secs(10)).await;
    let mut t = t.expect("connected");
    t.send(ping()).await.expect("posted");
    let got = t.receive().await.expect("the reply");
    assert!(matches!(got, JsonRpcMessage::Response(_)), "{got:?}");
    assert!(t.receive().await.is_none(), "the stream ended");
    let why = ended.lock().expect("lock").clone().expect("a reason");
    assert_eq!(why, "the server closed its event stream");
    let seen = s.seen.lock().expect("lock").clone();
    assert!(seen[0].starts_with("GET /sse HTTP/1.1\r\n"), "{}", seen[0]);
    assert!(
        seen[0]
            .to_ascii_lowercase()
            .contains("accept: text/event-stream"),
        "{}",
        seen[0]
    );
    assert!(
        seen[1].starts_with("POST /messages/?session_id=7 HTTP/1.1\r\n"),
        "{}",
        seen[1]
    );
    assert!(seen[1].contains(r#""method":"ping""#), "{}", seen[1]);
    for request in &seen {
        assert!(
            request.to_ascii_lowercase().contains("x-key: v-1"),
            "{request}"
        );
    }
    assert!(t.send(ping()).await.is_err(), "closed");
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused_before_anything_is_posted() {
    let s = scripted(
        b"event: endpoint\ndata: http://evil.example/messages\n\n",
        vec![],
    )
    .await;
    let (t, _) = connect(&s.url, 1 << 20, Duration::from_secs(10)).await;
    let err = t.expect_err("refused");
    assert!(
        matches!(&err, SseError::Endpoint(EndpointError::OtherOrigin(o)) if o == "http://evil.example"),
        "{err:?}"
    );
    assert_eq!(s.seen.lock().expect("lock").len(), 1, "only the GET");
}

#[tokio::test]
async fn a_first_event_that_is_not_the_endpoint_is_refused() {
    let s = scripted(b"event: message\ndata: {}\n\n", vec![]).await;
    let (t, _) = connect(&s.url, 1 << 20, Duration::from_secs(10)).await;
    assert!(matches!(t, Err(SseError::FirstEvent(k)) if k == "message"));
}

#[tokio::test]
async fn no_endpoint_event_is_bounded_in_time() {
    let s = scripted(b": just a comment\n\n", vec![]).await;
    let began = std::time::Instant::now();
    let (t, _) = connect(&s.url, 1 << 20, Duration::from_millis(300)).await;
    assert!(matches!(t, Err(SseError::NoEndpoint(_))), "{t:?}");
    assert!(began.elapsed() < Duration::from_secs(5));
    let err = SseError::NoEndpoint(ENDPOINT_WAIT);
    assert_eq!(
        err.to_string(),
        "no endpoint event within 10s of connecting"
    );
}

#[tokio::test]
async fn an_endless_line_ends_the_connection_naming_the_setting() {
    let mut endless = b"data: ".to_vec();
    endless.extend(std::iter::repeat_n(b'x', 200 << 10)); // no newline, ever
    let s = scripted(b"event: endpoint\ndata: /m\n\n", endless).await;
    let (t, ended) = connect(&s.url, 1 << 10, Duration::from_secs(10)).await;
    let mut t = t.expect("connected");
    t.send(ping()).await.expect("posted");
    assert!(t.receive().await.is_none(), "ended");
    let why = ended.lock().expect("lock").clone().expect("a reason");
    assert!(why.contains("MCP_BRIDGE_MAX_SERVER_MESSAGE"), "{why}");
}

#[tokio::test]
async fn an_endless_line_before_the_endpoint_is_bounded_too() {
    let s = scripted(Box::leak(vec![b'x'; 200 << 10].into_boxed_slice()), vec![]).await;
    let (t, _) = connect(&s.url, 1 << 10, Duration::from_secs(10)).await;
    let err = t.expect_err("refused");
    assert!(
        matches!(&err, SseError::EndedEarly(w) if w.contains("MCP_BRIDGE_MAX_SERVER_MESSAGE")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_refused_get_and_a_wrong_content_type_are_errors() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/sse", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        for head in [
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 302 Found\r\nlocation: http://evil.example/sse\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer resource_metadata=\"http://x/.well-known/oauth-protected-resource\"\r\ncontent-length: 0\r\n\r\n",
        ] {
            let (mut c, _) = listener.accept().await.expect("accept");
            read_request(&mut c).await;
            c.write_all(head.as_bytes()).await.expect("answer");
        }
    });
    let (t, _) = connect(&url, 1 << 20, Duration::from_secs(10)).await;
    assert!(matches!(t, Err(SseError::Status { status, .. }) if status == 404));
    let (t, _) = connect(&url, 1 << 20, Duration::from_secs(10)).await;
    assert!(matches!(t, Err(SseError::NotEventStream(k)) if k == "text/html"));
    let (t, _) = connect(&url, 1 << 20, Duration::from_secs(10)).await;
    assert!(
        matches!(t, Err(SseError::Status { status, .. }) if status == 302),
        "not followed"
    );
}

fn refused(text: &'static str) -> ClientInitializeError {
    let e: StreamableHttpError<reqwest::Error> =
        StreamableHttpError::UnexpectedServerResponse(text.into());
    ClientInitializeError::TransportError {
        error: DynamicTransportError::from_parts("http", std::any::TypeId::of::<()>(), Box::new(e)),
        context: "send initialize request".into(),
    }
}

#[test]
fn only_a_4xx_other_than_sign_in_asks_for_the_legacy_transport() {
    assert!(wants_legacy(&refused(
        "HTTP 405 Method Not Allowed: Method Not Allowed"
    )));
    assert!(wants_legacy(&refused("HTTP 404 Not Found: ")));
    assert!(!wants_legacy(&refused("HTTP 401 Unauthorized: ")));
    assert!(!wants_legacy(&refused("HTTP 403 Forbidden: ")));
    assert!(!wants_legacy(&refused("HTTP 500 Internal Server Error: ")));
    assert!(!wants_legacy(&refused("expect initialized, accepted")));
    let both = ClientInitializeError::LegacyFallbackFailed {
        discover: Box::new(ClientInitializeError::Cancelled),
        fallback: Box::new(refused("HTTP 405 Method Not Allowed: x")),
    };
    assert!(wants_legacy(&both));
    assert!(!wants_legacy(&ClientInitializeError::ConnectionClosed(
        "x".into()
    )));
}

#[tokio::test]
async fn stray_events_cost_a_bounded_number_of_log_lines_and_a_malformed_reply_fails_its_call() {
    let (log, _guard) = crate::test_support::capture_logs();
    let mut stray = b"event: message\ndata: not json\n\nevent: other\ndata: x\n\n".repeat(500);
    stray.extend_from_slice(b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":7}\n\n");
    let s = scripted(b"event: endpoint\ndata: /m\n\n", stray).await;
    let (t, _) = connect(&s.url, 1 << 20, Duration::from_secs(10)).await;
    let mut t = t.expect("connected");
    t.send(ping()).await.expect("posted");
    match t.receive().await {
        Some(JsonRpcMessage::Error(e)) => {
            assert!(e.error.message.contains("malformed response"), "{e:?}");
        }
        other => panic!("expected an error for the call, got {other:?}"),
    }
    let text = log.text();
    let lines = text.lines().filter(|l| l.contains("ignored")).count();
    assert!(
        (1..=crate::log_limit::LogLimit::PER_WINDOW as usize).contains(&lines),
        "{lines}: {text}"
    );
}
