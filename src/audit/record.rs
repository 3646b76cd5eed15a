//! The audit log's lines: [`CallRecord`] (one per tool call, admitted or refused; a refused
//! call's repeats folded into one), [`RunRecord`] (one per run) and [`RotatedRecord`] (what a
//! rotation dropped), serialized as one JSON object per line. No secrets: arguments
//! appear as their SHA-256, and as values only when `MCP_BRIDGE_AUDIT_VALUES=1`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// When the call was answered (RFC 3339, UTC).
    pub time: String,
    /// The run's id.
    pub run: String,
    /// The name of the client's token (`serve --http`); absent for stdio `run` and `exec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Whose credentials a call to a remote server used: the caller's token name (its own
    /// sign-in, `serve --http`), or `operator` (the operator's `login`); absent for a local
    /// (stdio) server. Never a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creds: Option<String>,
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// SHA-256 of the arguments as JSON, hex.
    pub args_sha256: String,
    /// The argument values (only with `MCP_BRIDGE_AUDIT_VALUES=1`; secret-looking keys redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The values were longer than [`MAX_ARGUMENTS`] bytes as JSON: `arguments` holds the
    /// start of that JSON text, cut.
    #[serde(default, skip_serializing_if = "is_false")]
    pub arguments_cut: bool,
    /// Milliseconds from the request to its answer (the wait for approval included).
    pub duration_ms: f64,
    /// `ok`, `error` (the call failed) or `refused` (the policy refused it).
    pub outcome: String,
    /// The error kind, when it failed or was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// Bytes of the arguments sent.
    pub bytes_in: u64,
    /// Bytes of the result received.
    pub bytes_out: u64,
    /// The policy's verdict (`allow`, `approved`, `pre_approved`, `deny`, `limit`, `declined`,
    /// `unapproved`).
    pub decision: String,
    /// The rule that decided, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// How many calls the line stands for: a refused call's repeats in its run (same server,
    /// tool, decision, rule and error kind) are folded into its line; written when over 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u64,
}

/// One run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// When the run ended (RFC 3339, UTC).
    pub time: String,
    /// The run's id.
    pub run: String,
    /// The name of the client's token (`serve --http`); absent for stdio `run` and `exec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// SHA-256 of the code, hex.
    pub code_sha256: String,
    /// The code's language when it is not Python (`typescript`: a `run_typescript` call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The run's status (`ok`, `error`, `timeout`, ...).
    pub status: String,
    /// Milliseconds from arrival to the report.
    pub duration_ms: f64,
    /// Tool calls admitted.
    pub calls: u64,
    /// Tool calls refused.
    pub refused: u64,
    /// Bytes of arguments sent.
    pub bytes_in: u64,
    /// Bytes of results received.
    pub bytes_out: u64,
    /// The run trace's estimate of the tokens the same work would have cost as direct tool
    /// calls (`calls::Trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_direct: Option<u64>,
    /// The estimate of the tokens the run cost (its code and output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_run: Option<u64>,
    /// Audit lines dropped because the queue was full since the last run line.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// The run's code (only with `MCP_BRIDGE_AUDIT_CODE=1`; never redacted), at most
    /// [`MAX_CODE`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Bytes of the code cut off to fit [`MAX_CODE`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code_cut: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The most bytes of argument values one call line holds (as JSON text).
pub const MAX_ARGUMENTS: usize = 64 * 1024;

/// The most bytes of a run's code one run line holds (`MCP_BRIDGE_AUDIT_CODE=1`).
pub const MAX_CODE: usize = 64 * 1024;

/// The most bytes of any one name (server, tool, run id, token, rule, error kind) in a line.
pub const MAX_NAME: usize = 1024;

/// `text` cut to at most `max` bytes (at a character boundary), with `…` when cut.
fn cut(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}

impl CallRecord {
    /// The record with every field bounded: names cut to [`MAX_NAME`] bytes (a tool name comes
    /// from the sandbox), and argument values longer than [`MAX_ARGUMENTS`] as JSON replaced by
    /// the start of their JSON text, marked `arguments_cut`.
    pub fn bounded(mut self) -> CallRecord {
        for name in [&mut self.run, &mut self.server, &mut self.tool] {
            cut(name, MAX_NAME);
        }
        for name in [
            &mut self.token,
            &mut self.creds,
            &mut self.rule,
            &mut self.error_kind,
        ]
        .into_iter()
        .flatten()
        {
            cut(name, MAX_NAME);
        }
        if let Some(values) = &self.arguments {
            let text = serde_json::to_string(values).unwrap_or_default();
            if text.len() > MAX_ARGUMENTS {
                let mut text = text;
                cut(&mut text, MAX_ARGUMENTS);
                self.arguments = Some(Value::String(text));
                self.arguments_cut = true;
            }
        }
        self
    }
}

impl RunRecord {
    /// The record with its token's name cut to [`MAX_NAME`] bytes, and its code to
    /// [`MAX_CODE`] (at a character boundary, the bytes cut counted in `code_cut`).
    pub fn bounded(mut self) -> RunRecord {
        if let Some(token) = &mut self.token {
            cut(token, MAX_NAME);
        }
        if let Some(code) = &mut self.code {
            if code.len() > MAX_CODE {
                let mut end = MAX_CODE;
                while !code.is_char_boundary(end) {
                    end -= 1;
                }
                self.code_cut += (code.len() - end) as u64;
                code.truncate(end);
            }
        }
        if let Some(language) = &mut self.language {
            cut(language, MAX_NAME);
        }
        self
    }
}

/// The first line of a log file started by a rotation that dropped the oldest rotated file:
/// what was lost, so no line goes away unannounced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RotatedRecord {
    /// When the file was dropped (RFC 3339, UTC).
    pub time: String,
    /// The dropped file's name (`audit.log.3`).
    pub dropped_file: String,
    /// Lines it held.
    pub dropped_lines: u64,
    /// Ids of the runs with lines in it, in the order met, at most [`MAX_DROPPED_RUNS`].
    pub dropped_runs: Vec<String>,
    /// Further runs with lines in it, not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_runs: u64,
}

/// Run ids a [`RotatedRecord`] lists at most.
pub const MAX_DROPPED_RUNS: usize = 64;

/// A line of the audit log.
// A `Record` lives only while one line is written or read; boxing the call line would cost an
// allocation per call for the few bytes `creds` added.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A tool call.
    Call(CallRecord),
    /// A run.
    Run(RunRecord),
    /// A rotation dropped the oldest file.
    Rotated(RotatedRecord),
    /// A connection through the egress proxy.
    Net(super::net::NetRecord),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: String, arguments: Option<Value>) -> CallRecord {
        CallRecord {
            time: "t".into(),
            run: "r".into(),
            token: None,
            creds: None,
            server: "s".into(),
            tool,
            args_sha256: "h".into(),
            arguments,
            arguments_cut: false,
            duration_ms: 1.0,
            outcome: "ok".into(),
            error_kind: None,
            bytes_in: 0,
            bytes_out: 0,
            decision: "allow".into(),
            rule: None,
            count: 1,
        }
    }

    #[test]
    fn huge_values_and_names_are_cut_and_marked() {
        let big = serde_json::json!({"text": "é".repeat(100_000)});
        let r = call("t".repeat(5000), Some(big)).bounded();
        assert!(r.arguments_cut);
        let Some(Value::String(text)) = &r.arguments else {
            panic!("{:?}", r.arguments)
        };
        assert!(text.len() <= MAX_ARGUMENTS + '…'.len_utf8() && text.starts_with("{\"text\":\"é"));
        assert!(r.tool.len() <= MAX_NAME + 3 && r.tool.ends_with('…'));
        let line = serde_json::to_string(&Record::Call(r)).expect("json");
        assert!(line.len() < MAX_ARGUMENTS + 4 * MAX_NAME, "{}", line.len());
        assert!(line.contains("\"arguments_cut\":true"));
        // Small values are kept as they are, with no mark.
        let small = serde_json::json!({"text": "hi"});
        let r = call("echo".into(), Some(small.clone())).bounded();
        assert_eq!(r.arguments, Some(small));
        let line = serde_json::to_string(&r).expect("json");
        assert!(!line.contains("arguments_cut"), "{line}");
    }

    #[test]
    fn a_token_name_is_written_when_there_is_one_and_cut_like_any_name() {
        let plain = serde_json::to_string(&Record::Call(call("echo".into(), None))).expect("json");
        assert!(!plain.contains("token"), "{plain}");
        let mut r = call("echo".into(), None);
        r.token = Some("alice".into());
        let line = serde_json::to_string(&Record::Call(r.clone())).expect("json");
        assert!(
            line.contains(r#""run":"r","token":"alice","server":"s""#),
            "{line}"
        );
        let back: Record = serde_json::from_str(&line).expect("read back");
        assert_eq!(back, Record::Call(r.clone()));
        r.token = Some("n".repeat(5000));
        let cut = r.bounded().token.expect("a token");
        assert!(cut.len() <= MAX_NAME + 3 && cut.ends_with('…'));
        let run = RunRecord {
            time: "t".into(),
            run: "r".into(),
            token: Some("é".repeat(1000)),
            code_sha256: "c".into(),
            language: None,
            status: "ok".into(),
            duration_ms: 1.0,
            calls: 0,
            refused: 0,
            bytes_in: 0,
            bytes_out: 0,
            tokens_direct: None,
            tokens_run: None,
            dropped: 0,
            code: None,
            code_cut: 0,
        };
        let cut = run.clone().bounded().token.expect("a token");
        assert!(cut.len() <= MAX_NAME + 3 && cut.ends_with('…'));
        // No code unless given; given, it is kept up to MAX_CODE and the cut counted.
        let plain = serde_json::to_string(&Record::Run(run.clone())).expect("json");
        assert!(
            !plain.contains("code\"") && !plain.contains("code_cut"),
            "{plain}"
        );
        let small = RunRecord {
            code: Some("print(1)".into()),
            ..run.clone()
        }
        .bounded();
        assert_eq!(
            (small.code.as_deref(), small.code_cut),
            (Some("print(1)"), 0)
        );
        let big = RunRecord {
            code: Some(format!("x{}", "é".repeat(MAX_CODE))),
            ..run
        }
        .bounded();
        let kept = big.code.as_deref().expect("code");
        assert_eq!(kept.len(), MAX_CODE - 1, "cut at a character boundary");
        assert_eq!(big.code_cut, (1 + 2 * MAX_CODE - kept.len()) as u64);
        let line = serde_json::to_string(&Record::Run(big)).expect("json");
        assert!(
            line.contains("\"code_cut\":"),
            "{}",
            &line[line.len() - 80..]
        );
    }
}
