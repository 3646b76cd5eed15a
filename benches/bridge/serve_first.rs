//! A new client's first call under `serve --http`, with the warm pool and without (issue 25,
//! point 3; goal: under 50 ms with the pool on this machine). One bridge per setting; clients
//! arrive one at a time, each a new stateless (2026-07-28) client whose first `run_python` is
//! `print(1)`. Before each client the bench waits until the bridge holds the sandboxes it should
//! (the pool refilled) and the newest has had time to start, so each first call meets the pool
//! as a new client would after a quiet moment.

use std::time::{Duration, Instant};

use crate::client::Workdir;
use crate::served::{containers_of, Agent, Served};
use crate::stats::{summarize, Table};

/// New clients per setting.
const CLIENTS: usize = 8;
/// New clients per setting with `BENCH_QUICK`.
const CLIENTS_QUICK: usize = 4;
/// Pool size when on.
const POOL: usize = 2;
/// How long a refilled pool sandbox is given to start before the next client comes.
const SETTLE: Duration = Duration::from_millis(2500);

/// The scenario: the first call's time with the pool on and off, in one run.
pub async fn first_call(t: &mut Table, quick: bool) {
    let clients = if quick { CLIENTS_QUICK } else { CLIENTS };
    let mut medians = Vec::new();
    for pool in [POOL, 0] {
        let times = one_setting(pool, clients).await;
        let s = summarize(&times);
        medians.push(s.median);
        t.add(
            &format!("serve: a new client's first print(1), warm pool {pool}"),
            "ms",
            s,
            format!("{clients} clients, one after another; call only (handshake not counted)"),
        );
    }
    t.single(
        "serve: first call, pool off / pool on",
        "x",
        medians[1] / medians[0],
        "ratio of the medians above",
    );
}

async fn one_setting(pool: usize, clients: usize) -> Vec<f64> {
    let env = [
        ("MCP_BRIDGE_WARM_POOL", pool.to_string()),
        ("MCP_BRIDGE_SANDBOXES_PER_TOKEN", (clients + 1).to_string()),
        ("MCP_BRIDGE_MAX_SANDBOXES", (clients + 1).to_string()),
    ];
    let served = Served::start(Workdir::new(0), 1, &env).await;
    let token = served.tokens[0].clone();
    let mut times = Vec::with_capacity(clients);
    let mut agents = Vec::with_capacity(clients);
    for i in 0..clients {
        let want = pool + i;
        let deadline = Instant::now() + Duration::from_secs(120);
        while containers_of(served.pid).len() < want && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(SETTLE).await;
        let mut agent = Agent::connect(&served.url, &token, true)
            .await
            .expect("connect");
        let began = Instant::now();
        let (text, is_error) = agent.run("print(1)", &[]).await.expect("first call");
        times.push(began.elapsed().as_secs_f64() * 1000.0);
        assert!(
            !is_error && text.lines().any(|l| l.trim() == "1"),
            "first call failed: {text}"
        );
        agents.push(agent);
    }
    for agent in agents {
        agent.close().await;
    }
    let _ = served.terminate(Duration::from_secs(60)).await;
    times
}
