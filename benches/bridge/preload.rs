//! The first cell importing the data stack, with and without `MCP_BRIDGE_PRELOAD`
//! (benches/RESULTS.md, "Preload"): after a prewarmed start left to settle, and sent at once
//! (then it waits for the imports ahead). Rounds alternate which variant goes first, so the
//! machine's slow and fast phases fall on both.

use std::time::{Duration, Instant};

use crate::client::{Bridge, Workdir};
use crate::stats::{ms, summarize, Table};

/// What the setting names in the "with" variant.
const MODULES: &str = "pandas,numpy,matplotlib.pyplot";

/// The first cell: the imports timed inside, and whether they were loaded before it.
const CELL: &str = r#"
import sys, time, json
loaded = 'pandas' in sys.modules and 'matplotlib.pyplot' in sys.modules
t = time.perf_counter()
import pandas as pd
import matplotlib.pyplot as plt
print('BENCH ' + json.dumps({'import_s': time.perf_counter() - t, 'loaded': loaded}))
"#;

/// The preload scenario.
pub async fn preload(t: &mut Table, quick: bool) {
    let rounds = if quick { 5 } else { 9 };
    // Time for the prewarmed sandbox to start and finish its imports on a busy machine.
    let settle = Duration::from_secs(10);
    let [mut trip, mut inside, mut at_once]: [[Vec<Duration>; 2]; 3] = Default::default();
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for with in order {
            let env: &[(&str, &str)] = if with == 1 {
                &[("MCP_BRIDGE_PRELOAD", MODULES)]
            } else {
                &[]
            };
            let work = Workdir::new(0);
            let b = Bridge::start(&work, env).await;
            tokio::time::sleep(settle).await;
            let s = Instant::now();
            let v = b.measure(CELL, &[]).await;
            trip[with].push(s.elapsed());
            inside[with].push(import_time(&v));
            assert_eq!(v["loaded"], with == 1, "imported ahead: {v}");
            b.stop().await;
            // Sent at once: the run waits for the start (and, with the setting, the imports).
            let work = Workdir::new(0);
            let b = Bridge::start(&work, env).await;
            let v = b.measure(CELL, &[]).await;
            at_once[with].push(b.spawned.elapsed());
            assert_eq!(v["loaded"], with == 1, "imported ahead: {v}");
            b.stop().await;
        }
    }
    let names = ["without preload", "with preload"];
    for (with, name) in names.iter().enumerate() {
        t.add(
            &format!("preload: first cell (pandas + pyplot) round trip, prewarmed, {name}"),
            "ms",
            summarize(&ms(&trip[with])),
            "the sandbox started and left 10 s before the call",
        );
        t.add(
            &format!("preload: the two imports inside that cell, {name}"),
            "ms",
            summarize(&ms(&inside[with])),
            "issue 25: ~600 ms without",
        );
        t.add(
            &format!("preload: spawn -> that first cell's result, called at once, {name}"),
            "ms",
            summarize(&ms(&at_once[with])),
            "the call waits for the start (and the imports ahead)",
        );
    }
}

fn import_time(v: &serde_json::Value) -> Duration {
    Duration::from_secs_f64(v["import_s"].as_f64().expect("import_s in the BENCH line"))
}
