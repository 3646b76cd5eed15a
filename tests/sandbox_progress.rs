//! A long cell's output reported as progress while it runs, against the real entrypoint.

use std::time::Duration;

use mcp_code_bridge::report::RunStatus;
use mcp_code_bridge::sandbox::Progress;

use crate::support::{process_app, req};

#[tokio::test]
async fn a_long_cell_reports_its_newest_output_line_at_the_interval() {
    let (app, _rt) = process_app(&[("MCP_BRIDGE_PROGRESS_INTERVAL", "300ms")]);
    app.sandbox.run(req("pass", 10)).await; // warm: no "starting the sandbox"
    let (progress, mut rx) = Progress::channel();
    let mut r = req(
        "import sys, time\nfor i in range(8):\n    print('step', i)\n    time.sleep(0.25)\nprint('tick', file=sys.stderr)\ntime.sleep(0.5)",
        20,
    );
    r.progress = progress;
    let report = app.sandbox.run(r).await;
    assert_eq!(report.status, RunStatus::Ok, "{report:?}");
    let mut heard = Vec::new();
    while let Ok(m) = rx.try_recv() {
        heard.push(m);
    }
    // About 2.5 s at 300 ms: at least 5 reports, in order, each "<seconds> s: <last line>".
    assert!(heard.len() >= 5, "{heard:?}");
    let secs: Vec<f64> = heard
        .iter()
        .map(|m| {
            m.split(' ')
                .next()
                .and_then(|s| s.parse().ok())
                .expect("seconds first")
        })
        .collect();
    assert!(secs.windows(2).all(|w| w[0] <= w[1]), "{heard:?}");
    assert!(heard.iter().any(|m| m.ends_with(" s: step 3")), "{heard:?}");
    assert!(
        heard.last().expect("one").ends_with(" s: tick"),
        "stderr counts too: {heard:?}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_short_cell_reports_nothing_even_when_progress_is_wanted() {
    let (app, _rt) = process_app(&[]);
    app.sandbox.run(req("pass", 10)).await;
    let (progress, mut rx) = Progress::channel();
    let mut r = req("print('quick')", 10);
    r.progress = progress;
    assert_eq!(app.sandbox.run(r).await.stdout, "quick\n");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(rx.try_recv().is_err());
    app.shutdown().await;
}
