//! The scenarios with 50 stub servers of 20 tools each: the bridge's memory (idle, with their
//! tools indexed, after the users' sequence of payloads, and with all of them loaded), and what
//! naming 51 servers in a run costs next to naming one.

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

/// Payload sizes of the memory sequence: through a proxied tool result and through stdout.
const PAYLOADS: &[usize] = &[64 << 10, 1 << 20];

/// Times each payload goes each way in the memory sequence.
const PAYLOAD_REPS: usize = 5;

/// The memory sequence a user's session goes through, as the black-box bench (the official
/// Python client) drives it, on one bridge with 50 × 20 configured: warm runs, 200 proxied
/// calls, 64 KiB and 1 MiB payloads through a proxied tool result and through stdout; then
/// idle, then with all 51 servers loaded. Returns the RSS in KiB (idle before the sequence, idle
/// after it, loaded, after one call to a tool of each).
async fn memory_sequence(names: &[&str]) -> [u64; 4] {
    let work = Workdir::new(SCALE_SERVERS);
    let b = Bridge::start(&work, &[]).await;
    indexed(&work, SCALE_SERVERS + 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = b.rss_kib().0;
    for _ in 0..20 {
        let (out, err) = b.run("print(1)", &[], 60).await;
        assert!(!err && out.trim() == "1", "warm run: {out}");
    }
    let (out, err) = b
        .run(
            "for _ in range(200):\n    await mcp_stub.echo(text='x')\nprint(1)",
            &["stub"],
            120,
        )
        .await;
    assert!(!err && out.trim() == "1", "200 proxied calls: {out}");
    for size in PAYLOADS {
        for _ in 0..PAYLOAD_REPS {
            let code =
                format!("r = await mcp_stub.big(bytes={size})\nassert len(r) == {size}\nprint(1)");
            let (out, err) = b.run(&code, &["stub"], 60).await;
            assert!(
                !err && out.trim() == "1",
                "proxied payload of {size}: {out}"
            );
            let (out, err) = b.run(&format!("print('x' * {size})"), &[], 60).await;
            assert!(!err && out.len() >= 1000, "print of {size}: {out}");
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = b.rss_kib().0;
    let (out, err) = b.run("print(1)", names, 120).await;
    assert!(!err && out.trim() == "1", "loading: {out}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let loaded = b.rss_kib().0;
    let code = format!(
        "for i in range({SCALE_SERVERS}):\n    await globals()[f'mcp_s{{i:02}}'].tool_0(query='x')\n\
         print(2)"
    );
    let (out, err) = b.run(&code, names, 120).await;
    assert!(!err && out.trim() == "2", "calling: {out}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let called = b.rss_kib().0;
    b.stop().await;
    [before, idle, loaded, called]
}

/// The bridge's RSS as users measure it: idle with one server; then, on one bridge with
/// 50 × 20 configured, idle before and after the sequence of [`memory_sequence`], with all of
/// them loaded, and after one call to a tool of each (median over the runs, a fresh bridge
/// each). benches/RESULTS.md ("Memory budget") keeps what each feature adds to these rows.
pub async fn memory(t: &mut Table, quick: bool) {
    let runs = if quick { 1 } else { 3 };
    let (mut one, mut before, mut idle, mut loaded, mut called) =
        (vec![], vec![], vec![], vec![], vec![]);
    let names = all_servers();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    for _ in 0..runs {
        let work = Workdir::new(0);
        let b = Bridge::start(&work, &[]).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        one.push(mib(b.rss_kib().0));
        b.stop().await;

        let got = memory_sequence(&names).await;
        for (into, kib) in [&mut before, &mut idle, &mut loaded, &mut called]
            .into_iter()
            .zip(got)
        {
            into.push(mib(kib));
        }
    }
    let sizes = "20 warm runs, 200 proxied calls, 5 x 64 KiB and 5 x 1 MiB each through a \
                 proxied result and through print";
    let rows = [
        (
            "memory: bridge RSS idle, 1 server (2 s after initialize)",
            one,
            "goal <= 15 MiB".to_string(),
        ),
        (
            "memory: bridge RSS idle, 50 servers x 20 tools configured and indexed",
            before,
            "none loaded; before any run".to_string(),
        ),
        (
            "memory: bridge RSS idle after the payloads, 50 x 20 configured",
            idle,
            format!("goal <= 15 MiB; {sizes}; 2 s later"),
        ),
        (
            "memory: bridge RSS after the payloads, 50 servers x 20 tools loaded",
            loaded,
            "goal <= 25 MiB; then run_python naming all 51".to_string(),
        ),
        (
            "memory: bridge RSS, 50 x 20 loaded, one call to a tool of each",
            called,
            "argument checks compiled for 50 tools".to_string(),
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
    // The share of the request itself: the same call refused at the argument check (timeout 0,
    // after `servers` was read), so the 51 names cross the client, rmcp and `parse_args` only.
    let (mut many, mut few) = (Vec::new(), Vec::new());
    for _ in 0..blocks {
        for (servers, into) in [(&all[..], &mut many), (one, &mut few)] {
            for _ in 0..runs / blocks {
                let s = Instant::now();
                let (out, err) = b.run("print(1)", servers, 0).await;
                into.push(s.elapsed());
                assert!(err && out.contains("'timeout'"), "{out}");
            }
        }
    }
    let (m, f) = (summarize(&ms(&many)), summarize(&ms(&few)));
    t.add(
        "run_python refused at the argument check, naming 51 servers",
        "ms",
        m,
        format!(
            "{:.1} µs more than naming 1: the request's share",
            (m.median - f.median) * 1e3
        ),
    );
    t.add(
        "run_python refused at the argument check, naming 1 server",
        "ms",
        f,
        "",
    );
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
