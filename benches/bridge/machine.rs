//! How fast the machine is right now: shared VMs swing 2-3x within minutes, so each run records
//! a CPU figure and an inter-process wake-up figure next to its results (first and last).

use std::io::{BufRead, BufReader, Write};
use std::time::Instant;

use crate::client::STUB_BIN;
use crate::stats::{summarize, Table};

/// Adds the two machine checks to `t`, labelled `when` ("before" / "after").
pub fn check(t: &mut Table, when: &str) {
    t.add(
        &format!("machine check {when}: 20M-step integer loop"),
        "ms",
        summarize(&(0..5).map(|_| cpu_loop_ms()).collect::<Vec<_>>()),
        "CPU speed; lower is faster",
    );
    t.add(
        &format!("machine check {when}: blocking pipe round trip to the stub"),
        "µs",
        summarize(&pipe_round_trips(2000)),
        "tools/call echo, no MCP client library: the wake-up floor",
    );
}

fn cpu_loop_ms() -> f64 {
    let start = Instant::now();
    let mut x: u64 = 1;
    for i in 0..20_000_000u64 {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    std::hint::black_box(x);
    start.elapsed().as_secs_f64() * 1e3
}

fn pipe_round_trips(n: usize) -> Vec<f64> {
    let mut child = std::process::Command::new(STUB_BIN)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn stub");
    let mut to = child.stdin.take().expect("stdin");
    let mut from = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    writeln!(to, "{init}").expect("write");
    from.read_line(&mut line).expect("read");
    writeln!(
        to,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("write");
    let mut out = Vec::with_capacity(n);
    for i in 0..n + 100 {
        line.clear();
        let start = Instant::now();
        writeln!(
            to,
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x"}}}}}}"#,
            i + 1
        )
        .expect("write");
        from.read_line(&mut line).expect("read");
        if i >= 100 {
            out.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    drop(to);
    let _ = child.wait();
    out
}
