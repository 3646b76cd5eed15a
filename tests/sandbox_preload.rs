//! Modules imported ahead (`MCP_BRIDGE_PRELOAD`) by a sandbox started ahead of use, against the
//! real entrypoint: a run sent at once waits for the imports and finds them in `sys.modules`
//! (not in its namespace); a module that fails leaves the sandbox working; a sandbox a run
//! started imports nothing ahead.

use crate::support::{process_app, req};

const PROBE: &str =
    "import sys\nprint([m for m in ('colorsys', 'fractions') if m in sys.modules], \
                     [m for m in ('colorsys', 'fractions') if m in globals()])";

#[tokio::test]
async fn a_prewarmed_sandbox_imports_ahead_and_a_run_sent_meanwhile_waits_for_it() {
    let (app, _rt) = process_app(&[("MCP_BRIDGE_PRELOAD", "no_such_module_x,colorsys,fractions")]);
    app.sandbox.prewarm();
    // Sent at once: it queues behind the start and the imports.
    let r = app.sandbox.run(req(PROBE, 30)).await;
    assert_eq!(r.stdout, "['colorsys', 'fractions'] []\n", "{r:?}");
    assert!(r.notice.is_none(), "imports ahead are not a reset: {r:?}");
    let r = app.sandbox.run(req("import no_such_module_x", 30)).await;
    assert!(
        r.error
            .as_deref()
            .unwrap_or("")
            .contains("no_such_module_x"),
        "{r:?}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_sandbox_a_run_started_imports_nothing_ahead() {
    let (app, _rt) = process_app(&[("MCP_BRIDGE_PRELOAD", "colorsys,fractions")]);
    let r = app.sandbox.run(req(PROBE, 30)).await;
    assert_eq!(r.stdout, "[] []\n", "{r:?}");
    app.shutdown().await;
}
