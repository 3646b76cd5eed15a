//! Tool documentation on demand: one-line summaries, full docs with input schema and a
//! Python-style signature. Pure functions.

use rmcp::model::Tool;
use serde_json::{json, Value};

use super::pytypes::alias;
use super::stubs::{self, ToolTypes};

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

/// A Python-style signature: `create_issue(repo: str, title: str, body: str | None = None) -> str`,
/// typed as the server's stubs type it (`stubs.rs`).
pub fn signature(tool: &Tool) -> String {
    ToolTypes::of(tool).signature(&tool.name)
}

/// What the sandbox needs to give a tool's proxy function its real signature and help text:
/// `{"name", "doc", "params": [[name, type, required, default?]], "returns"}` (the default
/// only when the schema declares one), typed as the server's stubs type it.
pub fn proxy_entry(tool: &Tool) -> Value {
    let types = ToolTypes::of(tool);
    let params: Vec<Value> = types
        .params
        .iter()
        .map(|p| {
            let mut v = vec![json!(p.name), json!(p.annotation()), json!(p.required)];
            if let Some(d) = p.default.as_ref().filter(|_| !p.required) {
                v.push(d.clone());
            }
            Value::Array(v)
        })
        .collect();
    json!({
        "name": tool.name,
        "doc": stubs::doc_text(tool, &types),
        "params": params,
        "returns": types.returns,
    })
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
            "create_issue(repo: str, title: str, body: str | None = None, labels: list[str] | None = None, draft: bool = False, state: Literal['open', 'closed'] | None = None, n: int | None = None) -> str"
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
        assert_eq!(
            entry["params"][3],
            json!(["labels", "list[str] | None", false])
        );
        assert_eq!(entry["returns"], "str");
        let summary = doc("my-gh", &t, Detail::Summary);
        assert!(summary.get("input_schema").is_none());
        assert_eq!(summary["tool"], "create_issue");
        assert_eq!(summary["toolAlias"], "create_issue");
        assert_eq!(summary["serverAlias"], "my_gh");
    }
}
