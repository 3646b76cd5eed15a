//! One tool's compiled check and the problems it reports, one line each, with "did you mean"
//! for misspelt argument names.

use rmcp::model::Tool;
use serde_json::Value;

use crate::upstream::near::{closest, closest_argument};

/// Problems listed at most in one error.
const MAX_PROBLEMS: usize = 10;
/// Characters of an offending value shown at most.
const MAX_VALUE_CHARS: usize = 40;
/// Values in arguments past which only the first problem is looked for: the schema crate
/// collects every error before handing out the first, and arguments from the sandbox can
/// have millions of values, each a few errors.
pub(super) const MAX_LISTED_VALUES: usize = 10_000;

/// One tool's compiled check.
pub(super) struct Check {
    /// `None` when the schema did not compile: then only argument names are checked.
    validator: Option<jsonschema::Validator>,
    /// The schema's `properties`, in schema order.
    properties: Vec<String>,
    /// Whether arguments outside `properties` are looked at by us (see [`Check::run`]).
    check_names: bool,
}

impl Check {
    /// Compiles `tool`'s input schema (a schema that does not compile checks names only).
    pub(super) fn compile(server: &str, tool: &Tool) -> Check {
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
    pub(super) fn run(&self, args: &Value) -> Vec<String> {
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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::upstream::near::did_you_mean;

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
