//! Compact text: notice, stdout, then stderr and error sections only when non-empty.

use crate::report::{RunReport, RunStatus};

/// Renders `report` as plain text for the model.
pub fn render_compact(report: &RunReport) -> String {
    let mut out = String::with_capacity(report.stdout.len() + report.stderr.len() + 64);
    if let Some(notice) = &report.notice {
        out.push_str("[note] ");
        out.push_str(notice);
        out.push('\n');
    }
    out.push_str(&report.stdout);
    section(&mut out, "stderr", &report.stderr);
    if let Some(error) = &report.error {
        let title = match report.status {
            RunStatus::Timeout => "timeout",
            RunStatus::Cancelled => "cancelled",
            RunStatus::SandboxError => "sandbox error",
            RunStatus::Ok | RunStatus::Error => "error",
        };
        section(&mut out, title, error);
    }
    if out.is_empty() {
        out.push_str("(no output)");
    }
    out
}

fn section(out: &mut String, title: &str, body: &str) {
    if body.is_empty() {
        return;
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("--- ");
    out.push_str(title);
    out.push_str(" ---\n");
    out.push_str(body);
}
