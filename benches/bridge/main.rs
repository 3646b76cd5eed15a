//! The bridge benchmark: `cargo bench --bench bridge` (README, "Benchmarks").
//!
//! Drives the release `mcp-code-bridge run` through an rmcp client over stdio, on the real
//! container engine, and compares proxied tool calls with a direct rmcp client calling the
//! same stub server in the same run. Prints a Markdown table and writes
//! `target/bench/results.json` (`BENCH_OUT` overrides). `BENCH_QUICK=1` shrinks the samples.
//!
//! `BENCH_BASELINE=/path/to/an/older/mcp-code-bridge` measures that binary too, in the same
//! run: `BENCH_ROUNDS` rounds (default 3), each running every chosen scenario once on each
//! binary, the two alternating (which goes first flips every round) so the machine's slow and
//! fast phases fall on both; then a table of each row's median over the rounds for both, and
//! their ratio.

mod client;
mod flood;
mod machine;
mod policy;
mod preload;
mod remote;
mod result_tokens;
#[path = "../../tests/support/rmcp_http.rs"]
mod rmcp_http;
mod scale;
mod scenarios;
mod serve;
mod serve_first;
mod served;
mod stats;
mod trace;
mod typescript;

use std::path::PathBuf;
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
    let baseline = std::env::var_os("BENCH_BASELINE").map(PathBuf::from);
    if let Some(b) = &baseline {
        assert!(b.is_file(), "BENCH_BASELINE: no file at {}", b.display());
    }
    let rounds: usize = match std::env::var("BENCH_ROUNDS") {
        Ok(v) => v.parse().expect("BENCH_ROUNDS: a number"),
        Err(_) if baseline.is_some() => 3,
        Err(_) => 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let began = Instant::now();
    let chosen: Vec<_> = scenarios::ALL
        .iter()
        .filter(|(name, _)| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())))
        .collect();
    // Per build (baseline, current): one table per round.
    let mut runs: [Vec<Table>; 2] = [Vec::new(), Vec::new()];
    let (mut before, mut after) = (Table::default(), Table::default());
    runtime.block_on(async {
        machine::check(&mut before, "before");
        for round in 0..rounds {
            runs.iter_mut().for_each(|r| r.push(Table::default()));
            for (name, scenario) in &chosen {
                let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for build in order {
                    let bin = match (build, &baseline) {
                        (0, None) => continue,
                        (0, Some(b)) => b.clone(),
                        _ => client::BRIDGE_BIN.into(),
                    };
                    let label = ["baseline", "current"][build];
                    eprintln!("== {name} ({label}, round {})", round + 1);
                    client::use_bridge(&bin);
                    scenario(&mut runs[build][round], quick).await;
                }
            }
        }
        machine::check(&mut after, "after");
    });
    let [base_runs, current_runs] = runs;
    let mut json = serde_json::json!({});
    let md = if baseline.is_some() {
        let mut checks = before;
        checks.extend(after);
        let compared = stats::compare(&base_runs, &current_runs);
        json["comparison"] = stats::compared_json(&compared);
        json["baseline_runs"] = base_runs.iter().map(Table::json).collect();
        json["current_runs"] = current_runs.iter().map(Table::json).collect();
        json["checks"] = checks.json();
        format!(
            "{}\n{}",
            stats::compared_markdown(&compared, rounds),
            checks.markdown()
        )
    } else {
        let mut table = before;
        for run in current_runs {
            table.extend(run);
        }
        table.extend(after);
        json = table.json();
        table.markdown()
    };
    println!("{md}");
    let out = std::env::var("BENCH_OUT").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/bench/results.json").into()
    });
    if let Some(dir) = std::path::Path::new(&out).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    json["seconds"] = began.elapsed().as_secs_f64().into();
    json["quick"] = quick.into();
    json["rounds"] = rounds.into();
    if let Some(b) = &baseline {
        json["baseline"] = b.display().to_string().into();
    }
    std::fs::write(&out, serde_json::to_string_pretty(&json).expect("json")).expect("write");
    eprintln!("wrote {out} in {:.0} s", began.elapsed().as_secs_f64());
}
