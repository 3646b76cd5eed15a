//! Issue 33's measures of typed stubs and the run trace: the trace's token estimate against a
//! real BPE count (OpenAI's o200k_base through tiktoken-rs, offline; Claude's current tokenizer
//! is not public), the trace's cost per call in process, stub generation for 50 servers × 20
//! tools, and `help()` on a proxy in the sandbox.

use std::time::{Duration, Instant};

use mcp_code_bridge::calls::{json_bytes, Trace, TracedCall};
use rmcp::model::Tool;
use serde_json::{json, Value};

use crate::client::{Bridge, Direct, Workdir};
use crate::stats::Table;

/// The calls the estimate is checked on: (tool, arguments), a mix of sizes and shapes.
fn calls() -> Vec<(&'static str, Value)> {
    let order = json!({"id": 1042, "items": [{"sku": "A-17", "qty": 3, "price": 9.5},
        {"sku": "B-02", "qty": 1, "price": 120.0}], "ship": {"city": "Oslo", "eta_days": 2}});
    vec![
        (
            "echo",
            json!({"text": "order 1042: 3 items, shipped express; ETA 2 days"}),
        ),
        ("echo", json!({"text": order.to_string()})),
        ("add", json!({"a": 17.5, "b": 24.5})),
        (
            "echo",
            json!({"text": "lorem ipsum dolor sit amet, ".repeat(40)}),
        ),
        ("whoami", json!({})),
    ]
}

/// The `trace` scenario.
pub async fn trace(t: &mut Table, quick: bool) {
    estimate(t).await;
    record_cost(t, quick);
    stub_generation(t, quick).await;
    help_latency(t, quick).await;
}

/// The trace's `direct_estimate` against the o200k_base count of what a direct client reads:
/// the stub's `tools/list`, each call's arguments and each result as the server sends it.
async fn estimate(t: &mut Table) {
    let bpe = tiktoken_rs::o200k_base().expect("o200k_base ships inside tiktoken-rs");
    let count = |s: &str| bpe.encode_with_special_tokens(s).len();
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[]).await;
    let mut code = String::new();
    for (tool, args) in calls() {
        code.push_str(&format!(
            "await mcp_stub.{tool}(**__import__('json').loads({:?}))\n",
            args.to_string()
        ));
    }
    let r = b.call(&code, &["stub"], 60).await;
    b.stop().await;
    assert_ne!(r.is_error, Some(true), "trace bench code failed: {r:?}");
    let trace = r
        .meta
        .as_ref()
        .and_then(|m| m.0.get("mcp-code-bridge/trace"))
        .cloned()
        .expect("the result carries a trace");
    let estimated = trace["tokens"]["direct_estimate"]
        .as_f64()
        .expect("estimate");
    let direct = Direct::start().await;
    let mut real = count(&Direct::tools_json(&[]).await);
    for (tool, args) in calls() {
        real += count(&args.to_string());
        let result = direct.call(tool, args).await;
        let text: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        real += count(&text.join("\n"));
    }
    direct.stop().await;
    t.single(
        "trace: direct-call tokens, estimate ÷ o200k_base count",
        "ratio",
        estimated / real as f64,
        format!("estimate {estimated}, counted {real} (goal: within 10%)"),
    );
}

/// `Trace::record` with the sizes the dispatcher measures, per call.
fn record_cost(t: &mut Table, quick: bool) {
    let n = if quick { 20_000 } else { 200_000 };
    let args = json!({"text": "order 1042: 3 items, shipped express"})
        .as_object()
        .cloned()
        .expect("object");
    let result = json!({"content": "Echo: order 1042: 3 items, shipped express"});
    // A fresh trace every 100 calls, as runs have (its list keeps the first 100).
    let mut trace = Trace::default();
    let began = Instant::now();
    for i in 0..n {
        if i % 100 == 0 {
            trace = Trace::default();
        }
        let start = Instant::now();
        trace.record(TracedCall {
            server: "stub".to_string(),
            tool: "echo".to_string(),
            start: Duration::from_micros(i as u64),
            duration: start.elapsed(),
            bytes_in: json_bytes(&args),
            bytes_out: json_bytes(&result),
            outcome: "ok",
        });
    }
    let per = began.elapsed().as_secs_f64() * 1e6 / n as f64;
    std::hint::black_box(&trace);
    t.single(
        "trace: cost per call in process",
        "µs",
        per,
        "names copied, argument and result sizes measured, recorded (goal ≤ 2 µs)",
    );
}

/// `stubs()` for 50 servers of 20 tools each (the stub's extra tools).
async fn stub_generation(t: &mut Table, quick: bool) {
    let listed: Value =
        serde_json::from_str(&Direct::tools_json(&["--extra-tools", "20", "--name", "s00"]).await)
            .expect("tools json");
    let tools: Vec<Tool> = serde_json::from_value(listed["tools"].clone()).expect("tools");
    let rounds = if quick { 3 } else { 20 };
    let mut best = f64::MAX;
    let mut bytes = 0;
    for _ in 0..rounds {
        let began = Instant::now();
        bytes = 0;
        for s in 0..50 {
            bytes += mcp_code_bridge::upstream::stubs::stubs(&format!("s{s:02}"), &tools).len();
        }
        best = best.min(began.elapsed().as_secs_f64() * 1e3);
    }
    t.single(
        "stubs: 50 servers × 20 tools, generated",
        "ms",
        best,
        format!(
            "{} tools a server; {bytes} bytes of stubs in all",
            tools.len()
        ),
    );
}

/// `help(mcp_stub.add)` in the sandbox: the proxy's real signature and docstring rendered.
async fn help_latency(t: &mut Table, quick: bool) {
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[]).await;
    let n = if quick { 20 } else { 200 };
    let code = format!(
        "import io, contextlib, time, json\n\
         t = []\n\
         for _ in range({n}):\n\
         \x20   s = time.perf_counter()\n\
         \x20   with contextlib.redirect_stdout(io.StringIO()):\n\
         \x20       help(mcp_stub.add)\n\
         \x20   t.append(time.perf_counter() - s)\n\
         t.sort()\n\
         print('BENCH ' + json.dumps({{'median_ms': t[len(t) // 2] * 1e3}}))"
    );
    let got = b.measure(&code, &["stub"]).await;
    b.stop().await;
    t.single(
        "stubs: help(mcp_stub.add) in the sandbox",
        "ms",
        got["median_ms"].as_f64().unwrap_or(f64::NAN),
        format!("median of {n}"),
    );
}
