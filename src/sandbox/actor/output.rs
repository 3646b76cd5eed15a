//! Turning an entrypoint result into a [`RunReport`], enforcing the output limit on the host.
//!
//! The entrypoint keeps the first 3/4 and the last 1/4 of `output_limit` characters of each
//! stream and counts what it dropped; the host puts a marker at the cut and, since the
//! entrypoint is untrusted, cuts again anything still over the limit.

use crate::report::{RunReport, RunStatus, SystemExit};
use crate::sandbox::protocol::ResultFrame;

/// Shapes one result frame into a report, with cut markers.
pub fn shape_result(frame: ResultFrame, limit: usize) -> RunReport {
    let exit = match frame.exit_code {
        Some(code) if !frame.ok => Some(SystemExit {
            // The entrypoint sends the low byte already; the host does not trust it to.
            code: code.rem_euclid(256) as u8,
            message: frame.exit_message.map(|m| bounded(m, limit)),
        }),
        _ => None,
    };
    let mut report = RunReport {
        files: frame.files.files,
        files_refused: frame.files.refused,
        exit,
        status: if frame.ok {
            RunStatus::Ok
        } else {
            RunStatus::Error
        },
        stdout: bounded(mark_cut(frame.stdout, frame.stdout_dropped, limit), limit),
        stderr: bounded(mark_cut(frame.stderr, frame.stderr_dropped, limit), limit),
        error: frame.error.map(|e| bounded(e, limit)),
        ..Default::default()
    };
    if frame.dropped_frames > 0 {
        report.add_notice(dropped_notice(frame.dropped_frames));
    }
    report
}

/// The notice of a result after which the host dropped `n` frames of the sandbox.
pub fn dropped_notice(n: u64) -> String {
    format!(
        "{n} frames dropped: the sandbox sent frames the bridge did not ask for or that were \
         over a limit (sandbox code writing to the frame channel?)"
    )
}

/// The marker placed where text was dropped.
pub fn marker(dropped: u64) -> String {
    format!(
        "\n[... {dropped} characters cut here by the output limit (MCP_BRIDGE_MAX_OUTPUT) ...]\n"
    )
}

/// Inserts the marker where the entrypoint cut `text` (after the first 3/4 of `limit` chars).
fn mark_cut(text: String, dropped: u64, limit: usize) -> String {
    if dropped == 0 {
        return text;
    }
    let head = limit * 3 / 4;
    let at = text
        .char_indices()
        .nth(head)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    let mut out = String::with_capacity(text.len() + 80);
    out.push_str(&text[..at]);
    out.push_str(&marker(dropped));
    out.push_str(&text[at..]);
    out
}

/// Cuts `text` to about `limit` characters (head 3/4, tail 1/4) if a marker-aware limit is exceeded.
pub fn bounded(text: String, limit: usize) -> String {
    let slack = 200; // room for one marker
    let count = text.chars().count();
    if count <= limit + slack {
        return text;
    }
    let head = limit * 3 / 4;
    let tail = limit - head;
    let head_end = text
        .char_indices()
        .nth(head)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    let tail_start = text
        .char_indices()
        .nth(count - tail)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    let dropped = (count - head - tail) as u64;
    format!(
        "{}{}{}",
        &text[..head_end],
        marker(dropped),
        &text[tail_start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_goes_at_the_entrypoint_cut() {
        let frame = ResultFrame {
            ok: true,
            stdout: format!("{}{}", "a".repeat(75), "z".repeat(25)),
            stdout_dropped: 900,
            ..Default::default()
        };
        let r = shape_result(frame, 100);
        assert!(r.stdout.starts_with(&"a".repeat(75)));
        assert!(r.stdout.contains("900 characters cut"));
        assert!(r.stdout.ends_with(&"z".repeat(25)));
    }

    #[test]
    fn host_cuts_what_an_untrusted_entrypoint_did_not() {
        let big = "é".repeat(10_000);
        let out = bounded(big, 1000);
        assert!(out.chars().count() < 1300);
        assert!(out.contains("9000 characters cut"), "{out}");
        let small = "ok".to_string();
        assert_eq!(bounded(small.clone(), 1000), small);
    }

    #[test]
    fn a_run_returns_at_most_three_output_limits_whatever_the_entrypoint_sends() {
        let huge = || "x".repeat(50_000);
        let r = shape_result(
            ResultFrame {
                ok: false,
                stdout: huge(),
                stderr: huge(),
                error: Some(huge()),
                stdout_dropped: 7,
                ..Default::default()
            },
            1000,
        );
        let total = r.stdout.len() + r.stderr.len() + r.error.as_deref().map_or(0, str::len);
        assert!(total <= 3 * (1000 + 200), "{total} bytes");
    }

    #[test]
    fn errors_map_to_status() {
        let r = shape_result(
            ResultFrame {
                ok: false,
                error: Some("Traceback".into()),
                ..Default::default()
            },
            100,
        );
        assert_eq!(r.status, RunStatus::Error);
        assert_eq!(r.error.as_deref(), Some("Traceback"));
        assert_eq!(r.exit, None);
    }

    #[test]
    fn a_system_exit_keeps_the_error_and_carries_its_status() {
        let r = shape_result(
            ResultFrame {
                ok: false,
                error: Some("SystemExit: 7".into()),
                exit_code: Some(263),
                ..Default::default()
            },
            100,
        );
        assert_eq!(r.status, RunStatus::Error);
        assert_eq!(r.error.as_deref(), Some("SystemExit: 7"));
        let exit = SystemExit {
            code: 7,
            message: None,
        };
        assert_eq!(r.exit, Some(exit));
        assert_eq!(
            crate::format::structured(&r),
            serde_json::json!({"status": "error", "error": "SystemExit: 7"})
        );
    }
}
