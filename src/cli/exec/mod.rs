//! `mcp-code-bridge exec`: one snippet run through the same path as `run_python`, for scripts
//! and CI; `output.rs` says where its output goes and which exit code it ends with.

mod output;

use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use crate::app::App;
use crate::audit::AuditLog;
use crate::config::Settings;
use crate::sandbox::{Progress, RunRequest};
use crate::shutdown;

pub use output::{
    exit_code, print, status, to_json, write_plain, EXIT_CANCELLED, EXIT_OK, EXIT_RAISED,
    EXIT_SANDBOX, EXIT_TIMEOUT, EXIT_USAGE,
};

/// Runs `code` once (`-`: read from stdin) and prints the report (`output.rs`); the exit
/// code says how it ended.
pub async fn exec(
    settings: Arc<Settings>,
    audit: Option<AuditLog>,
    code: String,
    servers: Vec<String>,
    timeout: Option<u64>,
    json: bool,
) -> ExitCode {
    let code = if code == "-" {
        let mut buf = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut buf) {
            eprintln!("mcp-code-bridge: reading code from stdin: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
        buf
    } else {
        code
    };
    let started = std::time::Instant::now();
    // A script waits for a missing image's whole build (its progress goes to the log).
    let mut patient = settings.as_ref().clone();
    patient.image_build_wait = std::time::Duration::from_secs(EXEC_IMAGE_BUILD_WAIT_SECS);
    let app = App::with_engine_audited(Arc::new(patient), audit);
    let capped = settings.timeout_capped_note(timeout);
    // `exec` has nobody to ask: calls that need approval fail closed.
    let scope = std::sync::Arc::new(crate::calls::RunScope::new(&code, None, None));
    let req = RunRequest {
        code,
        servers: servers.into(),
        timeout: settings.call_timeout(timeout),
        arrived: tokio::time::Instant::now(),
        cancel: app.ct.child_token(),
        progress: Progress::none(),
        scope,
    };
    let report = tokio::select! {
        r = app.sandbox.run(req) => r,
        _ = shutdown::signalled() => {
            app.shutdown().await;
            return ExitCode::from(EXIT_CANCELLED);
        }
    };
    let duration = started.elapsed();
    app.shutdown().await;
    let mut report = report;
    if let Some(note) = capped {
        report.add_notice(note);
    }
    ExitCode::from(print(&report, json, duration))
}

/// How long `exec` waits for a missing image's build (MCP_BRIDGE_IMAGE_BUILD_WAIT is for MCP
/// clients, which give up on a request after about a minute).
const EXEC_IMAGE_BUILD_WAIT_SECS: u64 = 3 * 3600;
