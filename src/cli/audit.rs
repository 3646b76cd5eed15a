//! `mcp-code-bridge audit [--last N] [--json] [--file PATH]`: the audit log's last entries,
//! readably (one line per call, a summary line closing each run, refused calls in capitals and
//! counted in the header) or as JSON lines. Every field comes from a file and is printed through
//! [`crate::shown`]; the JSON is written with every non-ASCII character escaped, so it is safe
//! on a terminal too.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::audit::read::{tail, Tail};
use crate::audit::{CallRecord, Record, RotatedRecord, RunRecord};
use crate::cli::safe_line::safe_line;
use crate::shown::{Shown, ShownPath};

/// Entries shown when `--last` is not given.
pub const DEFAULT_LAST: usize = 50;

/// What `audit` was asked.
pub struct AuditArgs {
    /// `--last N`.
    pub last: usize,
    /// `--json`.
    pub json: bool,
    /// `--file PATH`, else `MCP_BRIDGE_AUDIT_LOG`.
    pub file: Option<PathBuf>,
}

/// Runs `audit`: exit 0 shown, 2 no log named, 1 the log cannot be read.
pub fn audit(configured: Option<&Path>, args: &AuditArgs) -> ExitCode {
    let Some(path) = args.file.as_deref().or(configured) else {
        eprintln!(
            "mcp-code-bridge audit: no audit log: set MCP_BRIDGE_AUDIT_LOG (as the bridge has it) \
             or pass --file PATH"
        );
        return ExitCode::from(2);
    };
    let tail = match tail(path, args.last) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "mcp-code-bridge audit: cannot read the audit log: {}",
                safe_line(&e.to_string())
            );
            return ExitCode::FAILURE;
        }
    };
    let out = if args.json {
        json_lines(&tail)
    } else {
        readable(path, &tail)
    };
    // A closed stdout (`audit | head`) ends quietly.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    if tail.garbage > 0 || tail.partial {
        let mut note = String::new();
        if tail.garbage > 0 {
            let _ = write!(
                note,
                "{} line(s) that are not audit entries were skipped",
                tail.garbage
            );
        }
        if tail.partial {
            let sep = if note.is_empty() { "" } else { "; " };
            let _ = write!(
                note,
                "{sep}the last line is incomplete (being written, or cut short)"
            );
        }
        eprintln!("mcp-code-bridge audit: {note}");
    }
    ExitCode::SUCCESS
}

/// The entries as JSON lines, every non-ASCII character escaped.
pub fn json_lines(tail: &Tail) -> String {
    let mut out = Vec::new();
    for record in &tail.entries {
        let mut ser = serde_json::Serializer::with_formatter(&mut out, AsciiJson);
        if serde::Serialize::serialize(record, &mut ser).is_ok() {
            out.push(b'\n');
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// A compact JSON formatter that writes non-ASCII characters as `\uXXXX`.
struct AsciiJson;

impl serde_json::ser::Formatter for AsciiJson {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        for c in fragment.chars() {
            if c.is_ascii() {
                writer.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// What a refused call's verdict is called on screen.
fn refusal(decision: &str) -> Option<&'static str> {
    match decision {
        "deny" => Some("DENIED"),
        "limit" => Some("LIMIT"),
        "declined" => Some("DECLINED"),
        "unapproved" => Some("UNAPPROVED"),
        _ => None,
    }
}

/// The readable view: a header, then one line per entry.
pub fn readable(path: &Path, tail: &Tail) -> String {
    let (mut calls, mut runs) = (0, 0);
    let mut refused: Vec<(&'static str, u64)> = Vec::new();
    for record in &tail.entries {
        match record {
            Record::Call(c) => {
                calls += 1;
                if let Some(word) = refusal(&c.decision) {
                    match refused.iter_mut().find(|(w, _)| *w == word) {
                        Some((_, n)) => *n += c.count,
                        None => refused.push((word, c.count)),
                    }
                }
            }
            Record::Run(_) => runs += 1,
            Record::Rotated(_) | Record::Net(_) => {}
        }
    }
    let mut out = String::new();
    let total: u64 = refused.iter().map(|(_, n)| n).sum();
    let _ = write!(
        out,
        "audit log {}: {} entries ({calls} calls, {runs} runs); ",
        ShownPath(path),
        tail.entries.len()
    );
    if total == 0 {
        out.push_str("no refused calls\n");
    } else {
        let parts: Vec<String> = refused.iter().map(|(w, n)| format!("{n} {w}")).collect();
        let _ = writeln!(out, "{total} refused: {}", parts.join(", "));
    }
    for record in &tail.entries {
        let line = match record {
            Record::Call(c) => call_line(c),
            Record::Run(r) => run_line(r),
            Record::Rotated(r) => rotated_line(r),
            Record::Net(n) => net_line(n),
        };
        out.push_str(&safe_line(&line));
        out.push('\n');
    }
    out
}

/// The first 8 characters of a run id.
fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// `token NAME  ` when the entry has a client token's name, else nothing.
fn token(name: Option<&String>) -> String {
    name.map(|t| format!("token {}  ", Shown(t)))
        .unwrap_or_default()
}

fn net_line(n: &crate::audit::NetRecord) -> String {
    let mut line = format!(
        "{}  {}  net {}:{} {} {} (up {} B, down {} B)",
        Shown(&n.time),
        Shown(&short(&n.run)),
        Shown(&n.host),
        n.port,
        Shown(&n.method),
        Shown(&n.outcome),
        n.bytes_up,
        n.bytes_down
    );
    if let Some(reason) = &n.reason {
        let _ = write!(line, ": {}", Shown(reason));
    }
    line
}

fn call_line(c: &CallRecord) -> String {
    let mut line = format!(
        "{}  {}  {}{}.{}  ",
        Shown(&c.time),
        Shown(&short(&c.run)),
        token(c.token.as_ref()),
        Shown(&c.server),
        Shown(&c.tool)
    );
    match refusal(&c.decision) {
        Some(word) => {
            let _ = write!(line, "{word}");
            if let Some(kind) = &c.error_kind {
                let _ = write!(line, " ({})", Shown(kind));
            }
        }
        None => {
            let _ = write!(line, "{} {}", Shown(&c.outcome), Shown(&c.decision));
            if let Some(kind) = &c.error_kind {
                let _ = write!(line, " ({})", Shown(kind));
            }
            let _ = write!(
                line,
                "  {} ms  in {} B out {} B",
                c.duration_ms, c.bytes_in, c.bytes_out
            );
        }
    }
    if let Some(rule) = &c.rule {
        let _ = write!(line, "  rule: {}", Shown(rule));
    }
    if c.count > 1 {
        let _ = write!(line, "  (× {}: repeats folded into this line)", c.count);
    }
    if c.arguments_cut {
        line.push_str("  (argument values cut)");
    }
    line
}

fn run_line(r: &RunRecord) -> String {
    let mut line = format!(
        "{}  {}  {}-- run {}: {} calls, {} refused, {} ms, in {} B out {} B, code sha256 {}",
        Shown(&r.time),
        Shown(&short(&r.run)),
        token(r.token.as_ref()),
        Shown(&r.status),
        r.calls,
        r.refused,
        r.duration_ms,
        r.bytes_in,
        r.bytes_out,
        Shown(&r.code_sha256.chars().take(12).collect::<String>())
    );
    if r.dropped > 0 {
        let _ = write!(line, "  ({} audit lines DROPPED before this)", r.dropped);
    }
    line
}

/// A rotation that dropped the oldest file: what it held.
fn rotated_line(r: &RotatedRecord) -> String {
    let runs: Vec<String> = r.dropped_runs.iter().map(|id| short(id)).collect();
    let mut line = format!(
        "{}  -- ROTATED AWAY {}: {} lines of runs {}",
        Shown(&r.time),
        Shown(&r.dropped_file),
        r.dropped_lines,
        Shown(&runs.join(", "))
    );
    if r.more_runs > 0 {
        let _ = write!(line, " and {} more", r.more_runs);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, decision: &str, rule: Option<&str>) -> Record {
        Record::Call(CallRecord {
            time: "2026-11-25T04:00:00.000Z".into(),
            run: "0123456789abcdef".into(),
            token: None,
            creds: None,
            server: "stub".into(),
            tool: tool.into(),
            args_sha256: "h".into(),
            arguments: None,
            arguments_cut: false,
            duration_ms: 1.5,
            outcome: if decision == "allow" { "ok" } else { "refused" }.into(),
            error_kind: (decision != "allow").then(|| "policy_denied".into()),
            bytes_in: 10,
            bytes_out: 20,
            decision: decision.into(),
            rule: rule.map(str::to_string),
            count: 1,
        })
    }

    #[test]
    fn denials_stand_out_and_are_counted_and_hostile_text_is_escaped() {
        let mut tail = Tail::default();
        tail.entries.push_back(call("echo", "allow", None));
        tail.entries.push_back(call(
            "add\u{1b}[2K\u{202e}",
            "deny",
            Some("allowed_tools [stub.echo]"),
        ));
        tail.entries
            .push_back(call("drop", "limit", Some("run_max_calls 1")));
        let out = readable(Path::new("/var/log/a.log"), &tail);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "audit log /var/log/a.log: 3 entries (3 calls, 0 runs); 2 refused: 1 DENIED, 1 LIMIT"
        );
        assert!(lines[1].contains("01234567  stub.echo  ok allow  1.5 ms  in 10 B out 20 B"));
        assert!(
            lines[2].contains("stub.add\\u{1b}[2K\\u{202e}  DENIED (policy_denied)  rule: allowed_tools [stub.echo]"),
            "{}",
            lines[2]
        );
        assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}'));
        let json = json_lines(&tail);
        assert!(json.is_ascii(), "{json}");
        let back: Record = serde_json::from_str(json.lines().nth(1).expect("line")).expect("json");
        assert_eq!(back, tail.entries[1]);
    }

    #[test]
    fn a_token_name_is_shown_escaped_on_call_and_run_lines() {
        let mut tail = Tail::default();
        let mut c = call("echo", "allow", None);
        if let Record::Call(c) = &mut c {
            c.token = Some("ci\u{1b}]0;pwned\u{7}".into());
        }
        tail.entries.push_back(c);
        tail.entries.push_back(Record::Run(RunRecord {
            time: "2026-11-25T04:00:01.000Z".into(),
            run: "0123456789abcdef".into(),
            token: Some("alice".into()),
            code_sha256: "c0de".into(),
            language: None,
            status: "ok".into(),
            duration_ms: 2.0,
            calls: 1,
            refused: 0,
            bytes_in: 10,
            bytes_out: 20,
            tokens_direct: None,
            tokens_run: None,
            dropped: 0,
            code: None,
            code_cut: 0,
        }));
        let out = readable(Path::new("/a.log"), &tail);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[1].contains("01234567  token ci\\u{1b}]0;pwned\\u{7}  stub.echo  ok allow"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("01234567  token alice  -- run ok: 1 calls"),
            "{}",
            lines[2]
        );
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'));
        let json = json_lines(&tail);
        assert!(
            json.contains(r#""token":"ci\u001b]0;pwned\u0007""#),
            "{json}"
        );
    }
}
