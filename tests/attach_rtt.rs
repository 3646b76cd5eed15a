//! Raw attach round trip through the engine (no session code): a benchmark probe, run with
//! `cargo test --release --test integration attach_rtt -- --ignored --nocapture` (needs podman).

use std::collections::BTreeMap;
use std::time::Instant;

use futures::StreamExt;
use mcp_code_bridge::container::{connect, Chunk, Owner, SandboxSpec};
use tokio::io::AsyncWriteExt;

use crate::support::settings;

#[tokio::test]
#[ignore = "benchmark probe: needs a container engine"]
async fn attach_rtt() {
    let s = settings(&[]);
    let conn = connect(&s).await.expect("engine");
    let rt = conn.runtime.clone();
    let mut labels: BTreeMap<String, String> = Owner::current().labels();
    labels.insert("probe".into(), "attach-rtt".into());
    let cmd = [
        "python3",
        "-u",
        "-c",
        "import sys\nfor l in sys.stdin: sys.stdout.write(l); sys.stdout.flush()",
    ];
    let spec = SandboxSpec::new(
        &s,
        format!("attach-rtt-{}", std::process::id()),
        cmd.iter().map(|c| c.to_string()).collect(),
        labels,
    );
    let id = rt.create(&spec).await.expect("create");
    let mut att = rt.attach(&id).await.expect("attach");
    rt.start(&id).await.expect("start");
    let mut times = Vec::new();
    for i in 0..300 {
        let t = Instant::now();
        att.input
            .write_all(format!("{i}\n").as_bytes())
            .await
            .expect("write");
        att.input.flush().await.expect("flush");
        loop {
            match att.output.next().await {
                Some(Ok(Chunk::Stdout(_))) => break,
                Some(Ok(Chunk::Stderr(_))) => continue,
                other => panic!("stream ended: {other:?}"),
            }
        }
        times.push(t.elapsed().as_micros());
    }
    times.sort();
    eprintln!(
        "ATTACH RTT ({}) us: median {} p95 {}",
        rt.engine(),
        times[150],
        times[285]
    );
    rt.remove(&id).await.expect("remove");
    conn.close().await;
}
