//! `mcp-code-bridge exec`: where a finished run's output goes and the process's exit code.
//!
//! The program's stdout goes to stdout, byte for byte; its stderr, its traceback and the
//! bridge's own messages go to stderr. `--json` puts one object on stdout instead
//! ([`to_json`]). The exit code says how the run ended ([`exit_code`]; GUIDE.md, "exec in
//! CI"). Runs nothing itself: `main.rs` runs the code and hands the report here.

use std::io::{self, Write};
use std::time::Duration;

use serde_json::json;

use crate::report::{RunReport, RunStatus};

/// The code ran to the end, or called `sys.exit()` / `sys.exit(0)`.
pub const EXIT_OK: u8 = 0;
/// The code raised an exception (or `sys.exit("message")`, as `python3` does), or a server
/// named in `--servers` could not be loaded.
pub const EXIT_RAISED: u8 = 1;
/// A usage error (clap's own code) or a bad `MCP_BRIDGE_*` value: the code never ran.
pub const EXIT_USAGE: u8 = 2;
/// The run hit its timeout (GNU `timeout`'s code).
pub const EXIT_TIMEOUT: u8 = 124;
/// The sandbox or the engine failed: no engine, no image, the sandbox died, output could not
/// be written (the code `podman run` and `docker run` use for their own failures).
pub const EXIT_SANDBOX: u8 = 125;
/// Interrupted (SIGINT/SIGTERM) or cancelled: 128 + SIGINT, as shells report it.
pub const EXIT_CANCELLED: u8 = 130;

/// The exit code for `report`: see the constants; `sys.exit(n)` gives n (its low byte).
pub fn exit_code(report: &RunReport) -> u8 {
    match report.status {
        RunStatus::Ok => EXIT_OK,
        RunStatus::Error => report.exit.as_ref().map_or(EXIT_RAISED, |e| e.code),
        RunStatus::Timeout => EXIT_TIMEOUT,
        RunStatus::Cancelled => EXIT_CANCELLED,
        RunStatus::SandboxError => EXIT_SANDBOX,
    }
}

/// The `status` of `--json`: `ok`, `error` (raised), `exit` (`sys.exit(n)`, n ≠ 0), `timeout`,
/// `cancelled` or `sandbox_error`. It tells an `exit` 124 from a timeout, say.
pub fn status(report: &RunReport) -> &'static str {
    match (report.status, &report.exit) {
        (RunStatus::Error, Some(e)) if e.code == 0 => "ok",
        (RunStatus::Error, Some(_)) => "exit",
        (RunStatus::Ok, _) => "ok",
        (RunStatus::Error, None) => "error",
        (RunStatus::Timeout, _) => "timeout",
        (RunStatus::Cancelled, _) => "cancelled",
        (RunStatus::SandboxError, _) => "sandbox_error",
    }
}

/// The error text as `exec` shows it: a `SystemExit`'s traceback is left out, as `python3`
/// leaves it out (only a message argument is shown).
fn error_text(report: &RunReport) -> Option<&str> {
    match &report.exit {
        Some(e) if report.status == RunStatus::Error => e.message.as_deref(),
        _ => report.error.as_deref(),
    }
}

/// The `--json` object: every key always present (`error` and `notice` may be null),
/// `duration` in seconds, `files` the files saved on the host (`name`, `path`, `uri`, `mime`,
/// `size`) and `files_refused` why others were not.
pub fn to_json(report: &RunReport, duration: Duration) -> serde_json::Value {
    json!({
        "status": status(report),
        "exit_code": exit_code(report),
        "stdout": report.stdout,
        "stderr": report.stderr,
        "error": error_text(report),
        "notice": report.notice,
        "duration": duration.as_secs_f64(),
        "files": report.files,
        "files_refused": report.files_refused,
    })
}

/// Writes the run's program output to `out` and everything else to `err`.
///
/// # Errors
/// The first write error on either stream.
pub fn write_plain(
    report: &RunReport,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<()> {
    let stdout = out
        .write_all(report.stdout.as_bytes())
        .and_then(|()| out.flush());
    let mut text = String::new();
    if let Some(notice) = &report.notice {
        text.push_str(&format!("[note] {notice}\n"));
    }
    text.push_str(&report.stderr);
    let has_files = !(report.files.is_empty() && report.files_refused.is_empty());
    if has_files && !(text.is_empty() || text.ends_with('\n')) {
        text.push('\n');
    }
    for f in &report.files {
        text.push_str(&format!(
            "mcp-code-bridge: saved {} ({}, {})\n",
            f.path.display(),
            crate::outbox::human(f.size),
            f.mime
        ));
    }
    for why in &report.files_refused {
        text.push_str(&format!(
            "mcp-code-bridge: {}\n",
            crate::cli::safe_line::safe_line(why)
        ));
    }
    if let Some(error) = error_text(report) {
        if !(text.is_empty() || text.ends_with('\n')) {
            text.push('\n');
        }
        match report.status {
            RunStatus::Timeout => text.push_str("mcp-code-bridge: timeout: "),
            RunStatus::Cancelled => text.push_str("mcp-code-bridge: cancelled: "),
            RunStatus::SandboxError => text.push_str("mcp-code-bridge: sandbox error: "),
            RunStatus::Ok | RunStatus::Error => {}
        }
        text.push_str(&crate::cli::safe_line::safe_text(error));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    // stderr is written even when stdout was closed early.
    err.write_all(text.as_bytes()).and_then(|()| err.flush())?;
    stdout
}

/// Prints `report` (plain or `--json`) on the process's stdout and stderr and returns the exit
/// code. A closed stdout (`exec ... | head -1`) is a normal end, not an error; any other
/// write failure is reported and gives [`EXIT_SANDBOX`].
pub fn print(report: &RunReport, json: bool, duration: Duration) -> u8 {
    let written = if json {
        let mut out = io::stdout().lock();
        writeln!(out, "{}", to_json(report, duration)).and_then(|()| out.flush())
    } else {
        write_plain(report, &mut io::stdout().lock(), &mut io::stderr().lock())
    };
    match written {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            let _ = writeln!(io::stderr(), "mcp-code-bridge: writing the output: {e}");
            EXIT_SANDBOX
        }
        _ => exit_code(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::SystemExit;

    fn report(status: RunStatus, exit: Option<(u8, Option<&str>)>) -> RunReport {
        RunReport {
            status,
            stdout: "out\n".into(),
            stderr: "warn\n".into(),
            error: Some("Traceback (most recent call last):\nValueError: x\n".into()),
            exit: exit.map(|(code, m)| SystemExit {
                code,
                message: m.map(String::from),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_outcome_has_its_exit_code_and_status() {
        let cases = [
            (report(RunStatus::Ok, None), 0, "ok"),
            (report(RunStatus::Error, None), 1, "error"),
            (report(RunStatus::Error, Some((7, None))), 7, "exit"),
            (report(RunStatus::Error, Some((0, None))), 0, "ok"),
            (report(RunStatus::Error, Some((1, Some("bad")))), 1, "exit"),
            (report(RunStatus::Error, Some((124, None))), 124, "exit"),
            (report(RunStatus::Timeout, None), 124, "timeout"),
            // interrupted at the deadline while raising SystemExit: still a timeout
            (report(RunStatus::Timeout, Some((3, None))), 124, "timeout"),
            (report(RunStatus::Cancelled, None), 130, "cancelled"),
            (report(RunStatus::SandboxError, None), 125, "sandbox_error"),
        ];
        for (r, code, name) in cases {
            assert_eq!((exit_code(&r), status(&r)), (code, name), "{r:?}");
        }
        assert_eq!(
            [
                EXIT_OK,
                EXIT_RAISED,
                EXIT_USAGE,
                EXIT_TIMEOUT,
                EXIT_SANDBOX,
                EXIT_CANCELLED
            ],
            [0, 1, 2, 124, 125, 130]
        );
    }

    #[test]
    fn program_output_goes_to_stdout_and_the_rest_to_stderr() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut r = report(RunStatus::Error, None);
        r.notice = Some("state was reset".into());
        write_plain(&r, &mut out, &mut err).expect("writes to memory");
        assert_eq!(String::from_utf8_lossy(&out), "out\n");
        assert_eq!(
            String::from_utf8_lossy(&err),
            "[note] state was reset\nwarn\nTraceback (most recent call last):\nValueError: x\n"
        );

        let (mut out, mut err) = (Vec::new(), Vec::new());
        let r = report(RunStatus::Error, Some((7, None)));
        write_plain(&r, &mut out, &mut err).expect("writes to memory");
        assert_eq!(
            (out.as_slice(), err.as_slice()),
            (&b"out\n"[..], &b"warn\n"[..])
        );

        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut r = report(RunStatus::SandboxError, None);
        (r.stdout, r.stderr, r.error) = (String::new(), String::new(), Some("no engine".into()));
        write_plain(&r, &mut out, &mut err).expect("writes to memory");
        assert!(out.is_empty());
        assert_eq!(
            String::from_utf8_lossy(&err),
            "mcp-code-bridge: sandbox error: no engine\n"
        );
    }

    #[test]
    fn json_has_every_key() {
        let r = report(RunStatus::Error, Some((1, Some("bad input"))));
        let v = to_json(&r, Duration::from_millis(1500));
        assert_eq!(
            v,
            json!({"status": "exit", "exit_code": 1, "stdout": "out\n", "stderr": "warn\n",
                   "error": "bad input", "notice": null, "duration": 1.5, "files": [],
                   "files_refused": []})
        );
    }

    #[test]
    fn saved_files_are_named_on_stderr_and_listed_in_json() {
        let mut r = report(RunStatus::Ok, None);
        (r.stderr, r.error) = ("warn".into(), None);
        r.files = vec![crate::report::SavedFile {
            name: "a.csv".into(),
            path: "/state/outbox/1/a.csv".into(),
            uri: "file:///state/outbox/1/a.csv".into(),
            mime: "text/csv".into(),
            size: 3,
            picture: None,
        }];
        r.files_refused = vec!["b.bin was not delivered: too large".into()];
        let (mut out, mut err) = (Vec::new(), Vec::new());
        write_plain(&r, &mut out, &mut err).expect("writes to memory");
        assert_eq!(String::from_utf8_lossy(&out), "out\n");
        assert_eq!(
            String::from_utf8_lossy(&err),
            "warn\nmcp-code-bridge: saved /state/outbox/1/a.csv (3 B, text/csv)\n\
             mcp-code-bridge: b.bin was not delivered: too large\n"
        );
        let v = to_json(&r, Duration::ZERO);
        assert_eq!(v["files"][0]["path"], "/state/outbox/1/a.csv");
        assert_eq!(v["files"][0]["size"], 3);
        assert_eq!(v["files_refused"][0], "b.bin was not delivered: too large");
    }
}
