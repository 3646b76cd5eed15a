//! [`Validators`]: a proxied call's arguments checked against the tool's `inputSchema` before the
//! call is sent, so a wrong call fails at once with the tool's signature and every problem found,
//! with "did you mean" for misspelt argument names (`near.rs`). Pure apart from
//! the validator cache; no I/O.
//!
//! A tool's schema is compiled on its first call (the `jsonschema` crate, offline: no remote
//! `$ref`, formats not asserted) and kept per server until that server's tool list changes (a
//! new `Arc`); at most [`MAX_CHECKS`] are kept, the least recently used dropped first (a
//! compiled schema takes kilobytes, and sandbox code may call every tool of every server).
//! Servers' schemas are often sloppy, so checking errs on the side of letting calls through: a
//! schema that does not compile is not checked, and regex engine failures are not reported.

use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde_json::Value;

use super::docs;

mod cache;
mod check;

use cache::Cache;
#[cfg(test)]
use cache::MAX_CHECKS;
use check::Check;

/// Compiled argument checks for every server's tools, by server; shared by all calls.
#[derive(Default)]
pub struct Validators {
    cache: Mutex<Cache>,
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
        if let Some(check) = self
            .cache
            .lock()
            .expect("validator cache lock")
            .get(server, tools, tool)
        {
            return Ok(check);
        }
        // Compiled outside the lock: a big schema must not hold up other servers' calls.
        let t = tools
            .iter()
            .find(|t| t.name == tool)
            .ok_or(Rejection::UnknownTool)?;
        let check = Arc::new(Check::compile(server, t));
        let mut cache = self.cache.lock().expect("validator cache lock");
        cache.insert(server, tools, tool, check.clone());
        Ok(check)
    }

    /// Compiled checks held now (at most [`MAX_CHECKS`]).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.cache.lock().expect("validator cache lock").len
    }
}

#[cfg(test)]
mod tests {
    // Tests of argument checking and of its "did you mean".
    use super::check::MAX_LISTED_VALUES;
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
    fn arguments_of_many_values_get_their_first_problem_only() {
        // 10,000 wrong items would be 10,000 errors held at once: only the first is looked for.
        let labels = vec![json!(1); MAX_LISTED_VALUES];
        let args = json!({"repo": "r", "title": "t", "options": {"draft": true, "labels": labels}});
        let p = problems(issue_schema(), args);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].contains("options.labels[0]") && p[0].contains("must be string"),
            "{p:?}"
        );
        assert!(p[1].contains("only the first problem"), "{p:?}");
        // Fewer values: every problem, as before.
        let args = json!({"repo": "r", "title": "t", "options": {"draft": true, "labels": [1, 2]}});
        assert_eq!(problems(issue_schema(), args).len(), 2);
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
    fn compiled_checks_are_bounded_and_the_least_recently_used_go_first() {
        let v = Validators::new();
        let servers = MAX_CHECKS + 10;
        let list = tools(issue_schema());
        assert_eq!(v.len(), 0, "nothing is compiled before a call");
        // One tool each of more servers than the bound; the first server stays in use throughout.
        for i in 0..servers {
            let server = format!("s{i}");
            assert!(v.check(&server, &list, "create_issue", &json!({})).is_err());
            assert!(v.check("s0", &list, "create_issue", &json!({})).is_err());
            assert!(v.len() <= MAX_CHECKS, "{} checks held", v.len());
        }
        assert_eq!(v.len(), MAX_CHECKS);
        let cache = v.cache.lock().expect("lock");
        assert!(cache.servers.contains_key("s0"), "the one in use is kept");
        assert!(
            !cache.servers.contains_key("s1"),
            "the least recently used went"
        );
        assert!(cache.servers.contains_key(&format!("s{}", servers - 1)));
        drop(cache);
        // A dropped check is compiled again and checks the same.
        assert_eq!(
            v.check(
                "s1",
                &list,
                "create_issue",
                &json!({"repo": "r", "title": "t"})
            ),
            Ok(())
        );
        assert!(v.check("s1", &list, "create_issue", &json!({})).is_err());
    }

    /// What a check costs on the hot path: `cargo test --release --lib validate::timing -- --ignored
    /// --nocapture` (about 0.05-0.3 µs a call on a typical schema, next to ~75 µs for the call).
    mod timing {
        use super::super::*;
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
}
