//! Serving many agents (issue 25, point 5): N concurrent clients of one `serve --http` bridge,
//! N = 1, 4, 16, 64, each with its own token. Each client sets state (`x = <its id>`), makes
//! [`CALLS`] `run_python` calls that each proxy one `echo` of its own payload to the one shared
//! stub server, then reads its state back. Reported per N: throughput, p50/p99 per call,
//! containers at peak, the bridge's RSS, memory per sandbox, and the checked counts (every reply
//! answered, every reply its own client's payload, every state its own id).
//!
//! Two scenarios: `serve_sessions` (2025-11-25 clients: one MCP session, one sandbox) and
//! `serve_stateless` (2026-07-28: the sandbox handle passed back as `run_python`'s `sandbox`).
//! Each N runs on a fresh bridge, ended with SIGTERM; its exit time and leftovers are reported.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;

use crate::client::{rss_of, Workdir};
use crate::served::{cgroup_memory, containers_of, Agent, Served};
use crate::stats::{ms, summarize, Table};

/// Proxied calls per client.
const CALLS: usize = 50;
/// Client counts measured.
const CLIENTS: [usize; 4] = [1, 4, 16, 64];
/// Client counts measured with `BENCH_QUICK`.
const CLIENTS_QUICK: [usize; 2] = [1, 16];
/// How long SIGTERM may take before the bench calls it stuck (the drain bound is 10 s).
const EXIT_BOUND: Duration = Duration::from_secs(60);

/// The sessions scenario (2025-11-25 clients).
pub async fn sessions(t: &mut Table, quick: bool) {
    serve(t, quick, false).await;
}

/// The stateless scenario (2026-07-28 clients).
pub async fn stateless(t: &mut Table, quick: bool) {
    serve(t, quick, true).await;
}

/// What one client saw.
#[derive(Default)]
struct Seen {
    /// Each proxied call's round trip.
    times: Vec<Duration>,
    /// When its timed calls began and ended.
    span: Option<(Instant, Instant)>,
    /// The first call (state set, sandbox assigned) took.
    first: Duration,
    /// Replies that came back.
    answered: usize,
    /// Replies that were this client's own payload.
    own: usize,
    /// Replies carrying another client's payload.
    crossed: usize,
    /// Replies marked as errors.
    errors: usize,
    /// The state read back was its own id.
    state_ok: bool,
    /// The first wrong reply, for the report.
    wrong: Option<String>,
}

/// The measurements of one N.
struct Round {
    seen: Vec<Seen>,
    containers_peak: usize,
    rss_kib: (u64, u64),
    sandbox_mib: Option<(f64, f64)>,
    exit: Option<Duration>,
    left: usize,
}

async fn serve(t: &mut Table, quick: bool, stateless: bool) {
    let mode = if stateless { "stateless" } else { "sessions" };
    let counts: &[usize] = if quick { &CLIENTS_QUICK } else { &CLIENTS };
    let mut summary = vec![format!(
        "| clients ({mode}) | calls | calls/s | p50 ms | p99 ms | first call p50 ms | containers at peak | bridge RSS MiB (peak) | per sandbox MiB (RSS / usage) | checks |"
    ), "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|".to_string()];
    for &n in counts {
        let round = one_round(n, stateless).await;
        summary.push(report(t, mode, n, &round));
    }
    eprintln!("\n{}\n", summary.join("\n"));
}

async fn one_round(n: usize, stateless: bool) -> Round {
    let env = [
        ("MCP_BRIDGE_MAX_SANDBOXES", n.max(16).to_string()),
        ("MCP_BRIDGE_SANDBOXES_PER_TOKEN", "2".to_string()),
    ];
    let served = Served::start(Workdir::new(0), n, &env).await;
    let url = Arc::new(served.url.clone());
    // Everyone + this task: state set / timed calls done / measured.
    let gates = Arc::new([
        Barrier::new(n + 1),
        Barrier::new(n + 1),
        Barrier::new(n + 1),
    ]);
    let mut tasks = Vec::with_capacity(n);
    for (id, token) in served.tokens.iter().cloned().enumerate() {
        let (url, gates) = (url.clone(), gates.clone());
        tasks.push(tokio::spawn(async move {
            client(id, &url, &token, stateless, &gates).await
        }));
    }
    gates[0].wait().await; // every client's state set: its sandbox exists
    let mut containers_peak = containers_of(served.pid).len();
    gates[1].wait().await; // every client's timed calls done
    let ids = containers_of(served.pid);
    containers_peak = containers_peak.max(ids.len());
    let rss_kib = rss_of(served.pid);
    let mem: Vec<(f64, f64)> = ids
        .iter()
        .filter_map(|id| cgroup_memory(id))
        .map(|(rss, usage)| (mib(rss), mib(usage)))
        .collect();
    let sandbox_mib = (!mem.is_empty()).then(|| {
        let rss: Vec<f64> = mem.iter().map(|m| m.0).collect();
        let usage: Vec<f64> = mem.iter().map(|m| m.1).collect();
        (summarize(&rss).median, summarize(&usage).median)
    });
    gates[2].wait().await; // read back and close
    let mut seen = Vec::with_capacity(n);
    for task in tasks {
        seen.push(task.await.expect("client task"));
    }
    let pid = served.pid;
    let (exit, tail) = served.terminate(EXIT_BOUND).await;
    let left = containers_of(pid).len();
    if exit.is_none() || left > 0 {
        eprintln!(
            "serve (pid {pid}) after SIGTERM: exited {exit:?}, {left} containers left\n{tail}"
        );
    }
    Round {
        seen,
        containers_peak,
        rss_kib,
        sandbox_mib,
        exit,
        left,
    }
}

/// One client: connect, set `x`, wait, [`CALLS`] proxied echo calls, wait, read `x` back. A
/// failure is recorded, never a panic: the others wait at the gates for everyone.
async fn client(id: usize, url: &str, token: &str, stateless: bool, gates: &[Barrier; 3]) -> Seen {
    let mut seen = Seen::default();
    let mut agent = match Agent::connect(url, token, stateless).await {
        Ok(a) => Some(a),
        Err(e) => {
            seen.wrong = Some(format!("client {id} connect: {e}"));
            None
        }
    };
    if let Some(a) = agent.as_mut() {
        let began = Instant::now();
        let set = a
            .run(&format!("x = {id}\nprint('set', x)"), &["stub"])
            .await;
        seen.first = began.elapsed();
        match set {
            Ok((text, false)) if last_line(&text) == format!("set {id}") => {}
            other => {
                seen.wrong = Some(format!("client {id} set state: {other:?}"));
                agent = None;
            }
        }
    }
    gates[0].wait().await;
    let nonce = std::process::id();
    let start = Instant::now();
    for k in 0..CALLS {
        let Some(a) = agent.as_mut() else { break };
        let payload = format!("c{id}-k{k}-n{nonce}");
        let code = format!("r = await mcp_stub.echo(text='{payload}')\nprint(r['text'])");
        let s = Instant::now();
        let reply = a.run(&code, &["stub"]).await;
        seen.times.push(s.elapsed());
        let (text, err) = match reply {
            Ok(r) => r,
            Err(e) => {
                seen.wrong
                    .get_or_insert_with(|| format!("client {id} call {k}: {e}"));
                continue;
            }
        };
        seen.answered += 1;
        seen.errors += usize::from(err);
        let got = last_line(&text);
        if got == payload && !err {
            seen.own += 1;
        } else {
            if got.starts_with('c') && got.ends_with(&format!("-n{nonce}")) {
                seen.crossed += 1;
            }
            seen.wrong
                .get_or_insert_with(|| format!("client {id} call {k}: {text}"));
        }
    }
    seen.span = Some((start, Instant::now()));
    gates[1].wait().await;
    gates[2].wait().await;
    if let Some(mut a) = agent {
        match a.run("print(x)", &[]).await {
            Ok((text, false)) if last_line(&text) == id.to_string() => seen.state_ok = true,
            other => {
                seen.wrong
                    .get_or_insert_with(|| format!("client {id} state: {other:?}"));
            }
        }
        a.close().await;
    }
    seen
}

/// Adds one N's rows to the table; returns its line of the summary table.
fn report(t: &mut Table, mode: &str, n: usize, r: &Round) -> String {
    let all: Vec<Duration> = r
        .seen
        .iter()
        .flat_map(|s| s.times.iter().copied())
        .collect();
    let start = r.seen.iter().filter_map(|s| s.span.map(|x| x.0)).min();
    let end = r.seen.iter().filter_map(|s| s.span.map(|x| x.1)).max();
    let wall = match (start, end) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => f64::NAN,
    };
    let expected = n * CALLS;
    let sum = |f: fn(&Seen) -> usize| r.seen.iter().map(f).sum::<usize>();
    let (answered, own, crossed, errors) = (
        sum(|s| s.answered),
        sum(|s| s.own),
        sum(|s| s.crossed),
        sum(|s| s.errors),
    );
    let states = r.seen.iter().filter(|s| s.state_ok).count();
    let per_call = ms(&all);
    let p99 = percentile(&per_call, 0.99);
    let first = summarize(&ms(&r.seen.iter().map(|s| s.first).collect::<Vec<_>>()));
    let rate = all.len() as f64 / wall;
    let checks = format!(
        "answered {answered}/{expected}, own payload {own}/{expected}, crossed {crossed}, errors {errors}, state back {states}/{n}"
    );
    let label = format!("serve ({mode}), {n} clients");
    t.single(
        &format!("{label}: proxied run_python calls/s"),
        "calls/s",
        rate,
        format!("{expected} calls in {wall:.2} s"),
    );
    t.add(
        &format!("{label}: run_python with one proxied call, per call"),
        "ms",
        summarize(&per_call),
        format!("p99 {p99:.2} ms"),
    );
    t.add(
        &format!("{label}: first call (state set, sandbox assigned)"),
        "ms",
        first,
        "",
    );
    t.single(
        &format!("{label}: containers at peak"),
        "containers",
        r.containers_peak as f64,
        "sandboxes + warm pool",
    );
    t.single(
        &format!("{label}: bridge RSS after the calls"),
        "MiB",
        r.rss_kib.0 as f64 / 1024.0,
        format!("peak {:.1} MiB", r.rss_kib.1 as f64 / 1024.0),
    );
    let per_sandbox = match r.sandbox_mib {
        Some((rss, usage)) => {
            t.single(
                &format!("{label}: memory per sandbox (cgroup RSS, median)"),
                "MiB",
                rss,
                format!("usage incl. page cache {usage:.1} MiB"),
            );
            format!("{rss:.1} / {usage:.1}")
        }
        None => "n/a".to_string(),
    };
    let bad = (expected - own) + crossed + errors + (n - states);
    t.single(
        &format!("{label}: replies lost, crossed or wrong"),
        "count",
        bad as f64,
        checks.clone(),
    );
    let exit = match r.exit {
        Some(d) => format!("{:.0} ms", d.as_secs_f64() * 1e3),
        None => format!("not within {} s", EXIT_BOUND.as_secs()),
    };
    t.single(
        &format!("{label}: SIGTERM -> exit, clients gone"),
        "ms",
        r.exit.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
        format!("{} containers left", r.left),
    );
    if let Some(w) = r.seen.iter().find_map(|s| s.wrong.clone()) {
        eprintln!("  first wrong reply: {w}");
    }
    eprintln!("  SIGTERM -> exit: {exit}; containers left: {}", r.left);
    format!(
        "| {n} | {} | {rate:.0} | {:.2} | {p99:.2} | {:.0} | {} | {:.1} ({:.1}) | {per_sandbox} | {checks} |",
        all.len(),
        summarize(&per_call).median,
        first.median,
        r.containers_peak,
        r.rss_kib.0 as f64 / 1024.0,
        r.rss_kib.1 as f64 / 1024.0,
    )
}

/// The `q` quantile of `values` (nearest rank).
fn percentile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len().max(1) - 1) as f64 * q).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}
