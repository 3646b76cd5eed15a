//! Who answers a downstream server's question under `exec`: with `--answer-defaults`, a form
//! is accepted with its defaults (for scripts and CI); else, when stdin is a terminal (and the
//! code did not come from it), the question is asked there: the server's message and each
//! field on stderr, the answers read from stdin. Approvals are never asked here: calls that
//! need one fail closed under `exec`, as before.

use std::io::{BufRead, Read, Write};

use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::calls::{Answer, Asker, Question, QuestionKind, Reply, ServerQuestion};
use crate::cli::safe_line::safe_line;

/// How `exec` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecAnswers {
    /// A form accepted with its defaults (`--answer-defaults`); links declined.
    Defaults,
    /// Asked on the terminal.
    Terminal,
}

/// `exec`'s asker.
pub struct ExecAsker {
    mode: ExecAnswers,
}

impl ExecAsker {
    /// An asker answering by `mode`.
    pub fn new(mode: ExecAnswers) -> Self {
        ExecAsker { mode }
    }
}

/// Attempts at one field before the question is declined.
const TRIES: usize = 3;
/// Longest answer line read from the terminal.
const MAX_LINE: usize = 8 << 10;

#[async_trait::async_trait]
impl Asker for ExecAsker {
    async fn ask(&self, _question: Question, _deadline: Instant) -> Answer {
        Answer::Unavailable("this client cannot be asked".into())
    }

    async fn relay(&self, question: ServerQuestion, deadline: Instant) -> Reply {
        match self.mode {
            ExecAnswers::Defaults => match question.defaults() {
                Some(content) => {
                    eprintln!(
                        "mcp-code-bridge: the MCP server {} asked a question; accepted with its defaults (--answer-defaults)",
                        safe_line(&format!("{:?}", question.server))
                    );
                    Reply::Accept(Some(content))
                }
                None => Reply::Decline,
            },
            ExecAnswers::Terminal => {
                let asked = tokio::task::spawn_blocking(move || {
                    let stdin = std::io::stdin();
                    let mut input = stdin.lock();
                    let mut err = std::io::stderr();
                    on_terminal(&question, &mut input, &mut err)
                });
                match tokio::time::timeout_at(deadline, asked).await {
                    Ok(Ok(reply)) => reply,
                    Ok(Err(_)) => Reply::Unavailable("the terminal could not be read".into()),
                    Err(_) => {
                        eprintln!(
                            "\nmcp-code-bridge: no answer in time; the question was cancelled"
                        );
                        Reply::TimedOut
                    }
                }
            }
        }
    }
}

/// Reads one line (without its end), at most [`MAX_LINE`] bytes; `None` at the input's end.
fn read_line(input: &mut impl BufRead) -> Option<String> {
    let mut buf = Vec::new();
    let n = Read::take(&mut *input, MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)
        .ok()?;
    if n == 0 {
        return None;
    }
    if buf.len() > MAX_LINE && !buf.ends_with(b"\n") {
        // The rest of an overlong line is dropped.
        let mut rest = Vec::new();
        let _ = input.read_until(b'\n', &mut rest);
    }
    let text = String::from_utf8_lossy(&buf);
    Some(text.trim_end_matches(['\n', '\r']).to_string())
}

/// Asks `question` on `out`, reading the answers from `input`.
pub fn on_terminal(
    question: &ServerQuestion,
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> Reply {
    let mut say = |text: &str| {
        let _ = write!(out, "{text}");
        let _ = out.flush();
    };
    say(&format!(
        "\nmcp-code-bridge: the MCP server {} asks:\n",
        safe_line(&format!("{:?}", question.server))
    ));
    for line in question.message.lines().take(200) {
        say(&format!("  {}\n", safe_line(line)));
    }
    if let QuestionKind::Url { url, .. } = &question.kind {
        say(&format!("Open this link: {}\n", safe_line(url)));
        say("Done there? [y = accept / n = decline / c = cancel]: ");
        return match read_line(input).as_deref().map(str::trim) {
            Some("y" | "Y" | "yes") => Reply::Accept(None),
            Some("c" | "C") | None => Reply::Cancel,
            Some(_) => Reply::Decline,
        };
    }
    say("Answer? [y = fill in the form / n = decline / c = cancel]: ");
    match read_line(input).as_deref().map(str::trim) {
        Some("y" | "Y" | "yes") => {}
        Some("c" | "C") | None => return Reply::Cancel,
        Some(_) => return Reply::Decline,
    }
    let mut content = Map::new();
    for (name, prop) in question.fields() {
        let required = question.requires(name);
        let kind = prop.get("type").and_then(Value::as_str).unwrap_or("string");
        let mut prompt = format!("  {} ({kind}", safe_line(name));
        if required {
            prompt.push_str(", required");
        }
        prompt.push(')');
        if let Some(d) = prop.get("description").and_then(Value::as_str) {
            prompt.push_str(&format!(
                " {}",
                safe_line(&d.chars().take(200).collect::<String>())
            ));
        }
        if let Some(choices) = choice_list(prop) {
            prompt.push_str(&format!(" one of {}", safe_line(&choices)));
        }
        if let Some(d) = prop.get("default") {
            prompt.push_str(&format!(" [{}]", safe_line(&d.to_string())));
        }
        prompt.push_str(": ");
        let mut got = None;
        for _ in 0..TRIES {
            say(&prompt);
            let Some(line) = read_line(input) else {
                return Reply::Cancel;
            };
            if line.is_empty() {
                got = Some(prop.get("default").cloned());
                if got == Some(None) && required {
                    say("    this field is required\n");
                    got = None;
                    continue;
                }
                break;
            }
            match parse(kind, prop, &line) {
                Some(v) => {
                    got = Some(Some(v));
                    break;
                }
                None => say(&format!("    not a {kind} this form takes\n")),
            }
        }
        match got {
            Some(Some(v)) => {
                content.insert(name.to_string(), v);
            }
            Some(None) => {}
            None => {
                say("mcp-code-bridge: no usable answer; the question was declined\n");
                return Reply::Decline;
            }
        }
    }
    Reply::Accept(Some(content))
}

/// A property's choices as text, when it has any.
fn choice_list(prop: &Map<String, Value>) -> Option<String> {
    let list = prop
        .get("enum")
        .or_else(|| prop.get("items").and_then(|i| i.get("enum")))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .take(32)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// `line` as a value of `kind` (for an `array`: comma-separated choices).
fn parse(kind: &str, prop: &Map<String, Value>, line: &str) -> Option<Value> {
    let t = line.trim();
    match kind {
        "boolean" => match t.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Some(Value::Bool(true)),
            "n" | "no" | "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "integer" => t.parse::<i64>().ok().map(Value::from),
        "number" => t
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        "array" => Some(Value::Array(
            t.split(',')
                .map(|s| Value::String(s.trim().to_string()))
                .filter(|v| v.as_str() != Some(""))
                .collect(),
        )),
        _ => {
            let v = Value::String(line.to_string());
            match prop.get("enum").and_then(Value::as_array) {
                Some(choices) if !choices.contains(&v) => None,
                _ => Some(v),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form() -> ServerQuestion {
        ServerQuestion {
            server: "s".into(),
            message: "Who are you?\u{1b}[2J".into(),
            kind: QuestionKind::Form {
                schema: json!({"type": "object", "properties": {
                    "name": {"type": "string", "default": "Ann"},
                    "age": {"type": "integer"},
                    "ok": {"type": "boolean"},
                    "color": {"type": "string", "enum": ["red", "blue"]},
                }, "required": ["age"]})
                .as_object()
                .expect("object")
                .clone(),
            },
        }
    }

    fn asked(answers: &str) -> (Reply, String) {
        let mut out = Vec::new();
        let reply = on_terminal(&form(), &mut answers.as_bytes(), &mut out);
        (reply, String::from_utf8(out).expect("utf-8"))
    }

    #[test]
    fn the_terminal_shows_each_field_and_reads_typed_answers() {
        let (reply, shown) = asked("y\n\nx\n41\nyes\ngreen\nblue\n");
        let Reply::Accept(Some(content)) = reply else {
            panic!("{reply:?}");
        };
        assert_eq!(
            Value::Object(content),
            json!({"name": "Ann", "age": 41, "ok": true, "color": "blue"})
        );
        assert!(shown.contains("age (integer, required)"), "{shown}");
        assert!(shown.contains("one of red, blue"), "{shown}");
        assert!(!shown.contains('\u{1b}'), "escaped: {shown}");
    }

    #[test]
    fn no_declines_c_or_an_ended_input_cancels() {
        assert_eq!(asked("n\n").0, Reply::Decline);
        assert_eq!(asked("c\n").0, Reply::Cancel);
        assert_eq!(asked("").0, Reply::Cancel);
        assert_eq!(
            asked("y\n\n\n\n\n").0,
            Reply::Decline,
            "a required field left empty"
        );
    }
}
