//! The `run_python` tool (and `run_typescript`, offered with `MCP_BRIDGE_LANGUAGES`): their
//! definitions (kept small and constant) and argument parsing.

use std::sync::Arc;

use rmcp::model::{JsonObject, MetaObject, Tool};
use serde_json::{json, Value};

use crate::calls::Narrowing;

/// The one tool's name.
pub const TOOL_NAME: &str = "run_python";

/// The tool description: the sandbox helpers in brief, never any server's documentation.
pub const DESCRIPTION: &str = "Run Python in a persistent sandbox (no network; pandas, numpy, \
matplotlib). State persists between calls; top-level await works; a final expression is shown. \
Files in /workspace/out and plots come back. \
MCP servers: pass servers=[\"name\"], then await mcp_<name>.<tool>(arg=...). Find tools: \
from mcp import runtime; runtime.search_tool_docs(\"query\"), \
runtime.query_tool_docs(server, tool, detail=\"full\").";

/// The TypeScript tool's name (`MCP_BRIDGE_LANGUAGES=python,typescript`).
pub const TS_TOOL_NAME: &str = "run_typescript";

/// The TypeScript tool's description: its helpers in brief, as the JavaScript systems name them.
pub const TS_DESCRIPTION: &str = "Run TypeScript or JavaScript (node) in the same persistent \
sandbox (no network). Top-level await; variables persist between calls; console.log is the \
output. MCP servers: pass servers=[\"name\"], then await mcp_<name>.<tool>({...}) or \
await callMCPTool(\"server\", \"tool\", {...}). Find tools: await searchTools(\"query\"), \
await getToolSchema(server, tool), await listServers(), await discoverMCPTools().";

/// The server instructions sent in `initialize` (under 2,048 characters: Claude Code's cap).
pub const INSTRUCTIONS: &str = "Use run_python to reach the user's MCP servers: find tools with \
runtime.search_tool_docs(\"task\"), load them with servers=[...], call \
await mcp_<server>.<tool>(...). Filter and aggregate in Python; print only what you need.";

/// The tool definition returned by `tools/list`, marked to be loaded up front by clients that
/// defer tools behind a tool search (`anthropic/alwaysLoad`, Claude Code).
pub fn definition() -> Tool {
    definition_with(None)
}

/// The `run_typescript` definition: [`definition`]'s schema (with `serve`'s `sandbox` and
/// `release` when `many`) under the TypeScript tool's name and description.
pub fn definition_ts(many: bool) -> Tool {
    let mut tool = if many {
        definition_for_many()
    } else {
        definition()
    };
    tool.name = TS_TOOL_NAME.into();
    tool.description = Some(TS_DESCRIPTION.into());
    let mut schema = (*tool.input_schema).clone();
    if let Some(Value::Object(code)) = schema.get_mut("properties").and_then(|p| p.get_mut("code"))
    {
        code.insert(
            "description".into(),
            "TypeScript or JavaScript source".into(),
        );
    }
    tool.input_schema = Arc::new(schema);
    tool
}

/// The tool definition `serve --http` lists: [`definition`] plus the optional `sandbox`
/// handle, described so that models pass it back (clients without MCP sessions need it to
/// keep their state).
pub fn definition_for_many() -> Tool {
    definition_with(Some((
        json!({
            "type": "string",
            "description": "Handle from an earlier result (\"this sandbox's handle is ...\"); pass it to keep your variables and files"
        }),
        json!({
            "type": "boolean",
            "description": "End this sandbox after the call (code may be empty); its handle stops working"
        }),
    )))
}

/// The schema, with `serve`'s `sandbox` and `release` properties when given.
fn definition_with(many: Option<(Value, Value)>) -> Tool {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "Python source"},
            "servers": {"type": "array", "items": {"type": "string"}, "description": "MCP servers to load"},
            "timeout": {"type": "integer", "minimum": 1, "description": "Seconds"},
            "allowed_tools": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["code"]
    });
    if let Some((sandbox, release)) = many {
        schema["properties"]["sandbox"] = sandbox;
        schema["properties"]["release"] = release;
    }
    let Value::Object(schema) = schema else {
        unreachable!("a json object literal")
    };
    let mut meta = JsonObject::new();
    meta.insert("anthropic/alwaysLoad".into(), Value::Bool(true));
    let mut tool = Tool::new(TOOL_NAME, DESCRIPTION, Arc::new(schema));
    tool.meta = Some(MetaObject(meta));
    tool
}

/// Validated `run_python` arguments.
#[derive(Debug, PartialEq)]
pub struct RunArgs {
    /// Python source.
    pub code: String,
    /// Servers to load.
    pub servers: Arc<[String]>,
    /// Requested timeout in seconds.
    pub timeout: Option<u64>,
    /// `allowed_tools`: narrows what the run may call (never widens the config).
    pub narrowing: Option<Narrowing>,
    /// `sandbox`: the handle of a client's sandbox (`serve --http`, clients without sessions).
    pub sandbox: Option<String>,
    /// `release`: end the client's sandbox after this call (`serve --http`; ignored by `run`).
    pub release: bool,
}

/// Characters a `sandbox` handle may have at most (the hub's are far shorter).
pub const MAX_HANDLE_CHARS: usize = 128;

/// Parses and validates the arguments of a `run_python` call.
///
/// # Errors
/// A message for a JSON-RPC invalid-params error.
pub fn parse_args(args: Option<JsonObject>) -> Result<RunArgs, String> {
    let mut args = args.unwrap_or_default();
    if let Some(unknown) = args.keys().find(|k| {
        !matches!(
            k.as_str(),
            "code" | "servers" | "timeout" | "allowed_tools" | "sandbox" | "release"
        )
    }) {
        return Err(format!(
            "unknown argument '{unknown}'; run_python takes code, servers, timeout, allowed_tools, sandbox and release"
        ));
    }
    let release = match args.get("release") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("'release' must be true or false".into()),
    };
    let sandbox = match args.remove("sandbox") {
        None | Some(Value::Null) => None,
        Some(Value::String(h)) if h.chars().count() <= MAX_HANDLE_CHARS => Some(h),
        Some(_) => {
            return Err(format!(
                "'sandbox' must be a handle string (at most {MAX_HANDLE_CHARS} characters)"
            ))
        }
    };
    let code = match args.remove("code") {
        Some(Value::String(s)) => s,
        Some(_) => return Err("'code' must be a string".into()),
        None => return Err("missing required argument 'code'".into()),
    };
    let servers = strings(&mut args, "servers")?.unwrap_or_default().into();
    let narrowing = match strings(&mut args, "allowed_tools")? {
        None => None,
        Some(entries) => Some(Narrowing::parse(&entries)?),
    };
    let timeout = match args.get("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Some(n),
            _ => return Err("'timeout' must be a whole number of seconds, at least 1".into()),
        },
    };
    Ok(RunArgs {
        code,
        servers,
        timeout,
        narrowing,
        sandbox,
        release,
    })
}

/// The array of strings `key`, taken out of `args` (not copied); `None` when absent or null.
fn strings(args: &mut JsonObject, key: &str) -> Result<Option<Vec<String>>, String> {
    let bad = || format!("'{key}' must be an array of strings");
    match args.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(bad()),
            })
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> JsonObject {
        match v {
            Value::Object(o) => o,
            _ => panic!("object expected"),
        }
    }

    #[test]
    fn valid_arguments() {
        let a = parse_args(Some(obj(
            json!({"code": "print(1)", "servers": ["a"], "timeout": 5}),
        )))
        .expect("valid");
        assert_eq!(
            a,
            RunArgs {
                code: "print(1)".into(),
                servers: vec!["a".to_string()].into(),
                timeout: Some(5),
                narrowing: None,
                sandbox: None,
                release: false,
            }
        );
        let r = parse_args(Some(obj(
            json!({"code": "", "sandbox": "sbx_1", "release": true}),
        )))
        .expect("valid");
        assert!(r.release && r.sandbox.as_deref() == Some("sbx_1"));
    }

    #[test]
    fn invalid_arguments_say_why() {
        for (args, needle) in [
            (json!({}), "missing required argument 'code'"),
            (json!({"code": 1}), "'code' must be a string"),
            (json!({"code": "x", "servers": "a"}), "'servers'"),
            (json!({"code": "x", "servers": [1]}), "'servers'"),
            (json!({"code": "x", "timeout": 0}), "'timeout'"),
            (json!({"code": "x", "timeout": "5"}), "'timeout'"),
            (json!({"code": "x", "timeout": 1.5}), "'timeout'"),
            (json!({"code": "x", "cmd": "y"}), "unknown argument 'cmd'"),
            (
                json!({"code": "x", "allowed_tools": "a.b"}),
                "'allowed_tools'",
            ),
            (json!({"code": "x", "allowed_tools": ["ab"]}), "server.tool"),
            (json!({"code": "x", "sandbox": 7}), "'sandbox'"),
            (json!({"code": "x", "release": "yes"}), "'release'"),
            (
                json!({"code": "x", "sandbox": "h".repeat(200)}),
                "'sandbox'",
            ),
            (
                json!({"code": "x", "approved": true}),
                "unknown argument 'approved'",
            ),
        ] {
            let err = parse_args(Some(obj(args))).expect_err("invalid");
            assert!(err.contains(needle), "{err}");
        }
        assert!(parse_args(None).is_err());
    }

    #[test]
    fn definition_is_small() {
        let bytes = serde_json::to_string(&definition())
            .expect("serializes")
            .len();
        assert!(
            bytes < 1000,
            "tools/list entry is {bytes} bytes; keep it under ~250 tokens"
        );
        // What every session pays: the tools/list entry and the instructions, ~260 tokens
        // (the optional `allowed_tools` argument added ~70 bytes, with no description).
        assert!(
            bytes + INSTRUCTIONS.len() < 1060,
            "tools/list + instructions: {} bytes",
            bytes + INSTRUCTIONS.len()
        );
        let def = serde_json::to_value(definition()).expect("serializes");
        assert_eq!(def["_meta"]["anthropic/alwaysLoad"], json!(true));
        assert!(def["inputSchema"]["properties"].get("sandbox").is_none());
        let ts = serde_json::to_value(definition_ts(false)).expect("serializes");
        assert_eq!(ts["name"], json!(TS_TOOL_NAME));
        assert!(ts.to_string().len() < 1200, "run_typescript entry: {ts}");
        assert_eq!(ts["inputSchema"]["required"], json!(["code"]));
        assert_eq!(ts["_meta"]["anthropic/alwaysLoad"], json!(true));
        assert!(def["inputSchema"]["properties"].get("release").is_none());
        // serve --http adds the handle, described so that models pass it back.
        let many = serde_json::to_value(definition_for_many()).expect("serializes");
        let bytes = many.to_string().len();
        assert!(bytes < 1200, "serve's tools/list entry is {bytes} bytes");
        assert_eq!(
            many["inputSchema"]["properties"]["sandbox"]["type"],
            json!("string")
        );
        assert_eq!(
            many["inputSchema"]["properties"]["release"]["type"],
            json!("boolean")
        );
    }
}
