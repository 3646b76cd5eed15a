//! Turning a downstream `CallToolResult` into the value sandbox code receives.

use rmcp::model::{CallToolResult, ContentBlock};
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
