//! The proxy end to end on the host: real TCP servers on loopback, the proxy driven over an
//! in-memory pipe as the mux drives it, and the audit lines it writes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::budget::RunBudget;
use super::resolve::Resolver;
use super::{mux, proxy, EgressPolicy};
use crate::config::NetSettings;

/// A server answering every connection with `reply` after reading a request head.
async fn server(reply: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

fn policy(list: &str, max_connections: u64) -> Arc<EgressPolicy> {
    let settings =
        NetSettings::from_lookup(&|k| (k == "MCP_BRIDGE_NETWORK_ALLOW").then(|| list.to_string()))
            .expect("valid");
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    Arc::new(EgressPolicy {
        allow: settings.allow,
        resolver: Resolver::Hosts(HashMap::from([
            ("local.test".to_string(), vec![ip("127.0.0.1")]),
            ("meta.test".to_string(), vec![ip("169.254.169.254")]),
        ])),
        audit: None,
        max_connections,
        max_bytes: 1 << 20,
    })
}

/// Sends `request` through a fresh proxy connection; returns all the proxy answered.
async fn through(p: &Arc<EgressPolicy>, budget: &Arc<RunBudget>, request: String) -> String {
    let (mut ours, theirs) = tokio::io::duplex(64 * 1024);
    let task = tokio::spawn(proxy::serve(theirs, p.clone(), budget.clone()));
    ours.write_all(request.as_bytes()).await.expect("write");
    ours.shutdown().await.expect("half close");
    let mut out = Vec::new();
    ours.read_to_end(&mut out).await.expect("read");
    task.await.expect("served");
    String::from_utf8_lossy(&out).into_owned()
}

fn get(host: &str) -> String {
    format!("GET http://{host}/x HTTP/1.1\r\nHost: {host}\r\n\r\n")
}

#[tokio::test]
async fn an_allowed_address_is_reached_and_others_get_a_403_naming_the_setting() {
    let port = server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").await;
    let p = policy(&format!("127.0.0.1:{port},local.test:{port}"), 100);
    let budget = Arc::new(p.budget());
    let ok = through(&p, &budget, get(&format!("127.0.0.1:{port}"))).await;
    assert!(
        ok.starts_with("HTTP/1.1 200 OK") && ok.ends_with("hello"),
        "{ok}"
    );
    for (host, why) in [
        (format!("127.0.0.1:{}", port + 1), "is not in"),
        (format!("127.0.0.2:{port}"), "is not in"),
        // a name resolving to loopback is refused though its IP is listed on another port
        ("local.test:80".to_string(), "is not in"),
        ("meta.test:80".to_string(), "is not in"),
    ] {
        let refused = through(&p, &budget, get(&host)).await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{host}: {refused}");
        assert!(
            refused.contains("MCP_BRIDGE_NETWORK_ALLOW") && refused.contains(why),
            "{refused}"
        );
    }
    let p = policy("local.test,meta.test", 100);
    for host in ["local.test", "meta.test"] {
        let refused = through(&p, &budget, get(host)).await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{host}: {refused}");
        assert!(
            refused.contains("only an IP literal in MCP_BRIDGE_NETWORK_ALLOW"),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn connect_checks_its_own_target_and_tunnels_bytes() {
    let port = server("HTTP/1.1 204 No Content\r\n\r\n").await;
    let p = policy(&format!("127.0.0.1:{port}"), 100);
    let budget = Arc::new(p.budget());
    let tunnel = through(
        &p,
        &budget,
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(
        tunnel.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 204"),
        "{tunnel}"
    );
    // The Host header of a CONNECT does not matter: its target does.
    let refused = through(
        &p,
        &budget,
        format!("CONNECT local.test:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"),
    )
    .await;
    assert!(
        refused.starts_with("HTTP/1.1 403") && refused.contains("MCP_BRIDGE_NETWORK_ALLOW"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_run_gets_its_connections_then_refusals_until_the_next_run() {
    let port = server("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
    let p = policy(&format!("127.0.0.1:{port}"), 3);
    let budget = Arc::new(p.budget());
    budget.begin_run("r1");
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(through(&p, &budget, get(&format!("127.0.0.1:{port}"))).await);
    }
    let refused = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 403"))
        .count();
    assert_eq!(refused, 2, "{answers:?}");
    assert!(
        answers[4].contains("MCP_BRIDGE_NETWORK_MAX_CONNECTIONS"),
        "{}",
        answers[4]
    );
    budget.begin_run("r2");
    assert!(through(&p, &budget, get(&format!("127.0.0.1:{port}")))
        .await
        .starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn every_connection_is_one_audit_line() {
    let port = server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.log");
    let settings = crate::config::PolicySettings {
        audit_log: Some(path.clone()),
        ..crate::config::PolicySettings::from_lookup(&|_| None).expect("defaults")
    };
    let audit = crate::audit::AuditLog::open(&settings, &dir.path().join("state"))
        .expect("open")
        .expect("set");
    let mut p = Arc::try_unwrap(policy(&format!("127.0.0.1:{port}"), 100))
        .ok()
        .expect("one");
    p.audit = Some(audit.clone());
    let p = Arc::new(p);
    let budget = Arc::new(p.budget());
    budget.begin_run("run-1");
    through(&p, &budget, get(&format!("127.0.0.1:{port}"))).await;
    through(&p, &budget, get("169.254.169.254")).await;
    audit.close(crate::audit::FLUSH_TIMEOUT).await;
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .expect("read")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["kind"], "net");
    assert_eq!(lines[0]["run"], "run-1");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[0]["port"], port);
    assert!(lines[0]["bytes_up"].as_u64().expect("up") > 0);
    assert!(lines[0]["bytes_down"].as_u64().expect("down") > 5);
    assert_eq!(lines[1]["outcome"], "refused");
    assert_eq!(lines[1]["host"], "169.254.169.254");
}

/// A relay as the sandbox's would speak: one frame.
fn frame(kind: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![kind];
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[tokio::test]
async fn the_mux_carries_streams_and_a_malformed_frame_ends_it() {
    let port = server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
    let p = policy(&format!("127.0.0.1:{port}"), 100);
    let budget = Arc::new(p.budget());
    let (mut relay, bridge) = tokio::io::duplex(256 * 1024);
    let served = tokio::spawn(mux::run(bridge, p, budget));
    let mut out = frame(mux::OPEN, 7, b"");
    out.extend(frame(
        mux::DATA,
        7,
        get(&format!("127.0.0.1:{port}")).as_bytes(),
    ));
    out.extend(frame(mux::EOF, 7, b""));
    relay.write_all(&out).await.expect("write");
    let mut body = Vec::new();
    loop {
        let mut head = [0u8; 9];
        relay.read_exact(&mut head).await.expect("frame");
        let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
        let mut payload = vec![0u8; len];
        relay.read_exact(&mut payload).await.expect("payload");
        assert_eq!(u32::from_be_bytes([head[1], head[2], head[3], head[4]]), 7);
        match head[0] {
            mux::DATA => body.extend(payload),
            mux::CLOSE => break,
            _ => {}
        }
    }
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.starts_with("HTTP/1.1 200") && body.ends_with("ok"),
        "{body}"
    );
    // an oversized frame: the mux ends
    relay
        .write_all(&frame(mux::DATA, 8, &vec![0u8; mux::MAX_PAYLOAD + 1]))
        .await
        .expect("write");
    served.await.expect("mux ended");
}
