//! Tool documentation on demand: one-line summaries, full docs with input schema and a
//! Python-style signature. Pure functions.

use rmcp::model::Tool;
use serde_json::{json, Map, Value};

/// `summary` (name + one line) or `full` (adds schema and signature).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Name and first line of the description.
    Summary,
    /// Everything.
    Full,
}

impl Detail {
    /// Parses `"summary"` / `"full"`.
    ///
    /// # Errors
    /// A message for any other value.
    pub fn parse(v: Option<&str>) -> Result<Detail, String> {
        match v.unwrap_or("summary") {
            "summary" => Ok(Detail::Summary),
            "full" => Ok(Detail::Full),
            other => Err(format!(
                "detail must be \"summary\" or \"full\", not {other:?}"
            )),
        }
    }
}

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

/// Docs for one tool at `detail`.
pub fn doc(server: &str, tool: &Tool, detail: Detail) -> Value {
    let mut v = json!({"server": server, "name": tool.name, "description": one_line(tool)});
    if detail == Detail::Full {
        v["description"] = json!(tool.description.as_deref().unwrap_or(""));
        v["input_schema"] = Value::Object(tool.input_schema.as_ref().clone());
        v["signature"] = json!(signature(tool));
    }
    v
}

/// A Python-style signature: `create_issue(repo: str, title: str, body: str = None) -> dict`.
pub fn signature(tool: &Tool) -> String {
    let schema = tool.input_schema.as_ref();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params: Vec<String> = Vec::new();
    for (name, p) in props.iter().filter(|(n, _)| required.contains(&n.as_str())) {
        params.push(format!("{name}: {}", py_type(p)));
    }
    for (name, p) in props
        .iter()
        .filter(|(n, _)| !required.contains(&n.as_str()))
    {
        let default = p
            .get("default")
            .map(py_literal)
            .unwrap_or_else(|| "None".into());
        params.push(format!("{name}: {} = {default}", py_type(p)));
    }
    let ret = match tool.output_schema.as_deref() {
        Some(out) => py_type(&Value::Object(out.clone())),
        None => "dict".into(),
    };
    format!("{}({}) -> {ret}", tool.name, params.join(", "))
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
        let summary = doc("gh", &t, Detail::Summary);
        assert!(summary.get("input_schema").is_none());
        assert!(Detail::parse(Some("verbose")).is_err());
    }
}
