//! The bridge benchmark: `cargo bench --bench bridge` (README, "Benchmarks").
//!
//! Drives the release `mcp-code-bridge run` through an rmcp client over stdio, on the real
//! container engine, and compares proxied tool calls with a direct rmcp client calling the
//! same stub server in the same run. Prints a Markdown table and writes
//! `target/bench/results.json` (`BENCH_OUT` overrides). `BENCH_QUICK=1` shrinks the samples.

mod client;
mod machine;
mod result_tokens;
mod scenarios;
mod stats;

use std::time::Instant;

use stats::Table;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not: then only say how
    // to run it (it needs a container engine and minutes). Other arguments filter scenarios.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("bridge benchmark: run it with `cargo bench --bench bridge`");
        return;
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let began = Instant::now();
    let table = runtime.block_on(async {
        let mut table = Table::default();
        machine::check(&mut table, "before");
        for (name, scenario) in scenarios::ALL {
            if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
                continue;
            }
            eprintln!("== {name}");
            scenario(&mut table, quick).await;
        }
        machine::check(&mut table, "after");
        table
    });
    let md = table.markdown();
    println!("{md}");
    let out = std::env::var("BENCH_OUT").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench/results.json").into()
    });
    if let Some(dir) = std::path::Path::new(&out).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut json = table.json();
    json["seconds"] = began.elapsed().as_secs_f64().into();
    json["quick"] = quick.into();
    std::fs::write(&out, serde_json::to_string_pretty(&json).expect("json")).expect("write");
    eprintln!("wrote {out} in {:.0} s", began.elapsed().as_secs_f64());
}
