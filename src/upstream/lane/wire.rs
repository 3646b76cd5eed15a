//! The lane's JSON-RPC lines: the `tools/call` request it writes and the result it reads.
//!
//! Both are on every proxied call, so both avoid rmcp's general types where those cost: the
//! request is written from the tool name and arguments as they are, and a plain text result
//! (the common case) is read without serde's buffering of internally tagged content blocks.
//! Anything else is read by rmcp's own `CallToolResult`, so the two paths agree by construction.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `tools/call` request line for `tool` with `arguments`, newline included.
pub fn call_request(
    id: u64,
    tool: &str,
    arguments: &JsonObject,
    meta: Option<&JsonObject>,
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Params<'a> {
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<&'a JsonObject>,
        name: &'a str,
        arguments: &'a JsonObject,
    }
    #[derive(Serialize)]
    struct Request<'a> {
        jsonrpc: &'static str,
        id: u64,
        method: &'static str,
        params: Params<'a>,
    }
    let request = Request {
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: Params {
            meta,
            name: tool,
            arguments,
        },
    };
    let mut line = serde_json::to_vec(&request).expect("string keys and JSON values serialize");
    line.push(b'\n');
    line
}

/// Reads the `result` of a `tools/call` reply.
///
/// # Errors
/// serde_json's error when it is not a `CallToolResult`.
pub fn tool_result(raw: &str) -> Result<CallToolResult, serde_json::Error> {
    match serde_json::from_str::<PlainResult>(raw) {
        Ok(plain) => Ok(plain.into_result()),
        Err(_) => serde_json::from_str::<CallToolResult>(raw),
    }
}

/// A result of text blocks only, with no field beyond `content`, `structuredContent` and
/// `isError`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PlainResult {
    content: Vec<PlainText>,
    /// An explicit `null` is kept as `Some(Null)`, as rmcp keeps it.
    #[serde(default, deserialize_with = "present")]
    structured_content: Option<Value>,
    #[serde(default)]
    is_error: Option<bool>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `{"type": "text", "text": ...}` and nothing else (no annotations, no `_meta`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainText {
    #[serde(rename = "type")]
    _kind: TextKind,
    text: String,
}

#[derive(Deserialize)]
enum TextKind {
    #[serde(rename = "text")]
    Text,
}

impl PlainResult {
    fn into_result(self) -> CallToolResult {
        let content = self
            .content
            .into_iter()
            .map(|t| ContentBlock::text(t.text))
            .collect();
        let mut result = CallToolResult::success(content);
        result.structured_content = self.structured_content;
        result.is_error = self.is_error;
        result.result_type = None; // absent on the wire, as rmcp reads it
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_general_results_read_exactly_as_rmcp_reads_them() {
        for raw in [
            r#"{"content":[{"type":"text","text":"x"}]}"#,
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b\n\u00e9"}],"isError":false}"#,
            r#"{"content":[],"isError":true}"#,
            r#"{"content":[{"type":"text","text":"x","annotations":{"priority":0.5}}]}"#,
            r#"{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":1}}"#,
            r#"{"content":[{"type":"text","text":"x"}],"structuredContent":null,"isError":false}"#,
            r#"{"content":[{"type":"text","text":"x"}],"structuredContent":{"text":"x"},"isError":false}"#,
            r#"{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}"#,
            r#"{"content":[{"type":"text","text":"x"}],"_meta":{"k":1}}"#,
            r#"{"isError":true}"#,
            r#"{"content":[{"type":"text","text":"x"}],"resultType":"complete"}"#,
        ] {
            let general = serde_json::from_str::<CallToolResult>(raw).expect("rmcp reads it");
            assert_eq!(tool_result(raw).expect("read"), general, "{raw}");
        }
    }

    #[test]
    fn common_results_take_the_plain_path() {
        for raw in [
            r#"{"content":[{"type":"text","text":"x"}]}"#,
            r#"{"content":[{"type":"text","text":"x"}],"structuredContent":{"text":"x"},"isError":false}"#,
        ] {
            assert!(serde_json::from_str::<PlainResult>(raw).is_ok(), "{raw}");
        }
    }

    #[test]
    fn what_rmcp_rejects_is_rejected() {
        for raw in [
            r#"{"content":[{"type":"text"}]}"#,
            r#"{"content":"x"}"#,
            r#"{"unrelated":1}"#,
            r#"{"content":[{"type":"text","text":"x"}],"resultType":"task"}"#,
            "[]",
        ] {
            assert!(
                serde_json::from_str::<CallToolResult>(raw).is_err(),
                "{raw}"
            );
            assert!(tool_result(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn the_request_line_is_what_rmcp_would_send() {
        let mut args = JsonObject::new();
        args.insert("text".into(), "hi\n".into());
        let line = call_request(7, "echo", &args, None);
        assert!(line.ends_with(b"}\n") && !line[..line.len() - 1].contains(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&line).expect("JSON");
        let mut params =
            rmcp::model::CallToolRequestParams::new("echo").with_arguments(args.clone());
        assert_eq!(
            v,
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                               "params": serde_json::to_value(&params).expect("params")})
        );
        // With a trace context in `_meta`, as rmcp sends it.
        let mut meta = JsonObject::new();
        meta.insert(
            "traceparent".into(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        );
        let line = call_request(7, "echo", &args, Some(&meta));
        let v: serde_json::Value = serde_json::from_slice(&line).expect("JSON");
        params.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
            meta,
        )));
        assert_eq!(v["params"], serde_json::to_value(&params).expect("params"));
    }
}
