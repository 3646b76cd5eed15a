//! Turning a downstream `CallToolResult` into the value sandbox code receives.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::Value;

/// The structured result if present; else the text (joined) parsed as JSON when it is JSON,
/// else the text; non-text content comes back as a list of content objects. Takes the result so
/// a large single text block moves into the value instead of being copied.
pub fn to_value(result: CallToolResult) -> Value {
    if let Some(sc) = result.structured_content {
        return sc;
    }
    if !result.content.iter().all(|c| c.as_text().is_some()) {
        return Value::Array(result.content.iter().map(content_value).collect());
    }
    let mut parts: Vec<String> = result
        .content
        .into_iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text),
            _ => None,
        })
        .collect();
    let text = match parts.len() {
        1 => parts.pop().unwrap_or_default(),
        _ => parts.join("\n"),
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Value::String(text);
    }
    serde_json::from_str::<Value>(trimmed).unwrap_or(Value::String(text))
}

/// Whether `value` has the shape of a FastMCP-wrapped value (`{"result": v}`, one key).
pub fn maybe_wrapped(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.len() == 1 && m.contains_key("result"))
}

/// The structured result of `tool` unwrapped when FastMCP wrapped a plain value in it:
/// `{"result": v}` → `v`, but only when the tool's output schema says so. The official Python
/// SDK's FastMCP titles that schema `<tool>Output` with `result` as its single required
/// property; the standalone fastmcp 2.x marks it `"x-fastmcp-wrap-result": true`. Any other
/// value is returned as it is.
pub fn unwrap_fastmcp(value: Value, tool: Option<&Tool>) -> Value {
    if !tool.is_some_and(wraps_result) {
        return value;
    }
    match value {
        Value::Object(mut m) if m.len() == 1 && m.contains_key("result") => {
            m.remove("result").unwrap_or(Value::Null)
        }
        other => other,
    }
}

/// Whether `tool`'s output schema is FastMCP's wrap of a plain value (see [`unwrap_fastmcp`]).
pub fn wraps_result(tool: &Tool) -> bool {
    let Some(schema) = tool.output_schema.as_deref() else {
        return false;
    };
    let marked = schema.get("x-fastmcp-wrap-result") == Some(&Value::Bool(true));
    marked
        || (schema.get("title").and_then(Value::as_str) == Some(&format!("{}Output", tool.name))
            && schema.get("required") == Some(&serde_json::json!(["result"]))
            && schema
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.len() == 1 && p.contains_key("result")))
}

/// The error text of a result with `isError`.
pub fn error_text(result: &CallToolResult) -> String {
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if text.is_empty() {
        result
            .structured_content
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_else(|| "the tool reported an error".into())
    } else {
        text.join("\n")
    }
}

fn content_value(c: &ContentBlock) -> Value {
    serde_json::to_value(c).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool_with_output(name: &str, output: Value) -> Tool {
        let Value::Object(out) = output else {
            panic!("object")
        };
        let mut t = Tool::new(name.to_string(), "", Arc::new(serde_json::Map::new()));
        t.output_schema = Some(Arc::new(out));
        t
    }

    #[test]
    fn fastmcp_wrapped_values_are_unwrapped_and_nothing_else() {
        let sdk = tool_with_output(
            "add",
            json!({"title": "addOutput", "type": "object",
                   "properties": {"result": {"type": "integer"}}, "required": ["result"]}),
        );
        assert_eq!(unwrap_fastmcp(json!({"result": 3}), Some(&sdk)), json!(3));
        let marked = tool_with_output(
            "greet",
            json!({"type": "object", "properties": {"result": {"type": "string"}},
                   "x-fastmcp-wrap-result": true}),
        );
        assert_eq!(
            unwrap_fastmcp(json!({"result": "hi"}), Some(&marked)),
            json!("hi")
        );
        // A tool whose own output really is {"result": ...}: title of another tool, no marker.
        let plain = tool_with_output(
            "add",
            json!({"title": "Sum", "type": "object",
                   "properties": {"result": {"type": "integer"}}, "required": ["result"]}),
        );
        assert_eq!(
            unwrap_fastmcp(json!({"result": 3}), Some(&plain)),
            json!({"result": 3})
        );
        assert_eq!(
            unwrap_fastmcp(json!({"result": 3}), None),
            json!({"result": 3})
        );
        // More keys than `result`: not a wrapped value.
        assert_eq!(
            unwrap_fastmcp(json!({"result": 3, "x": 1}), Some(&sdk)),
            json!({"result": 3, "x": 1})
        );
    }

    #[test]
    fn structured_then_json_then_text() {
        let mut r = CallToolResult::success(vec![ContentBlock::text("ignored")]);
        r.structured_content = Some(json!({"a": 1}));
        assert_eq!(to_value(r.clone()), json!({"a": 1}));
        let r = CallToolResult::success(vec![ContentBlock::text("{\"sum\": 3}")]);
        assert_eq!(to_value(r.clone()), json!({"sum": 3}));
        let r = CallToolResult::success(vec![
            ContentBlock::text("hello"),
            ContentBlock::text("world"),
        ]);
        assert_eq!(to_value(r.clone()), json!("hello\nworld"));
        let r = CallToolResult::success(vec![ContentBlock::text("42")]);
        assert_eq!(to_value(r.clone()), json!(42));
        let r = CallToolResult::success(vec![ContentBlock::text("")]);
        assert_eq!(to_value(r.clone()), json!(""));
        let r = CallToolResult::error(vec![ContentBlock::text("bad input")]);
        assert_eq!(error_text(&r), "bad input");
    }
}
