//! Compact text: notice, stdout, then stderr, files and error sections only when non-empty.

use crate::outbox::human;
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
    section(&mut out, "files", &files(report));
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

/// One line per delivered file (its host path, for clients that do not show resource links),
/// then one per file refused or picture not shown.
fn files(report: &RunReport) -> String {
    let mut text = String::new();
    for f in &report.files {
        text.push_str(&format!(
            "{} ({}, {})\n",
            f.path.display(),
            human(f.size),
            f.mime
        ));
    }
    for why in &report.files_refused {
        text.push_str(why);
        text.push('\n');
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::SavedFile;

    #[test]
    fn files_are_listed_with_their_host_paths() {
        let report = RunReport {
            stdout: "done\n".into(),
            files: vec![SavedFile {
                name: "plot.png".into(),
                path: "/s/outbox/1/plot.png".into(),
                uri: "file:///s/outbox/1/plot.png".into(),
                mime: "image/png".into(),
                size: 2048,
                picture: None,
            }],
            files_refused: vec!["big.bin was not delivered: too large".into()],
            ..Default::default()
        };
        assert_eq!(
            render_compact(&report),
            "done\n--- files ---\n/s/outbox/1/plot.png (2 KiB, image/png)\n\
             big.bin was not delivered: too large\n"
        );
    }
}
