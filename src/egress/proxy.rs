//! [`serve`]: one connection from the sandbox through the egress proxy. Reads a request head
//! (`head.rs`), decides (`decide.rs`), connects to the checked address, then moves bytes both
//! ways within the run's budget and an idle bound; a refusal is a `403` whose text names
//! `MCP_BRIDGE_NETWORK_ALLOW`. Every connection ends in one audit line.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::budget::RunBudget;
use super::decide::{decide, Refusal, SETTING};
use super::head::{read_head, Request};
use super::EgressPolicy;
use crate::audit::NetRecord;

/// How long a connection may move no byte either way before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting to one address may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes moved per read.
const CHUNK: usize = 16 * 1024;

/// How a connection ended, for the audit line.
struct Ending {
    outcome: &'static str,
    reason: Option<String>,
}

impl Ending {
    fn ok() -> Ending {
        Ending {
            outcome: "ok",
            reason: None,
        }
    }

    fn because(outcome: &'static str, reason: impl ToString) -> Ending {
        Ending {
            outcome,
            reason: Some(reason.to_string()),
        }
    }
}

/// Serves one sandbox connection `client` under `policy` and `budget`, to its end.
pub async fn serve<S>(mut client: S, policy: Arc<EgressPolicy>, budget: Arc<RunBudget>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let began = Instant::now();
    let mut line = NetRecord {
        time: String::new(),
        run: String::new(),
        host: String::new(),
        port: 0,
        method: String::new(),
        addr: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0.0,
        outcome: String::new(),
        reason: None,
    };
    let ending = handle(&mut client, &policy, &budget, &mut line).await;
    let _ = client.shutdown().await;
    line.time = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    line.duration_ms = (began.elapsed().as_secs_f64() * 1e6).round() / 1e3;
    line.outcome = ending.outcome.to_string();
    line.reason = ending.reason;
    tracing::debug!(host = %line.host, port = line.port, outcome = %line.outcome, "egress connection");
    if let Some(audit) = &policy.audit {
        audit.net(line);
    }
}

async fn handle<S>(
    client: &mut S,
    policy: &EgressPolicy,
    budget: &RunBudget,
    line: &mut NetRecord,
) -> Ending
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (request, early) = match read_head(client, IDLE_TIMEOUT).await {
        Ok(r) => r,
        Err(err) => {
            let _ = respond(
                client,
                400,
                "Bad Request",
                &format!("mcp-code-bridge: {err}\n"),
            )
            .await;
            return Ending::because("bad_request", err);
        }
    };
    let (host, port, forward) = match request {
        Request::Connect { host, port } => {
            line.method = "CONNECT".into();
            (host, port, None)
        }
        Request::Forward {
            method,
            host,
            port,
            head,
        } => {
            line.method = method;
            (host, port, Some(head))
        }
    };
    line.host = host.chars().take(256).collect();
    line.port = port;
    let decided = match budget.admit() {
        Ok(run) => {
            line.run = run;
            decide(&policy.allow, &policy.resolver, &host, port).await
        }
        Err(refusal) => Err(refusal),
    };
    let addrs = match decided {
        Ok(addrs) => addrs,
        Err(refusal) => return refuse(client, &refusal).await,
    };
    let Some((upstream, addr)) = connect(&addrs).await else {
        let text = format!(
            "mcp-code-bridge: {} is allowed by {SETTING} but could not be reached\n",
            line.host
        );
        let _ = respond(client, 502, "Bad Gateway", &text).await;
        return Ending::because("failed", "no address answered");
    };
    line.addr = Some(addr.to_string());
    let (mut up_first, established) = match forward {
        Some(head) => (head, false),
        None => (Vec::new(), true),
    };
    up_first.extend_from_slice(&early);
    if established
        && client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .is_err()
    {
        return Ending::because("failed", "the sandbox went away");
    }
    pump(client, upstream, up_first, budget, line).await
}

/// Answers `refusal` with a 403 naming the setting.
async fn refuse<S: AsyncWrite + Unpin>(client: &mut S, refusal: &Refusal) -> Ending {
    let text = format!("mcp-code-bridge refused this connection: {refusal}\n");
    // The reason phrase carries it too: clients show it in their error (urllib's `HTTPError`,
    // `Tunnel connection failed: 403 ...`) where they drop the body.
    let phrase: String = format!("Forbidden: {refusal}")
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(300)
        .collect();
    let _ = respond(client, 403, &phrase, &text).await;
    Ending::because("refused", format!("{}: {refusal}", refusal.kind()))
}

async fn respond<S: AsyncWrite + Unpin>(
    client: &mut S,
    code: u16,
    phrase: &str,
    text: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {code} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    let write = async {
        client.write_all(head.as_bytes()).await?;
        client.write_all(text.as_bytes()).await?;
        client.flush().await
    };
    tokio::time::timeout(IDLE_TIMEOUT, write)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// The first of `addrs` that accepts a connection.
async fn connect(addrs: &[SocketAddr]) -> Option<(TcpStream, SocketAddr)> {
    for &addr in addrs {
        if let Ok(Ok(s)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            return Some((s, addr));
        }
    }
    None
}

enum Step {
    Up(std::io::Result<usize>),
    Down(std::io::Result<usize>),
}

/// Moves bytes both ways (`first` goes up before anything else) until both sides are done,
/// the connection is idle for [`IDLE_TIMEOUT`], or the run's bytes are used up.
async fn pump<S>(
    client: &mut S,
    upstream: TcpStream,
    first: Vec<u8>,
    budget: &RunBudget,
    line: &mut NetRecord,
) -> Ending
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut ur, mut uw) = upstream.into_split();
    if !first.is_empty() {
        if !budget.take(first.len() as u64) {
            return Ending::because("cut", Refusal::Budget("MCP_BRIDGE_NETWORK_MAX_BYTES"));
        }
        if !matches!(
            tokio::time::timeout(IDLE_TIMEOUT, uw.write_all(&first)).await,
            Ok(Ok(()))
        ) {
            return Ending::because("failed", "the destination stopped reading");
        }
        line.bytes_up += first.len() as u64;
    }
    let (mut up_open, mut down_open) = (true, true);
    let mut a = vec![0u8; CHUNK];
    let mut b = vec![0u8; CHUNK];
    while up_open || down_open {
        let step = tokio::time::timeout(IDLE_TIMEOUT, async {
            tokio::select! {
                n = client.read(&mut a), if up_open => Step::Up(n),
                n = ur.read(&mut b), if down_open => Step::Down(n),
            }
        })
        .await;
        match step {
            Err(_) => return Ending::because("idle", "no bytes either way for 60 s"),
            Ok(Step::Up(Ok(0))) | Ok(Step::Up(Err(_))) => {
                up_open = false;
                let _ = uw.shutdown().await;
            }
            Ok(Step::Down(Ok(0))) | Ok(Step::Down(Err(_))) => {
                down_open = false;
                let _ = client.shutdown().await;
                // the server is done: a client still sending is not waited for
                if !up_open || line.method != "CONNECT" {
                    break;
                }
            }
            Ok(Step::Up(Ok(n))) => {
                if !budget.take(n as u64) {
                    return Ending::because("cut", Refusal::Budget("MCP_BRIDGE_NETWORK_MAX_BYTES"));
                }
                if !matches!(
                    tokio::time::timeout(IDLE_TIMEOUT, uw.write_all(&a[..n])).await,
                    Ok(Ok(()))
                ) {
                    return Ending::because("failed", "the destination stopped reading");
                }
                line.bytes_up += n as u64;
            }
            Ok(Step::Down(Ok(n))) => {
                if !budget.take(n as u64) {
                    return Ending::because("cut", Refusal::Budget("MCP_BRIDGE_NETWORK_MAX_BYTES"));
                }
                if !matches!(
                    tokio::time::timeout(IDLE_TIMEOUT, client.write_all(&b[..n])).await,
                    Ok(Ok(()))
                ) {
                    return Ending::because("failed", "the sandbox stopped reading");
                }
                line.bytes_down += n as u64;
            }
        }
    }
    Ending::ok()
}
