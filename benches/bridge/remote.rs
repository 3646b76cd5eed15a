//! Issue 32's measurements: a proxied call to a remote streamable HTTP server (signed in with
//! OAuth, and the same server without auth) against a direct rmcp streamable HTTP client in
//! this process sending the same bearer token, in the same run; and the sign-in round trip
//! (`mcp-code-bridge login` against an authorization endpoint that approves at once, from the
//! command's start to the tokens stored and the command exited).
//!
//! The server is tests/e2e/oauth_server.py (the official MCP Python SDK's server and
//! authorization-server routes), started here with `python3`; the browser is
//! tests/e2e/oauth_browser.py (it follows the redirect to the loopback callback). A third row
//! set calls rmcp's own streamable HTTP server in this process (no auth, an `echo` tool): a
//! server that answers in microseconds, so what the bridge adds per call shows unmasked by the
//! Python server's millisecond.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;

use crate::client::{bridge_bin, Bridge, Workdir};
use crate::scenarios::{mean, ns_to_us};
use crate::stats::{ms, summarize, Table};

const SERVER_PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/oauth_server.py");
const BROWSER_PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/oauth_browser.py");

const REMOTE_SEQ_CODE: &str = r#"
import json, time
seq = []
for _ in range(__N__):
    t = time.perf_counter_ns(); await mcp_remote.echo(text='x'); seq.append(time.perf_counter_ns() - t)
print('BENCH ' + json.dumps({'seq_ns': seq}))
"#;

/// oauth_server.py in a process of its own (killed when dropped).
struct Server {
    _child: tokio::process::Child,
    url: String,
}

impl Server {
    async fn start(dir: &Path, mode: &str) -> Server {
        let port_file = dir.join(format!("port-{mode}"));
        let child = tokio::process::Command::new("python3")
            .arg(SERVER_PY)
            .arg(&port_file)
            .args(["--mode", mode])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 tests/e2e/oauth_server.py");
        let began = Instant::now();
        let port = loop {
            match std::fs::read_to_string(&port_file) {
                Ok(p) if !p.trim().is_empty() => break p.trim().to_string(),
                _ => {}
            }
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "oauth_server.py did not start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        tokio::time::sleep(Duration::from_millis(300)).await; // uvicorn serves once its loop runs
        Server {
            _child: child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

/// The in-process server's one tool.
#[derive(Clone)]
struct Echo;

impl rmcp::ServerHandler for Echo {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let schema = std::sync::Arc::new(schema.as_object().cloned().expect("object"));
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![
            rmcp::model::Tool::new("echo", "Echoes the text.", schema),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let text = request
            .arguments
            .and_then(|a| a.get("text").and_then(|t| t.as_str()).map(String::from))
            .unwrap_or_default();
        Ok(
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)])
                .into(),
        )
    }
}

/// rmcp's streamable HTTP server for [`Echo`] on a loopback port of this process: its URL.
async fn rust_server() -> String {
    crate::rmcp_http::serve_rmcp(|| Echo, Default::default()).await
}

/// A config naming the server `remote` at `url`.
fn workdir(url: &str) -> Workdir {
    let mut servers = serde_json::Map::new();
    servers.insert("remote".into(), json!({"type": "http", "url": url}));
    Workdir::with_servers(servers)
}

/// `mcp-code-bridge login remote` with the test browser: how long it took.
async fn login(work: &Workdir) -> Duration {
    let began = Instant::now();
    let out = tokio::process::Command::new(bridge_bin())
        .args(["login", "remote"])
        .env("MCP_BRIDGE_CONFIG_DIR", work.path())
        .env("MCP_BRIDGE_STATE_DIR", work.path().join("state"))
        .env("MCP_BRIDGE_LOG_LEVEL", "warn")
        .env("MCP_BRIDGE_LOGIN_TIMEOUT", "30")
        .env("BROWSER", BROWSER_PY)
        .output()
        .await
        .expect("run login");
    let took = began.elapsed();
    assert!(
        out.status.success(),
        "login failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// The access token `login` stored for `remote`.
fn stored_token(work: &Workdir) -> String {
    let path = work.path().join("state/oauth/tokens.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("the token file")).expect("json");
    v["servers"]["remote"]["credentials"]["token_response"]["access_token"]
        .as_str()
        .expect("an access token")
        .to_string()
}

/// rmcp's streamable HTTP client in this process, with `token` as its bearer token.
async fn direct(url: &str, token: Option<String>) -> RunningService<RoleClient, ()> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize the remote server directly")
}

/// A bare streamable HTTP session made with reqwest alone (no rmcp): each call one POST whose
/// whole body is read, as a client with no service loop or worker tasks would make it. A
/// reference for what rmcp's client path costs per call, not a client to use.
struct Raw {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    token: Option<String>,
}

impl Raw {
    fn post(&self, body: serde_json::Value) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(s) = &self.session {
            r = r
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-11-25");
        }
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        r
    }

    async fn open(url: &str, token: Option<String>) -> Raw {
        let mut raw = Raw {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("a reqwest client"),
            url: url.to_string(),
            session: None,
            token,
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench-raw", "version": "0"}}});
        let answer = raw.post(init).send().await.expect("raw initialize");
        raw.session = answer
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        answer.bytes().await.expect("raw initialize body");
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        raw.post(done).send().await.expect("raw initialized");
        raw
    }

    async fn call(&self, id: u64) {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}}});
        let body = self.post(call).send().await.expect("raw call");
        let body = body.bytes().await.expect("raw call body");
        assert!(
            body.windows(9).any(|w| w == b"\"result\":"),
            "a raw call's answer has a result"
        );
    }
}

/// Proxied and direct echo calls to `url`, alternating in blocks: (proxied µs, direct µs, the
/// ratio of each proxied block's median to the direct block's just before it).
async fn calls(
    work: &Workdir,
    url: &str,
    token: Option<String>,
    quick: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (n, blocks) = if quick { (200, 4) } else { (1000, 20) };
    let raw = Raw::open(url, token.clone()).await;
    let d = direct(url, token).await;
    let b = Bridge::start(work, &[]).await;
    let args: JsonObject = json!({"text": "x"}).as_object().cloned().expect("object");
    let call = || {
        d.peer()
            .call_tool(CallToolRequestParams::new("echo").with_arguments(args.clone()))
    };
    for _ in 0..20 {
        call().await.expect("direct call");
    }
    b.measure(&REMOTE_SEQ_CODE.replace("__N__", "20"), &["remote"])
        .await;
    let code = REMOTE_SEQ_CODE.replace("__N__", &(n / blocks).to_string());
    let (mut proxied, mut direct_us) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut ratios = Vec::with_capacity(blocks);
    let mut raw_us = Vec::with_capacity(n);
    let mut raw_id = 1 << 20;
    for _ in 0..blocks {
        for _ in 0..n / blocks {
            raw_id += 1;
            let s = Instant::now();
            raw.call(raw_id).await;
            raw_us.push(s.elapsed().as_secs_f64() * 1e6);
        }
        let mut block = Vec::with_capacity(n / blocks);
        for _ in 0..n / blocks {
            let s = Instant::now();
            call().await.expect("direct call");
            block.push(s.elapsed().as_secs_f64() * 1e6);
        }
        let near = ns_to_us(&b.measure(&code, &["remote"]).await["seq_ns"]);
        ratios.push(summarize(&near).median / summarize(&block).median);
        proxied.extend(near);
        direct_us.extend(block);
    }
    b.stop().await;
    let _ = d.cancel().await;
    (proxied, direct_us, ratios, raw_us)
}

/// The scenario `remote` (benches/RESULTS.md, "Issue 32: remote calls and sign-in").
pub async fn remote(t: &mut Table, quick: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let modes = [
        ("normal", "Python SDK, OAuth"),
        ("open", "Python SDK, no auth"),
        ("rust", "rmcp in-process, no auth"),
    ];
    for (mode, label) in modes {
        let (_server, url) = match mode {
            "rust" => (None, rust_server().await),
            _ => {
                let s = Server::start(dir.path(), mode).await;
                let url = s.url.clone();
                (Some(s), url)
            }
        };
        let work = workdir(&url);
        let token = if mode == "normal" {
            let logins = if quick { 3 } else { 10 };
            let mut took = Vec::with_capacity(logins);
            for _ in 0..logins {
                took.push(login(&work).await);
            }
            t.add(
                "sign-in round trip: `login` start -> tokens stored, exited",
                "ms",
                summarize(&ms(&took)),
                "approve-at-once authorization endpoint; includes DCR, the browser script, the exchange",
            );
            Some(stored_token(&work))
        } else {
            None
        };
        let (proxied, direct, mut ratios, raw) = calls(&work, &url, token, quick).await;
        let (p, d) = (summarize(&proxied), summarize(&direct));
        ratios.sort_by(f64::total_cmp);
        t.add(
            &format!("remote HTTP ({label}): proxied echo from sandbox code"),
            "µs/call",
            p,
            "",
        );
        t.add(
            &format!("remote HTTP ({label}): direct rmcp client, same token"),
            "µs/call",
            d,
            "",
        );
        t.add(
            &format!("remote HTTP ({label}): bare reqwest POST, no rmcp (reference)"),
            "µs/call",
            summarize(&raw),
            "what rmcp's client path costs: direct minus this",
        );
        t.single(
            &format!("remote HTTP ({label}): proxied ÷ direct (medians)"),
            "x",
            p.median / d.median,
            format!(
                "means {:.0} / {:.0} µs; bridge's share {:.0} µs; target <= 1.1",
                mean(&proxied),
                mean(&direct),
                p.median - d.median
            ),
        );
        t.single(
            &format!("remote HTTP ({label}): proxied ÷ direct, median of the blocks' ratios"),
            "x",
            summarize(&ratios).median,
            format!(
                "{} blocks, each against the direct block just before it: {:.2}-{:.2}",
                ratios.len(),
                ratios[0],
                ratios[ratios.len() - 1]
            ),
        );
    }
}
