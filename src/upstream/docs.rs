//! Tool documentation on demand: one-line summaries, full docs with input schema and a
//! Python-style signature. Pure functions.

use rmcp::model::Tool;
use serde_json::{json, Map, Value};

pub use crate::calls::Detail;

/// The first line of a tool's description, trimmed to 200 characters.
pub fn one_line(tool: &Tool) -> String {
    let d = tool.description.as_deref().unwrap_or("").trim();
    let line = d.lines().next().unwrap_or("");
    if line.chars().count() > 200 {
        format!("{}…", line.chars().take(199).collect::<String>())
    } else {
        line.to_string()
    }
}

/// The Python identifier for a server or tool name: every character outside `[A-Za-z0-9_]`
/// becomes `_`, and a leading `_` is added when it starts with a digit (`my-server.v2` →
/// `my_server_v2`). The entrypoint's `proxies.alias` is the same function.
pub fn alias(name: &str) -> String {
    let mut a: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if a.starts_with(|c: char| c.is_ascii_digit()) {
        a.insert(0, '_');
    }
    a
}

/// Docs for one tool at `detail`, in the shape both bridges document: `server`, `serverAlias`,
/// `tool`, `toolAlias`, `description` (and `name`, the same as `tool`); `full` adds
/// `input_schema` (also as `inputSchema`, the Python bridge's key) and `signature`.
pub fn doc(server: &str, tool: &Tool, detail: Detail) -> Value {
    let mut v = json!({
        "server": server,
        "serverAlias": alias(server),
        "tool": tool.name,
        "toolAlias": alias(&tool.name),
        "name": tool.name,
        "description": one_line(tool),
    });
    if detail == Detail::Full {
        let schema = Value::Object(tool.input_schema.as_ref().clone());
        v["description"] = json!(tool.description.as_deref().unwrap_or(""));
        v["inputSchema"] = schema.clone();
        v["input_schema"] = schema;
        v["signature"] = json!(signature(tool));
    }
    v
}

/// A tool as listed in `describe_server` and `list_loaded_server_metadata`: name, alias,
/// one-line description and input schema.
pub fn listing(tool: &Tool) -> Value {
    json!({
        "name": tool.name,
        "alias": alias(&tool.name),
        "description": one_line(tool),
        "input_schema": Value::Object(tool.input_schema.as_ref().clone()),
    })
}

/// The tool called `wanted` (its name, its alias, or either in another letter case).
pub fn find<'a>(tools: &'a [Tool], wanted: &str) -> Option<&'a Tool> {
    tools
        .iter()
        .find(|t| t.name == wanted)
        .or_else(|| tools.iter().find(|t| alias(&t.name) == wanted))
        .or_else(|| {
            let lower = wanted.to_lowercase();
            tools
                .iter()
                .find(|t| t.name.to_lowercase() == lower || alias(&t.name).to_lowercase() == lower)
        })
}

/// One parameter of a tool, as its Python signature shows it.
struct Param<'a> {
    name: &'a str,
    schema: &'a Value,
    required: bool,
}

/// The tool's parameters: required ones first, then the optional ones, each group in the order
/// the schema declares them.
fn params(tool: &Tool) -> Vec<Param<'_>> {
    let schema = tool.input_schema.as_ref();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let (mut first, rest): (Vec<_>, Vec<_>) = props
        .iter()
        .map(|(name, p)| Param {
            name,
            schema: p,
            required: required.contains(&name.as_str()),
        })
        .partition(|p| p.required);
    first.extend(rest);
    first
}

/// The Python return annotation of a tool: its output schema's type, else `dict`.
fn returns(tool: &Tool) -> String {
    match tool.output_schema.as_deref() {
        Some(out) => py_type(&Value::Object(out.clone())),
        None => "dict".into(),
    }
}

/// A Python-style signature: `create_issue(repo: str, title: str, body: str = None) -> dict`.
pub fn signature(tool: &Tool) -> String {
    let shown: Vec<String> = params(tool)
        .iter()
        .map(|p| {
            let ty = py_type(p.schema);
            if p.required {
                format!("{}: {ty}", p.name)
            } else {
                let default = p
                    .schema
                    .get("default")
                    .map(py_literal)
                    .unwrap_or_else(|| "None".into());
                format!("{}: {ty} = {default}", p.name)
            }
        })
        .collect();
    format!("{}({}) -> {}", tool.name, shown.join(", "), returns(tool))
}

/// What the sandbox needs to give a tool's proxy function its real signature and help text:
/// `{"name", "doc", "params": [[name, type, required, default?]], "returns"}` (the default
/// only when the schema declares one).
pub fn proxy_entry(tool: &Tool) -> Value {
    let params: Vec<Value> = params(tool)
        .iter()
        .map(|p| {
            let mut v = vec![json!(p.name), json!(py_type(p.schema)), json!(p.required)];
            if let Some(d) = p.schema.get("default").filter(|_| !p.required) {
                v.push(d.clone());
            }
            Value::Array(v)
        })
        .collect();
    json!({
        "name": tool.name,
        "doc": tool.description.as_deref().unwrap_or(""),
        "params": params,
        "returns": returns(tool),
    })
}

fn py_type(schema: &Value) -> String {
    let one = |t: &str, s: &Map<String, Value>| -> String {
        match t {
            "string" => "str".into(),
            "integer" => "int".into(),
            "number" => "float".into(),
            "boolean" => "bool".into(),
            "null" => "None".into(),
            "array" => match s.get("items") {
                Some(items) => format!("list[{}]", py_type(items)),
                None => "list".into(),
            },
            "object" => "dict".into(),
            _ => "Any".into(),
        }
    };
    let Some(s) = schema.as_object() else {
        return "Any".into();
    };
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let lits: Vec<String> = e.iter().take(8).map(py_literal).collect();
        return format!("Literal[{}]", lits.join(", "));
    }
    match s.get("type") {
        Some(Value::String(t)) => one(t, s),
        Some(Value::Array(ts)) => {
            let parts: Vec<String> = ts
                .iter()
                .filter_map(Value::as_str)
                .map(|t| one(t, s))
                .collect();
            parts.join(" | ")
        }
        _ => {
            for key in ["anyOf", "oneOf"] {
                if let Some(alts) = s.get(key).and_then(Value::as_array) {
                    return alts.iter().map(py_type).collect::<Vec<_>>().join(" | ");
                }
            }
            "Any".into()
        }
    }
}

fn py_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn aliases_and_lookup_by_alias() {
        assert_eq!(alias("my-server.v2"), "my_server_v2");
        assert_eq!(alias("1st"), "_1st");
        let schema = Arc::new(serde_json::Map::new());
        let tools = vec![
            Tool::new("get-time", "", schema.clone()),
            Tool::new("Echo", "", schema),
        ];
        assert_eq!(find(&tools, "get-time").map(|t| &*t.name), Some("get-time"));
        assert_eq!(find(&tools, "get_time").map(|t| &*t.name), Some("get-time"));
        assert_eq!(find(&tools, "echo").map(|t| &*t.name), Some("Echo"));
        assert!(find(&tools, "nope").is_none());
    }

    fn tool(schema: Value) -> Tool {
        let Value::Object(m) = schema else {
            panic!("object")
        };
        Tool::new("create_issue", "Create an issue.\nMore text.", Arc::new(m))
    }

    #[test]
    fn signatures_put_required_first() {
        let t = tool(json!({"type": "object", "properties": {
            "body": {"type": "string"},
            "repo": {"type": "string"},
            "title": {"type": "string"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "draft": {"type": "boolean", "default": false},
            "state": {"enum": ["open", "closed"]},
            "n": {"type": ["integer", "null"]}
        }, "required": ["repo", "title"]}));
        // Optional parameters keep the order the schema declares them in.
        assert_eq!(
            signature(&t),
            "create_issue(repo: str, title: str, body: str = None, labels: list[str] = None, draft: bool = False, state: Literal[\"open\", \"closed\"] = None, n: int | None = None) -> dict"
        );
        assert_eq!(one_line(&t), "Create an issue.");
        let full = doc("gh", &t, Detail::Full);
        assert!(full["signature"]
            .as_str()
            .expect("sig")
            .starts_with("create_issue(repo: str"));
        assert_eq!(full["input_schema"]["required"], json!(["repo", "title"]));
        assert_eq!(full["inputSchema"], full["input_schema"]);
        let entry = proxy_entry(&t);
        assert_eq!(entry["params"][0], json!(["repo", "str", true]));
        assert_eq!(entry["params"][4], json!(["draft", "bool", false, false]));
        assert_eq!(entry["params"][3], json!(["labels", "list[str]", false]));
        assert_eq!(entry["returns"], "dict");
        let summary = doc("my-gh", &t, Detail::Summary);
        assert!(summary.get("input_schema").is_none());
        assert_eq!(summary["tool"], "create_issue");
        assert_eq!(summary["toolAlias"], "create_issue");
        assert_eq!(summary["serverAlias"], "my_gh");
    }
}
