//! Direct rmcp client → stub round trip vs the bridge's upstream layer (no sandbox): a benchmark
//! probe, run with `cargo test --release --test integration upstream_rtt -- --ignored --nocapture`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_code_bridge::upstream::client::Upstream;
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;

use crate::upstream::stub;

fn median(mut v: Vec<u128>) -> (u128, u128) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 95 / 100])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark probe"]
async fn upstream_rtt() {
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_stub-mcp"));
    let client =
        ().serve(rmcp::transport::TokioChildProcess::new(cmd).expect("spawn"))
            .await
            .expect("init");
    let args = serde_json::json!({"text": "x"})
        .as_object()
        .cloned()
        .unwrap();
    let mut direct = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        client
            .peer()
            .call_tool(CallToolRequestParams::new("echo").with_arguments(args.clone()))
            .await
            .expect("call");
        direct.push(t.elapsed().as_micros());
    }
    let up = Upstream::new(Arc::new(stub("stub", &[], &[])));
    let mut bridged = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        up.call(
            "echo",
            args.clone(),
            tokio::time::Instant::now() + Duration::from_secs(5),
        )
        .await
        .expect("call");
        bridged.push(t.elapsed().as_micros());
    }
    eprintln!("DIRECT rmcp us (median, p95): {:?}", median(direct));
    eprintln!("UPSTREAM layer us (median, p95): {:?}", median(bridged));
}
