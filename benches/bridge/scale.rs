//! The scenarios with 50 stub servers of 20 tools each: the bridge's memory (idle, with their
//! tools indexed, and with all of them loaded), and what naming 50 servers in a run costs next
//! to naming one.

use std::time::{Duration, Instant};

use crate::client::{Bridge, Workdir};
use crate::stats::{ms, summarize, Table};

/// Servers in these scenarios (stub servers of 20 tools each, besides `stub`).
const SCALE_SERVERS: usize = 50;

/// The names of the `stub` server and the [`SCALE_SERVERS`] others.
fn all_servers() -> Vec<String> {
    std::iter::once("stub".to_string())
        .chain((0..SCALE_SERVERS).map(|i| format!("s{i:02}")))
        .collect()
}

/// Waits until the background indexer has written every server's tool list (at most 180 s).
async fn indexed(work: &Workdir, servers: usize) {
    let cache = work.path().join("state").join("tool-cache");
    let until = Instant::now() + Duration::from_secs(180);
    while std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0) < servers {
        assert!(
            Instant::now() < until,
            "the tool cache was not filled in 180 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The bridge's RSS in four states, each a fresh bridge per run (median of the runs): idle
/// with one server; idle with 50 × 20 configured once their tools are indexed; with all of
/// them loaded by a run; and after one call to a tool of each.
pub async fn memory(t: &mut Table, quick: bool) {
    let runs = if quick { 1 } else { 3 };
    let (mut one, mut configured, mut loaded, mut called) = (vec![], vec![], vec![], vec![]);
    let names = all_servers();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for _ in 0..runs {
        let work = Workdir::new(0);
        let b = Bridge::start(&work, &[]).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        one.push(mib(b.rss_kib().0));
        b.stop().await;

        let work = Workdir::new(SCALE_SERVERS);
        let b = Bridge::start(&work, &[]).await;
        indexed(&work, SCALE_SERVERS + 1).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        configured.push(mib(b.rss_kib().0));
        let (out, err) = b.run("print(1)", &names, 120).await;
        assert!(!err && out.trim() == "1", "loading: {out}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        loaded.push(mib(b.rss_kib().0));
        let code = format!(
            "for i in range({SCALE_SERVERS}):\n    await globals()[f'mcp_s{{i:02}}'].tool_0(query='x')\n\
             print(2)"
        );
        let (out, err) = b.run(&code, &names, 120).await;
        assert!(!err && out.trim() == "2", "calling: {out}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        called.push(mib(b.rss_kib().0));
        b.stop().await;
    }
    let rows = [
        (
            "memory: bridge RSS idle, 1 server (2 s after initialize)",
            one,
            "goal <= 15 MiB",
        ),
        (
            "memory: bridge RSS idle, 50 servers x 20 tools configured and indexed",
            configured,
            "goal <= 15 MiB; none loaded",
        ),
        (
            "memory: bridge RSS, 50 servers x 20 tools loaded",
            loaded,
            "goal <= 25 MiB; after run_python naming all",
        ),
        (
            "memory: bridge RSS, 50 x 20 loaded, one call to a tool of each",
            called,
            "argument checks compiled for 50 tools",
        ),
    ];
    for (name, values, note) in rows {
        t.add(name, "MiB", summarize(&values), note);
    }
}

/// One proxied echo call from sandbox code: the run whose cost is compared naming 1 and 51
/// servers.
const ECHO_CODE: &str = "await mcp_stub.echo(text='x')\nprint(1)";

/// Warm `run_python` with many servers loaded: the cost of a run must not grow with the number
/// of servers it names (each exec frame once carried them all, the sandbox rebuilt every proxy,
/// and each named server's connect state was built and dropped). Then the bridge's shutdown
/// with those servers running.
pub async fn scale(t: &mut Table, quick: bool) {
    let work = Workdir::new(SCALE_SERVERS);
    let all = all_servers();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let one = &all[..1];
    let b = Bridge::start(&work, &[]).await;
    let (out, err) = b.run("print(1)", &all, 120).await;
    assert!(
        !err && out.trim() == "1",
        "loading {SCALE_SERVERS} servers: {out}"
    );
    let runs = if quick { 50 } else { 300 };
    // Blocks alternate, so both see the same phases of a noisy machine; the first run of each
    // block (the switch between the two server lists) is counted apart.
    let blocks = if quick { 2 } else { 5 };
    for (code, what) in [
        (ECHO_CODE, "one proxied echo call"),
        ("print(1)", "print(1)"),
    ] {
        let (mut many, mut few, mut switch) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..blocks {
            for (servers, into) in [(&all[..], &mut many), (one, &mut few)] {
                for i in 0..runs / blocks + 1 {
                    let s = Instant::now();
                    let (out, err) = b.run(code, servers, 30).await;
                    let took = s.elapsed();
                    assert!(!err && out.trim() == "1", "{out}");
                    if i == 0 {
                        switch.push(took);
                    } else {
                        into.push(took);
                    }
                }
            }
        }
        let (m, f) = (summarize(&ms(&many)), summarize(&ms(&few)));
        let n = SCALE_SERVERS + 1;
        t.add(
            &format!("warm run_python, {what}, naming {n} servers (50 x 20 tools + stub)"),
            "ms",
            m,
            format!("{:.2}x naming 1", m.median / f.median),
        );
        t.add(
            &format!("warm run_python, {what}, naming 1 of {n} loaded servers"),
            "ms",
            f,
            "",
        );
        t.single(
            &format!("warm run_python, {what}: naming {n} servers ÷ naming 1 (medians)"),
            "x",
            m.median / f.median,
            "goal <= 1.1x",
        );
        t.add(
            &format!("run_python, {what}, switching between 1 and {n} servers"),
            "ms",
            summarize(&ms(&switch)),
            "first run after the server list changed",
        );
    }
    let pid = b.pid;
    let s = Instant::now();
    b.stop().await;
    let took = s.elapsed();
    let gone = std::fs::metadata(format!("/proc/{pid}")).is_err();
    t.single(
        &format!("shutdown: stdin closed -> bridge exit, {SCALE_SERVERS} servers running"),
        "ms",
        took.as_secs_f64() * 1e3,
        if gone {
            "rmcp closes stdin, waits 3 s, then SIGTERM, then kill".to_string()
        } else {
            "the process was still there afterwards".to_string()
        },
    );
}
