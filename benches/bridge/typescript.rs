//! The `typescript` scenario: a warm `run_typescript('console.log(1)')` beside a warm
//! `run_python('print(1)')` in the same bridge and sandbox, the two interleaved so that the
//! machine's slow and fast phases fall on both (issue 34 point 1). Needs an image with node
//! (recipe 5; `MCP_BRIDGE_IMAGE` picks another).

use std::time::Instant;

use crate::client::{Bridge, Workdir};
use crate::stats::{ms, summarize, Table};

/// Warm round trips of both tools, interleaved.
pub async fn typescript(t: &mut Table, quick: bool) {
    let work = Workdir::new(0);
    let b = Bridge::start(&work, &[("MCP_BRIDGE_LANGUAGES", "python,typescript")]).await;
    for _ in 0..20 {
        b.run_tool("run_python", "print(1)").await;
        let (out, err) = b.run_tool("run_typescript", "console.log(1)").await;
        assert!(!err && out.trim() == "1", "run_typescript: {out}");
    }
    let runs = if quick { 50 } else { 500 };
    let (mut py, mut js) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let s = Instant::now();
        let (out, err) = b.run_tool("run_python", "print(1)").await;
        py.push(s.elapsed());
        assert!(!err && out.trim() == "1", "{out}");
        let s = Instant::now();
        let (out, err) = b.run_tool("run_typescript", "console.log(1)").await;
        js.push(s.elapsed());
        assert!(!err && out.trim() == "1", "{out}");
    }
    t.add(
        "warm run_python('print(1)') round trip (beside TypeScript)",
        "ms",
        summarize(&ms(&py)),
        "same bridge and sandbox as the next row",
    );
    t.add(
        "warm run_typescript('console.log(1)') round trip",
        "ms",
        summarize(&ms(&js)),
        "node child of the entrypoint; types stripped, cell rewritten",
    );
    b.stop().await;
}
