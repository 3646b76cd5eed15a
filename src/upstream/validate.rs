//! [`Validators`]: a proxied call's arguments checked against the tool's `inputSchema` before the
//! call is sent, so a wrong call fails at once with the tool's signature and every problem found,
//! and [`closest`], the "did you mean" used for server, tool and argument names. Pure apart from
//! the validator cache; no I/O.
//!
//! Each tool's schema is compiled once (the `jsonschema` crate, offline: no remote `$ref`, formats
//! not asserted) and kept per server until that server's tool list changes (a new `Arc`).
//! Servers' schemas are often sloppy, so checking errs on the side of letting calls through: a
//! schema that does not compile is not checked, and regex engine failures are not reported.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde_json::Value;

use super::docs;

/// Least Jaro-Winkler similarity for a server or tool name to be suggested.
const NAME_SIMILARITY: f64 = 0.8;
/// Least similarity for an unknown argument to be reported as a misspelt property: stricter than
/// for names, since a match turns an argument the server might accept into an error.
const ARGUMENT_SIMILARITY: f64 = 0.85;
/// Problems listed at most in one error.
const MAX_PROBLEMS: usize = 10;
/// Characters of an offending value shown at most.
const MAX_VALUE_CHARS: usize = 40;

/// Compiled argument checks for every server's tools, by server; shared by all calls.
#[derive(Default)]
pub struct Validators {
    servers: Mutex<HashMap<String, ServerChecks>>,
}

/// The checks of one server's tools, valid for the one tool list they were made from.
struct ServerChecks {
    /// The list the checks belong to (pointer identity is the cache key; holding it keeps the
    /// address from being reused by another list).
    tools: Arc<Vec<Tool>>,
    checks: HashMap<String, Arc<Check>>,
}

/// One tool's compiled check.
struct Check {
    /// `None` when the schema did not compile: then only argument names are checked.
    validator: Option<jsonschema::Validator>,
    /// The schema's `properties`, in schema order.
    properties: Vec<String>,
    /// Whether arguments outside `properties` are looked at by us (see [`Check::run`]).
    check_names: bool,
}

/// Why a call was refused before it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The server's tool list has no tool of that name.
    UnknownTool,
    /// The arguments do not fit the schema.
    Invalid {
        /// The tool's signature without its name: `(repo: str, title: str) -> dict`.
        signature: String,
        /// What is wrong, one line each.
        problems: Vec<String>,
    },
}

impl Validators {
    /// An empty cache.
    pub fn new() -> Self {
        Validators::default()
    }

    /// Checks a call of `tool` of `server`, whose current tool list is `tools`, with `args`.
    ///
    /// # Errors
    /// [`Rejection::UnknownTool`] when `tools` lacks `tool`; [`Rejection::Invalid`] listing the
    /// problems when `args` does not fit its input schema.
    pub fn check(
        &self,
        server: &str,
        tools: &Arc<Vec<Tool>>,
        tool: &str,
        args: &Value,
    ) -> Result<(), Rejection> {
        let check = self.check_for(server, tools, tool)?;
        let problems = check.run(args);
        if problems.is_empty() {
            return Ok(());
        }
        let signature = tools
            .iter()
            .find(|t| t.name == tool)
            .map(|t| docs::signature(t)[t.name.len()..].to_string())
            .unwrap_or_default();
        Err(Rejection::Invalid {
            signature,
            problems,
        })
    }

    /// The cached check of `tool`, compiled on first use of this tool list.
    fn check_for(
        &self,
        server: &str,
        tools: &Arc<Vec<Tool>>,
        tool: &str,
    ) -> Result<Arc<Check>, Rejection> {
        {
            let servers = self.servers.lock().expect("validator cache lock");
            if let Some(s) = servers.get(server) {
                if Arc::ptr_eq(&s.tools, tools) {
                    if let Some(c) = s.checks.get(tool) {
                        return Ok(c.clone());
                    }
                }
            }
        }
        // Compiled outside the lock: a big schema must not hold up other servers' calls.
        let t = tools
            .iter()
            .find(|t| t.name == tool)
            .ok_or(Rejection::UnknownTool)?;
        let check = Arc::new(Check::compile(server, t));
        let mut servers = self.servers.lock().expect("validator cache lock");
        let entry = servers
            .entry(server.to_string())
            .or_insert_with(|| ServerChecks {
                tools: tools.clone(),
                checks: HashMap::new(),
            });
        if !Arc::ptr_eq(&entry.tools, tools) {
            entry.tools = tools.clone();
            entry.checks.clear();
        }
        entry.checks.insert(tool.to_string(), check.clone());
        Ok(check)
    }
}

impl Check {
    fn compile(server: &str, tool: &Tool) -> Check {
        let schema = tool.input_schema.as_ref();
        let properties: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let validator = jsonschema::options()
            .offline()
            // Servers write `format` loosely (`uri` for a path); the server decides.
            .should_validate_formats(false)
            .build(&Value::Object(schema.clone()));
        let validator = match validator {
            Ok(v) => Some(v),
            Err(err) => {
                tracing::debug!(server, tool = %tool.name, cause = %err, "input schema not checked: it does not compile");
                None
            }
        };
        // Extra arguments: with `additionalProperties: false` the schema itself reports them;
        // with `patternProperties` or an `additionalProperties` schema a name outside
        // `properties` may be right; otherwise (unset, the common case, or `true`) see `run`.
        let extra = schema.get("additionalProperties");
        let check_names = !(schema.contains_key("patternProperties")
            || matches!(extra, Some(Value::Object(_)))
            || (validator.is_some() && matches!(extra, Some(Value::Bool(false)))));
        Check {
            validator,
            properties,
            check_names,
        }
    }

    /// Every problem with `args`, one line each; empty when the call may go.
    ///
    /// Arguments outside `properties` when the schema allows them (most servers leave
    /// `additionalProperties` unset) are passed through, as the server decides what they mean,
    /// unless the name is close to a property that was not passed (`titel` for `title`): that is
    /// almost always a typo the server would silently ignore, so it is reported with the name.
    fn run(&self, args: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(v) = &self.validator {
            if !v.is_valid(args) {
                for err in v.iter_errors(args) {
                    describe(&err, args, &self.properties, &mut problems);
                }
            }
        }
        if self.check_names {
            if let Some(obj) = args.as_object() {
                for key in obj.keys() {
                    if self.properties.iter().any(|p| p == key) {
                        continue;
                    }
                    let near = self.properties.iter().map(String::as_str);
                    if let Some(near) = closest_argument(key, near) {
                        if !obj.contains_key(near) {
                            problems
                                .push(format!("unknown argument '{key}' (did you mean '{near}'?)"));
                        }
                    }
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        problems.retain(|p| seen.insert(p.clone()));
        if problems.len() > MAX_PROBLEMS {
            let more = problems.len() - MAX_PROBLEMS;
            problems.truncate(MAX_PROBLEMS);
            problems.push(format!("... and {more} more"));
        }
        problems
    }
}

/// One schema error as a line (or none, for failures that are ours rather than the caller's).
fn describe(
    err: &jsonschema::ValidationError<'_>,
    args: &Value,
    properties: &[String],
    out: &mut Vec<String>,
) {
    use jsonschema::error::{TypeKind, ValidationErrorKind as K};
    let pointer = err.instance_path().as_str();
    let path = python_path(pointer, args);
    let what = match &path {
        None => "arguments".to_string(),
        Some(p) => format!("argument '{p}'"),
    };
    let value = err.instance();
    match err.kind() {
        K::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), Into::into);
            out.push(match &path {
                None => format!("missing required argument '{name}'"),
                Some(p) => format!("argument '{p}' is missing required key '{name}'"),
            });
        }
        K::AdditionalProperties { unexpected } => {
            for name in unexpected {
                let hint = match path {
                    None => closest(name, properties.iter().map(String::as_str))
                        .map(|s| format!(" (did you mean '{s}'?)"))
                        .unwrap_or_default(),
                    Some(_) => String::new(),
                };
                out.push(match &path {
                    None => format!("unknown argument '{name}'{hint}"),
                    Some(p) => format!("argument '{p}' has unknown key '{name}'"),
                });
            }
        }
        K::Type { kind } => {
            let want = match kind {
                TypeKind::Single(t) => t.as_str().to_string(),
                TypeKind::Multiple(ts) => ts
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            out.push(format!(
                "{what} must be {want}, got {} {}",
                type_name(value),
                short(value)
            ));
        }
        K::Enum { options } => {
            let choices = options.as_array().map(Vec::as_slice).unwrap_or_default();
            let listed: Vec<String> = choices.iter().map(short).collect();
            let hint = value
                .as_str()
                .and_then(|v| closest(v, choices.iter().filter_map(Value::as_str)))
                .map(|s| format!(" (did you mean {s:?}?)"))
                .unwrap_or_default();
            out.push(format!(
                "{what} must be one of {}, got {}{hint}",
                listed.join(", "),
                short(value)
            ));
        }
        // Failures of the regex engine or of reference resolution: not the caller's fault.
        K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } | K::Referencing(_) => {}
        _ => out.push(format!("{what}: {err}")),
    }
}

/// `options.count` / `items[0].name` for a JSON pointer into `args`; `None` for the root.
fn python_path(pointer: &str, args: &Value) -> Option<String> {
    if pointer.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut at = Some(args);
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        match at {
            Some(Value::Array(items)) => {
                out.push_str(&format!("[{seg}]"));
                at = seg.parse::<usize>().ok().and_then(|i| items.get(i));
            }
            other => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&seg);
                at = other.and_then(|v| v.get(&seg));
            }
        }
    }
    Some(out)
}

/// The JSON Schema type name of `v` (`integer` for whole numbers).
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `v` as JSON, cut to [`MAX_VALUE_CHARS`].
fn short(v: &Value) -> String {
    let text = match v {
        // Containers can be big: only their start is shown, without serializing all of them.
        Value::Array(a) if a.len() > 8 => format!("[... {} items]", a.len()),
        Value::Object(m) if m.len() > 8 => format!("{{... {} keys}}", m.len()),
        other => other.to_string(),
    };
    if text.chars().count() > MAX_VALUE_CHARS {
        format!(
            "{}…",
            text.chars().take(MAX_VALUE_CHARS - 1).collect::<String>()
        )
    } else {
        text
    }
}

/// `name` folded for comparison: lower case, every non-alphanumeric character as `_`.
fn fold(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The candidate `name` was most likely meant to be: equal once case and separators are
/// ignored (`get_sum` for `get-sum`), else the most similar by Jaro-Winkler at or above
/// [`NAME_SIMILARITY`], a candidate containing `name` (or contained in it) counting as close.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    best(name, candidates, NAME_SIMILARITY, true)
}

/// Like [`closest`] for argument names, stricter: [`ARGUMENT_SIMILARITY`], no substrings.
fn closest_argument<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    best(name, candidates, ARGUMENT_SIMILARITY, false)
}

fn best<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    min: f64,
    substrings: bool,
) -> Option<&'a str> {
    let want = fold(name);
    let mut found: Option<(f64, &'a str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let have = fold(c);
        let mut score = strsim::jaro_winkler(&want, &have);
        if have == want {
            score = 3.0;
        } else if substrings
            && want.len().min(have.len()) >= 3
            && (have.contains(&want) || want.contains(&have))
        {
            score += 1.0;
        }
        if score >= min && found.is_none_or(|(s, _)| score > s) {
            found = Some((score, c));
        }
    }
    found.map(|(_, c)| c)
}

/// ` (did you mean 'x'?)` for the closest of `candidates`, or nothing.
pub fn did_you_mean(name: &str, candidates: &[String]) -> String {
    closest(name, candidates.iter().map(String::as_str))
        .map(|s| format!(" (did you mean '{s}'?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(schema: Value) -> Arc<Vec<Tool>> {
        let Value::Object(m) = schema else {
            panic!("object")
        };
        Arc::new(vec![Tool::new(
            "create_issue",
            "Create an issue.",
            Arc::new(m),
        )])
    }

    fn issue_schema() -> Value {
        json!({"type": "object", "properties": {
            "repo": {"type": "string"},
            "title": {"type": "string"},
            "body": {"type": "string"},
            "count": {"type": "integer"},
            "state": {"enum": ["open", "closed"]},
            "options": {"type": "object", "properties": {
                "labels": {"type": "array", "items": {"type": "string"}},
                "draft": {"type": "boolean"}
            }, "required": ["draft"]}
        }, "required": ["repo", "title"]})
    }

    fn problems(schema: Value, args: Value) -> Vec<String> {
        let v = Validators::new();
        match v.check("github", &tools(schema), "create_issue", &args) {
            Ok(()) => vec![],
            Err(Rejection::Invalid {
                signature,
                problems,
            }) => {
                assert!(signature.starts_with("(repo: "), "{signature}");
                problems
            }
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn valid_arguments_pass() {
        let got = problems(
            issue_schema(),
            json!({"repo": "a/b", "title": "t", "count": 3}),
        );
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_missing_argument_is_named() {
        assert_eq!(
            problems(issue_schema(), json!({"repo": "a/b"})),
            ["missing required argument 'title'"]
        );
    }

    #[test]
    fn a_misspelt_argument_gets_a_suggestion_and_other_extras_pass() {
        // `additionalProperties` unset: `titel` is a typo of a property not passed; `extra`
        // resembles nothing and goes through to the server.
        assert_eq!(
            problems(
                issue_schema(),
                json!({"repo": "a/b", "titel": "t", "extra": 1})
            ),
            [
                "missing required argument 'title'",
                "unknown argument 'titel' (did you mean 'title'?)"
            ]
        );
        // Both passed: the near name is taken as meant.
        assert!(problems(
            issue_schema(),
            json!({"repo": "a", "title": "t", "titles": 1})
        )
        .is_empty());
    }

    #[test]
    fn additional_properties_false_reports_every_unknown_argument() {
        let mut s = issue_schema();
        s["additionalProperties"] = json!(false);
        assert_eq!(
            problems(s, json!({"repo": "a", "title": "t", "bdy": "x", "zzz": 1})),
            [
                "unknown argument 'bdy' (did you mean 'body'?)",
                "unknown argument 'zzz'"
            ]
        );
    }

    #[test]
    fn a_mistyped_argument_shows_type_and_value() {
        assert_eq!(
            problems(
                issue_schema(),
                json!({"repo": "a", "title": "t", "count": "5"})
            ),
            ["argument 'count' must be integer, got string \"5\""]
        );
        assert_eq!(
            problems(issue_schema(), json!({"repo": 1, "title": null})),
            [
                "argument 'repo' must be string, got integer 1",
                "argument 'title' must be string, got null null"
            ]
        );
    }

    #[test]
    fn nested_problems_name_the_path() {
        assert_eq!(
            problems(
                issue_schema(),
                json!({"repo": "a", "title": "t", "options": {"labels": ["x", 2]}})
            ),
            [
                "argument 'options' is missing required key 'draft'",
                "argument 'options.labels[1]' must be string, got integer 2"
            ]
        );
    }

    #[test]
    fn enums_list_the_choices() {
        assert_eq!(
            problems(issue_schema(), json!({"repo": "a", "title": "t", "state": "opne"})),
            ["argument 'state' must be one of \"open\", \"closed\", got \"opne\" (did you mean \"open\"?)"]
        );
    }

    #[test]
    fn other_keywords_use_the_crate_message() {
        let s = json!({"type": "object", "properties": {"repo": {"type": "string"}, "title": {"type": "string"}, "n": {"type": "integer", "minimum": 0}}});
        let got = problems(s, json!({"n": -1}));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].starts_with("argument 'n': -1"), "{got:?}");
    }

    #[test]
    fn a_schema_that_does_not_compile_is_not_checked() {
        // A remote reference cannot be resolved offline; the call still goes (names are checked).
        let s = json!({"type": "object", "properties": {"repo": {"$ref": "https://example.com/x.json"}, "title": {"type": "string"}}, "required": ["repo"]});
        assert!(problems(s.clone(), json!({"title": 5})).is_empty());
        assert_eq!(
            problems(s, json!({"repo": "a", "titel": "t"})),
            ["unknown argument 'titel' (did you mean 'title'?)"]
        );
        let bad = json!({"type": 17, "properties": {"repo": {}, "title": {}}});
        assert!(problems(bad, json!({"repo": []})).is_empty());
    }

    #[test]
    fn unknown_tools_are_refused_and_checks_follow_the_tool_list() {
        let v = Validators::new();
        let first = tools(issue_schema());
        assert_eq!(
            v.check("github", &first, "nope", &json!({})),
            Err(Rejection::UnknownTool)
        );
        assert!(v
            .check("github", &first, "create_issue", &json!({}))
            .is_err());
        // A new list (say, after a restart) with a looser schema: recompiled, not reused.
        let second = tools(json!({"type": "object"}));
        assert_eq!(
            v.check("github", &second, "create_issue", &json!({})),
            Ok(())
        );
    }

    #[test]
    fn near_names() {
        let names = ["github", "gitlab", "filesystem", "everything", "get-sum"];
        assert_eq!(closest("githb", names), Some("github"));
        assert_eq!(closest("file_system", names), Some("filesystem"));
        assert_eq!(closest("get_sum", names), Some("get-sum"));
        assert_eq!(closest("everythin", names), Some("everything"));
        assert_eq!(closest("every", names), Some("everything"));
        assert_eq!(closest("zzz", names), None);
        assert_eq!(
            did_you_mean("gitlba", &["gitlab".into()]),
            " (did you mean 'gitlab'?)"
        );
        assert_eq!(closest_argument("titel", ["title", "body"]), Some("title"));
        assert_eq!(closest_argument("text", ["context"]), None);
    }

    #[test]
    fn paths_and_values() {
        let args = json!({"a": {"b/c": [0, {"d": 1}]}});
        assert_eq!(
            python_path("/a/b~1c/1/d", &args).as_deref(),
            Some("a.b/c[1].d")
        );
        assert_eq!(python_path("", &args), None);
        assert_eq!(
            short(&json!("x".repeat(100))).chars().count(),
            MAX_VALUE_CHARS
        );
        assert_eq!(short(&json!((0..20).collect::<Vec<_>>())), "[... 20 items]");
    }
}

/// What a check costs on the hot path: `cargo test --release --lib validate::timing -- --ignored
/// --nocapture` (about 0.05-0.3 µs a call on a typical schema, next to ~75 µs for the call).
#[cfg(test)]
mod timing {
    use super::*;
    use serde_json::json;

    #[test]
    #[ignore = "timing"]
    fn check_cost() {
        let Value::Object(m) = json!({"type": "object", "properties": {
            "owner": {"type": "string", "description": "Repository owner"},
            "repo": {"type": "string", "description": "Repository name"},
            "title": {"type": "string", "description": "Issue title"},
            "body": {"type": "string", "description": "Issue body content"},
            "assignees": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "array", "items": {"type": "string"}},
            "milestone": {"type": "number"}
        }, "required": ["owner", "repo", "title"], "additionalProperties": false,
        "$schema": "http://json-schema.org/draft-07/schema#"}) else {
            unreachable!()
        };
        let tools = Arc::new(vec![Tool::new("create_issue", "x", Arc::new(m))]);
        let v = Validators::new();
        let args = json!({"owner": "o", "repo": "r", "title": "A title", "body": "Some body text", "labels": ["bug", "p1"]});
        let small = json!({"text": "x"});
        let Value::Object(e) = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false})
        else {
            unreachable!()
        };
        let echo = Arc::new(vec![Tool::new("echo", "x", Arc::new(e))]);
        for (name, tools, tool, args) in [
            ("create_issue", &tools, "create_issue", &args),
            ("echo", &echo, "echo", &small),
        ] {
            let s = std::time::Instant::now();
            v.check("gh", tools, tool, args).expect("valid");
            eprintln!("{name}: first call (compile) {:?}", s.elapsed());
            let n = 200_000;
            let s = std::time::Instant::now();
            for _ in 0..n {
                v.check("gh", tools, tool, args).expect("valid");
            }
            eprintln!(
                "{name}: {:.0} ns/check",
                s.elapsed().as_nanos() as f64 / n as f64
            );
        }
    }
}
