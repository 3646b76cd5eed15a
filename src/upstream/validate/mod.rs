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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde_json::Value;

use super::docs;
use super::near::{closest, closest_argument};

/// Problems listed at most in one error.
const MAX_PROBLEMS: usize = 10;
/// Characters of an offending value shown at most.
const MAX_VALUE_CHARS: usize = 40;
/// Values in arguments past which only the first problem is looked for: the schema crate
/// collects every error before handing out the first, and arguments from the sandbox can
/// have millions of values, each a few errors.
const MAX_LISTED_VALUES: usize = 10_000;
/// Compiled checks kept at most, over all servers.
const MAX_CHECKS: usize = 128;

/// Compiled argument checks for every server's tools, by server; shared by all calls.
#[derive(Default)]
pub struct Validators {
    cache: Mutex<Cache>,
}

/// The compiled checks, by server, with a use clock for dropping the least recently used.
#[derive(Default)]
struct Cache {
    servers: HashMap<String, ServerChecks>,
    /// Checks held, over all servers.
    len: usize,
    /// Bumped on every use; a check's `used` is the clock at its last use.
    clock: u64,
}

/// The checks of one server's tools, valid for the one tool list they were made from.
struct ServerChecks {
    /// The list the checks belong to (pointer identity is the cache key; holding it keeps the
    /// address from being reused by another list).
    tools: Arc<Vec<Tool>>,
    /// By tool: the check and when it was last used.
    checks: HashMap<String, (Arc<Check>, u64)>,
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
            let mut cache = self.cache.lock().expect("validator cache lock");
            let clock = cache.tick();
            if let Some(s) = cache.servers.get_mut(server) {
                if Arc::ptr_eq(&s.tools, tools) {
                    if let Some((c, used)) = s.checks.get_mut(tool) {
                        *used = clock;
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

impl Cache {
    /// The next value of the use clock.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Keeps `check` for `tool` of `server`'s list `tools` (the server's checks of an older
    /// list are dropped), then drops the least recently used checks past [`MAX_CHECKS`].
    fn insert(&mut self, server: &str, tools: &Arc<Vec<Tool>>, tool: &str, check: Arc<Check>) {
        let clock = self.tick();
        let entry = self
            .servers
            .entry(server.to_string())
            .or_insert_with(|| ServerChecks {
                tools: tools.clone(),
                checks: HashMap::new(),
            });
        if !Arc::ptr_eq(&entry.tools, tools) {
            self.len -= entry.checks.len();
            entry.tools = tools.clone();
            entry.checks.clear();
        }
        if entry
            .checks
            .insert(tool.to_string(), (check, clock))
            .is_none()
        {
            self.len += 1;
        }
        while self.len > MAX_CHECKS {
            self.drop_least_recent();
        }
    }

    /// Drops the check used longest ago, and its server's entry when that was its last one.
    fn drop_least_recent(&mut self) {
        let oldest = self
            .servers
            .iter()
            .flat_map(|(server, s)| {
                s.checks
                    .iter()
                    .map(move |(tool, (_, used))| (*used, server, tool))
            })
            .min_by_key(|(used, _, _)| *used)
            .map(|(_, server, tool)| (server.clone(), tool.clone()));
        let Some((server, tool)) = oldest else {
            self.len = 0;
            return;
        };
        if let Some(s) = self.servers.get_mut(&server) {
            s.checks.remove(&tool);
            self.len -= 1;
            if s.checks.is_empty() {
                self.servers.remove(&server);
            }
        }
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
                tracing::debug!(server = %crate::shown::Shown(server), tool = %crate::shown::Shown(&tool.name), cause = %err, "input schema not checked: it does not compile");
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
                if values_within(args, MAX_LISTED_VALUES) {
                    for err in v.iter_errors(args) {
                        describe(&err, args, &self.properties, &mut problems);
                    }
                } else if let Err(err) = v.validate(args) {
                    describe(&err, args, &self.properties, &mut problems);
                    problems.push(format!(
                        "(the arguments hold more than {MAX_LISTED_VALUES} values: only the first \
                         problem was looked for)"
                    ));
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

/// Whether `v` holds at most `max` values (itself included); stops counting past it.
fn values_within(v: &Value, max: usize) -> bool {
    fn count(v: &Value, left: &mut usize) -> bool {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        match v {
            Value::Array(items) => items.iter().all(|i| count(i, left)),
            Value::Object(map) => map.values().all(|i| count(i, left)),
            _ => true,
        }
    }
    let mut left = max;
    count(v, &mut left)
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

#[cfg(test)]
mod tests;
