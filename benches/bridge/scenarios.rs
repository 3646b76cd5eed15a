//! The measured scenarios, in the order of benches/RESULTS.md's tables.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::{children_of, cpu_seconds, Bridge, Direct, Workdir};
use crate::stats::{ms, summarize, Summary, Table};

type Fut<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;
type Scenario = for<'a> fn(&'a mut Table, bool) -> Fut<'a>;

/// Every scenario with its name (command-line arguments filter by name).
pub const ALL: &[(&str, Scenario)] = &[
    ("context", |t, q| Box::pin(context(t, q))),
    ("result_tokens", |t, q| {
        Box::pin(crate::result_tokens::result_tokens(t, q))
    }),
    ("cold_start", |t, q| Box::pin(cold_start(t, q))),
    ("warm", |t, q| Box::pin(warm(t, q))),
    ("proxy", |t, q| Box::pin(proxy(t, q))),
    ("payloads", |t, q| Box::pin(payloads(t, q))),
    ("search", |t, q| Box::pin(search(t, q))),
    ("recovery", |t, q| Box::pin(recovery(t, q))),
    ("flood", |t, q| Box::pin(crate::flood::flood(t, q))),
    ("memory", |t, q| Box::pin(crate::scale::memory(t, q))),
    ("scale", |t, q| Box::pin(crate::scale::scale(t, q))),
    ("policy", |t, q| Box::pin(crate::policy::policy(t, q))),
    ("serve_sessions", |t, q| {
        Box::pin(crate::serve::sessions(t, q))
    }),
    ("serve_first", |t, q| {
        Box::pin(crate::serve_first::first_call(t, q))
    }),
    ("serve_stateless", |t, q| {
        Box::pin(crate::serve::stateless(t, q))
    }),
    ("preload", |t, q| Box::pin(crate::preload::preload(t, q))),
    ("trace", |t, q| Box::pin(crate::trace::trace(t, q))),
    ("remote", |t, q| Box::pin(crate::remote::remote(t, q))),
    ("typescript", |t, q| {
        Box::pin(crate::typescript::typescript(t, q))
    }),
];

fn tokens(bytes: usize) -> f64 {
    (bytes as f64 / 4.0).ceil()
}

async fn bridge_context(work: &Workdir) -> usize {
    let b = Bridge::start(work, &[]).await;
    let tools = b.client.peer().list_all_tools().await.expect("tools/list");
    let instructions = b
        .client
        .peer()
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    b.stop().await;
    serde_json::to_string(&json!({ "tools": tools }))
        .expect("json")
        .len()
        + instructions.len()
}

async fn context(t: &mut Table, _quick: bool) {
    let one = bridge_context(&Workdir::new(0)).await;
    let fifty = bridge_context(&Workdir::new(50)).await;
    let stub = Direct::tools_json(&[]).await.len();
    let per_server = Direct::tools_json(&["--extra-tools", "20", "--name", "s00"])
        .await
        .len();
    let direct_fifty = stub + 50 * (per_server - stub);
    t.single(
        "context: bridge tools/list + instructions, 1 server",
        "tokens",
        tokens(one),
        format!("{one} bytes; target <= 250 tokens"),
    );
    t.single(
        "context: bridge, 50 servers x 20 tools",
        "tokens",
        tokens(fifty),
        format!("{fifty} bytes (constant: {})", one == fifty),
    );
    t.single(
        "context: direct exposure, 1 stub server",
        "tokens",
        tokens(stub),
        format!("{stub} bytes"),
    );
    t.single(
        "context: direct exposure, 50 servers x 20 tools",
        "tokens",
        tokens(direct_fifty),
        format!(
            "{direct_fifty} bytes; saving {:.0}x",
            direct_fifty as f64 / fifty as f64
        ),
    );
}

async fn cold_start(t: &mut Table, quick: bool) {
    let runs = if quick { 3 } else { 10 };
    let (mut init, mut first) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let work = Workdir::new(0);
        let b = Bridge::start(&work, &[]).await;
        init.push(b.spawned.elapsed());
        let (out, err) = b.run("print(1)", &[], 60).await;
        assert!(!err && out.trim() == "1", "first run: {out}");
        first.push(b.spawned.elapsed());
        b.stop().await;
    }
    t.add(
        "cold start: spawn -> initialize answered",
        "ms",
        summarize(&ms(&init)),
        "",
    );
    t.add(
        "cold start: spawn -> first run_python result",
        "ms",
        summarize(&ms(&first)),
        "image present; target < 500 ms",
    );
}

async fn warm(t: &mut Table, quick: bool) {
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (idle, _) = b.rss_kib();
    for _ in 0..20 {
        b.run("print(1)", &[], 30).await;
    }
    let runs = if quick { 50 } else { 500 };
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let s = Instant::now();
        let (out, err) = b.run("print(1)", &[], 30).await;
        times.push(s.elapsed());
        assert!(!err && out.trim() == "1", "{out}");
    }
    t.single(
        "memory: bridge RSS idle (after initialize)",
        "MiB",
        idle as f64 / 1024.0,
        "target < 12 MiB",
    );
    t.add(
        "warm run_python('print(1)') round trip",
        "ms",
        summarize(&ms(&times)),
        "target median < 1 ms",
    );
    idle_cpu(t, &b).await;
    b.stop().await;
}

/// CPU used while the sandbox idles: the bridge, and the podman service it started (if any).
async fn idle_cpu(t: &mut Table, b: &Bridge) {
    let engine: Vec<u32> = children_of(b.pid)
        .into_iter()
        .filter(|(_, comm)| comm == "podman")
        .map(|(pid, _)| pid)
        .collect();
    let total = |pids: &[u32]| pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>();
    let (b0, e0, start) = (cpu_seconds(b.pid), total(&engine), Instant::now());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let secs = start.elapsed().as_secs_f64();
    let (bridge, service) = (
        (cpu_seconds(b.pid) - b0) / secs,
        (total(&engine) - e0) / secs,
    );
    let note = if engine.is_empty() {
        format!(
            "bridge alone (the engine service is not its child): {:.1}%",
            bridge * 100.0
        )
    } else {
        format!(
            "bridge {:.1}%, its podman service {:.1}%",
            bridge * 100.0,
            service * 100.0
        )
    };
    t.single(
        "CPU while the sandbox idles: bridge + its engine service (3 s)",
        "% of a CPU",
        (bridge + service) * 100.0,
        note,
    );
}

/// One block of sequential proxied calls, timed in the sandbox.
const PROXY_SEQ_CODE: &str = r#"
import json, time
seq = []
for _ in range(__N__):
    t = time.perf_counter_ns(); await mcp_stub.echo(text='x'); seq.append(time.perf_counter_ns() - t)
print('BENCH ' + json.dumps({'seq_ns': seq}))
"#;

const PROXY_CODE: &str = r#"
import asyncio, json, time
from mcp import runtime
N = __N__
par = []
for _ in range(__R__):
    t = time.perf_counter_ns()
    await asyncio.gather(*[mcp_stub.echo(text='x') for _ in range(100)])
    par.append(time.perf_counter_ns() - t)
ping = []
for _ in range(N):
    t = time.perf_counter_ns(); await runtime.ping(1); ping.append(time.perf_counter_ns() - t)
print('BENCH ' + json.dumps({'par_ns': par, 'ping_ns': ping}))
"#;

pub fn ns_to_us(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().unwrap_or(0.0) / 1e3)
        .collect()
}

pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

async fn proxy(t: &mut Table, quick: bool) {
    let (n, reps) = if quick { (500, 5) } else { (3000, 30) };
    // Direct and proxied calls alternate in blocks, so both see the same phases of a noisy
    // machine (its speed moves within minutes).
    let blocks = if quick { 5 } else { 10 };
    let direct = Direct::start().await;
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[]).await;
    let arg = json!({"text": "x"});
    for _ in 0..100 {
        direct.call("echo", arg.clone()).await;
    }
    let block_code = PROXY_SEQ_CODE.replace("__N__", &(n / blocks).to_string());
    b.measure(&PROXY_SEQ_CODE.replace("__N__", "100"), &["stub"])
        .await;
    let (mut dseq, mut seq) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut block_rates = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        for _ in 0..n / blocks {
            let s = Instant::now();
            direct.call("echo", arg.clone()).await;
            dseq.push(s.elapsed().as_secs_f64() * 1e6);
        }
        let block = ns_to_us(&b.measure(&block_code, &["stub"]).await["seq_ns"]);
        block_rates.push(1e6 / mean(&block));
        seq.extend(block);
    }
    let mut dpar = Vec::new();
    for _ in 0..reps {
        let s = Instant::now();
        let calls = (0..100).map(|_| direct.call("echo", arg.clone()));
        futures::future::join_all(calls).await;
        dpar.push(s.elapsed().as_secs_f64() * 1e3);
    }
    direct.stop().await;

    let code = PROXY_CODE
        .replace("__N__", &n.to_string())
        .replace("__R__", &reps.to_string());
    let m = b.measure(&code, &["stub"]).await;
    let par: Vec<f64> = ns_to_us(&m["par_ns"]).iter().map(|u| u / 1e3).collect();
    let ping = ns_to_us(&m["ping_ns"]);
    let in_order: Vec<String> = block_rates.iter().map(|r| format!("{r:.0}")).collect();
    eprintln!("proxied blocks, calls/s in order: {}", in_order.join(" "));
    block_rates.sort_by(f64::total_cmp);
    let (lo, hi) = (block_rates[0], block_rates[blocks - 1]);
    let (bs, ds) = (summarize(&seq), summarize(&dseq));
    t.add(
        "proxied echo from sandbox code, sequential",
        "µs/call",
        bs,
        "",
    );
    t.add(
        "direct rmcp client -> stub echo, sequential",
        "µs/call",
        ds,
        "",
    );
    t.single(
        "proxied calls/s, sequential (1e6 / mean)",
        "calls/s",
        1e6 / mean(&seq),
        format!(
            "direct: {:.0}/s; {blocks} blocks of {} calls: {lo:.0}-{hi:.0}/s; target >= 8,000/s",
            1e6 / mean(&dseq),
            n / blocks
        ),
    );
    t.single(
        "proxied echo ÷ direct rmcp client echo (medians)",
        "x",
        bs.median / ds.median,
        "",
    );
    t.single(
        "proxy overhead, bridge's share (median bridge - median direct)",
        "µs",
        bs.median - ds.median,
        format!(
            "ratio {:.1}x direct; target < 100 µs",
            bs.median / ds.median
        ),
    );
    let (bp, dp) = (summarize(&par), summarize(&dpar));
    t.add(
        "100 proxied echo calls via asyncio.gather",
        "ms",
        bp,
        format!("ratio {:.1}x direct", bp.median / dp.median),
    );
    t.add("100 direct calls via join_all", "ms", dp, "");
    t.add(
        "sandbox -> host ping (no MCP server)",
        "µs",
        summarize(&ping),
        "",
    );
    let calls = if quick { 1000 } else { 10_000 };
    let code = format!("for _ in range({calls}): await mcp_stub.echo(text='x')\nprint('BENCH 1')");
    b.measure(&code, &["stub"]).await;
    let (rss, _) = b.rss_kib();
    t.single(
        &format!("memory: bridge RSS after {calls} proxied calls"),
        "MiB",
        rss as f64 / 1024.0,
        "",
    );
    b.stop().await;
}

const SIZES: &[(&str, usize)] = &[("1 KiB", 1 << 10), ("1 MiB", 1 << 20), ("16 MiB", 16 << 20)];

async fn payloads(t: &mut Table, quick: bool) {
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[]).await;
    let direct = Direct::start().await;
    for (label, size) in SIZES {
        let reps = match (*size, quick) {
            (s, _) if s >= 16 << 20 => 5,
            (_, true) => 10,
            (s, false) if s >= 1 << 20 => 20,
            _ => 200,
        };
        let code = format!(
            "import json, time\nts = []\nfor _ in range({reps}):\n    t = time.perf_counter_ns()\n    \
             r = await mcp_stub.big(bytes={size})\n    ts.append(time.perf_counter_ns() - t)\n    \
             assert len(r) == {size}, len(r)\nprint('BENCH ' + json.dumps(ts))"
        );
        let got = ns_to_us(&b.measure(&code, &["stub"]).await);
        let mut d = Vec::new();
        for _ in 0..reps {
            let s = Instant::now();
            direct.call("big", json!({ "bytes": size })).await;
            d.push(s.elapsed().as_secs_f64() * 1e3);
        }
        let bs = summarize(&got.iter().map(|u| u / 1e3).collect::<Vec<_>>());
        let ds = summarize(&d);
        t.add(
            &format!("tool result {label}, proxied into the sandbox"),
            "ms",
            bs,
            format!(
                "direct {:.2} ms; ratio {:.1}x",
                ds.median,
                bs.median / ds.median
            ),
        );
        let mut prints = Vec::new();
        for _ in 0..reps.min(20) {
            let s = Instant::now();
            let (out, err) = b.run(&format!("print('x' * {size})"), &[], 60).await;
            prints.push(s.elapsed());
            assert!(!err && out.len() >= (*size).min(1000), "print {label}");
        }
        t.add(
            &format!("print {label}, round trip to the client"),
            "ms",
            summarize(&ms(&prints)),
            "cut to the output budget",
        );
    }
    let (_, peak) = b.rss_kib();
    t.single(
        "memory: bridge peak RSS (VmHWM) over the payload runs",
        "MiB",
        peak as f64 / 1024.0,
        "",
    );
    direct.stop().await;
    b.stop().await;
}

async fn search(t: &mut Table, quick: bool) {
    let work = Workdir::new(50);
    let b = Bridge::start(&work, &[]).await;
    let cache = work.path().join("state").join("tool-cache");
    let until = Instant::now() + Duration::from_secs(180);
    while std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0) < 51 {
        assert!(
            Instant::now() < until,
            "the tool cache was not filled in 180 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reps = if quick { 20 } else { 200 };
    let code = format!(
        "import json, time\nfrom mcp import runtime\nts = []\nfor _ in range({reps}):\n    \
         t = time.perf_counter_ns()\n    r = await runtime.search_tool_docs('calender evnts', limit=10)\n    \
         ts.append(time.perf_counter_ns() - t)\nassert len(r) == 10 and 'calendar' in r[0]['description'], r[0]\n\
         print('BENCH ' + json.dumps(ts))"
    );
    let inside = ns_to_us(&b.measure(&code, &[]).await);
    t.add(
        "search_tool_docs('calender evnts') over 1,020 tools, from sandbox code",
        "ms",
        summarize(&inside.iter().map(|u| u / 1e3).collect::<Vec<_>>()),
        "target < 5 ms",
    );
    b.stop().await;
}

async fn timed_recovery(b: &Bridge, code: &str, timeout: u64) -> Duration {
    let (out, err) = b.run(code, &[], timeout).await;
    assert!(err, "expected a failure: {out}");
    let s = Instant::now();
    let (out, err) = b.run("print(1)", &[], 60).await;
    assert!(!err && out.trim_end().ends_with('1'), "no recovery: {out}");
    s.elapsed()
}

async fn recovery(t: &mut Table, quick: bool) {
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[]).await;
    b.run("print(1)", &[], 60).await;
    let reps = if quick { 2 } else { 5 };
    let cases = [
        (
            "recovery after a timeout (interrupted)",
            "while True: pass",
            1,
        ),
        (
            "recovery after a timeout (uninterruptible: killed)",
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass",
            1,
        ),
        (
            "recovery after container death",
            "import os\nos._exit(137)",
            30,
        ),
    ];
    for (name, code, timeout) in cases {
        let mut v = Vec::new();
        for _ in 0..reps {
            v.push(timed_recovery(&b, code, timeout).await);
        }
        let s: Summary = summarize(&ms(&v));
        t.add(name, "ms", s, "error returned -> next result");
    }
    b.stop().await;
}
