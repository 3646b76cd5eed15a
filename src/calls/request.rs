//! [`HostRequest`]: a `call` frame's method and parameters, parsed once (in the dispatcher)
//! into one typed variant per host method. Bad parameters are `bad_request` errors here, so
//! no handler reads raw JSON.

use serde_json::{Map, Value};

use super::error::CallError;
use super::host_method::HostMethod;

/// Results `search_tool_docs` returns at most.
pub const MAX_SEARCH_LIMIT: usize = 100;
/// Results `search_tool_docs` returns when its `limit` is not a whole number.
const DEFAULT_SEARCH_LIMIT: usize = 5;

/// A request from sandbox code, typed: what the dispatcher routes and a policy hook sees.
#[derive(Debug, Clone, PartialEq)]
pub enum HostRequest {
    /// `ping`: echoes its params (answered by the dispatcher).
    Ping(Value),
    /// `reset`: the user empties the namespace on purpose; the snapshot kept for an idle stop
    /// is dropped (answered by the dispatcher).
    Reset,
    /// A method the [`super::host_calls::HostCalls`] backend answers.
    Backend(BackendCall),
}

/// A host method the [`super::host_calls::HostCalls`] backend answers (MCP servers and discovery).
#[derive(Debug, Clone, PartialEq)]
pub enum BackendCall {
    /// `call_tool`: a proxied MCP tool call.
    CallTool(ToolCall),
    /// `list_servers`.
    ListServers,
    /// `discovered_servers`.
    DiscoveredServers,
    /// `list_tools(server)`.
    ListTools {
        /// The server.
        server: String,
    },
    /// `query_tool_docs(server, tool=None, detail="summary")`.
    QueryToolDocs {
        /// The server.
        server: String,
        /// One tool (exact name or alias), or all of them.
        tool: Option<String>,
        /// How much of each tool.
        detail: Detail,
    },
    /// `stubs(server)`: the server's tools as typed Python stubs.
    Stubs {
        /// The server.
        server: String,
    },
    /// `save_skill`: keeps a function of the cell as a skill, unapproved until the user
    /// approves its text.
    SaveSkill {
        /// The skill's name (a Python identifier; checked by the store).
        name: String,
        /// The module text: the imports it uses and the function.
        source: String,
        /// Whether the function is `async def`.
        is_async: bool,
        /// Its docstring's first line (or empty).
        description: String,
    },
    /// `list_skills`: the skills of the run's owner.
    ListSkills,
    /// `load_skill(name)`: the module text of an approved skill.
    LoadSkill {
        /// The skill.
        name: String,
    },
    /// `search_tool_docs(query, limit=5, detail="summary")`.
    SearchToolDocs {
        /// Words to look for.
        query: String,
        /// Results at most (at most [`MAX_SEARCH_LIMIT`]).
        limit: usize,
        /// How much of each tool.
        detail: Detail,
    },
    /// `describe_server(name)`.
    DescribeServer {
        /// The server.
        name: String,
    },
    /// `list_loaded_server_metadata`.
    ListLoadedServerMetadata,
    /// `capability_summary`.
    CapabilitySummary,
}

/// A proxied tool call's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// Its arguments (an empty object when the sandbox sent none).
    pub arguments: Map<String, Value>,
}

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

impl HostRequest {
    /// Parses a `call` frame's `method` and `params`.
    ///
    /// # Errors
    /// A `bad_request` error for an unknown method or a parameter of the wrong type.
    pub fn parse(method: &str, mut params: Value) -> Result<HostRequest, CallError> {
        let Some(known) = HostMethod::parse(method) else {
            return Err(CallError::bad_request(format!(
                "unknown host method '{method}'"
            )));
        };
        let call = match known {
            HostMethod::Ping => return Ok(HostRequest::Ping(params)),
            HostMethod::Reset => return Ok(HostRequest::Reset),
            HostMethod::CallTool => BackendCall::CallTool(ToolCall::parse(params)?),
            HostMethod::ListServers => BackendCall::ListServers,
            HostMethod::DiscoveredServers => BackendCall::DiscoveredServers,
            HostMethod::ListTools => BackendCall::ListTools {
                server: string(&mut params, "server")?,
            },
            HostMethod::QueryToolDocs => BackendCall::QueryToolDocs {
                server: string(&mut params, "server")?,
                detail: detail(&mut params)?,
                tool: optional_string(&mut params, "tool")?,
            },
            HostMethod::Stubs => BackendCall::Stubs {
                server: string(&mut params, "server")?,
            },
            HostMethod::SaveSkill => BackendCall::SaveSkill {
                name: string(&mut params, "name")?,
                source: string(&mut params, "source")?,
                is_async: match params.get("is_async") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(CallError::bad_request("'is_async' must be a bool")),
                },
                description: optional_string(&mut params, "description")?.unwrap_or_default(),
            },
            HostMethod::ListSkills => BackendCall::ListSkills,
            HostMethod::LoadSkill => BackendCall::LoadSkill {
                name: string(&mut params, "name")?,
            },
            HostMethod::SearchToolDocs => BackendCall::SearchToolDocs {
                query: string(&mut params, "query")?,
                limit: params
                    .get("limit")
                    .and_then(Value::as_u64)
                    .unwrap_or(DEFAULT_SEARCH_LIMIT as u64)
                    .min(MAX_SEARCH_LIMIT as u64) as usize,
                detail: detail(&mut params)?,
            },
            HostMethod::DescribeServer => BackendCall::DescribeServer {
                name: string(&mut params, "name")?,
            },
            HostMethod::ListLoadedServerMetadata => BackendCall::ListLoadedServerMetadata,
            HostMethod::CapabilitySummary => BackendCall::CapabilitySummary,
        };
        Ok(HostRequest::Backend(call))
    }

    /// The host method this request calls.
    pub fn method(&self) -> HostMethod {
        match self {
            HostRequest::Ping(_) => HostMethod::Ping,
            HostRequest::Reset => HostMethod::Reset,
            HostRequest::Backend(call) => call.method(),
        }
    }
}

impl BackendCall {
    /// The host method this call is.
    pub fn method(&self) -> HostMethod {
        match self {
            BackendCall::CallTool(_) => HostMethod::CallTool,
            BackendCall::ListServers => HostMethod::ListServers,
            BackendCall::DiscoveredServers => HostMethod::DiscoveredServers,
            BackendCall::ListTools { .. } => HostMethod::ListTools,
            BackendCall::QueryToolDocs { .. } => HostMethod::QueryToolDocs,
            BackendCall::Stubs { .. } => HostMethod::Stubs,
            BackendCall::SaveSkill { .. } => HostMethod::SaveSkill,
            BackendCall::ListSkills => HostMethod::ListSkills,
            BackendCall::LoadSkill { .. } => HostMethod::LoadSkill,
            BackendCall::SearchToolDocs { .. } => HostMethod::SearchToolDocs,
            BackendCall::DescribeServer { .. } => HostMethod::DescribeServer,
            BackendCall::ListLoadedServerMetadata => HostMethod::ListLoadedServerMetadata,
            BackendCall::CapabilitySummary => HostMethod::CapabilitySummary,
        }
    }
}

impl ToolCall {
    /// `call_tool`'s params: `server`, `tool` and `arguments` (a dict, or absent or None).
    /// The arguments are moved out, not copied: they can be large.
    fn parse(mut params: Value) -> Result<ToolCall, CallError> {
        let arguments = match params.get_mut("arguments").map(Value::take) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args,
            Some(_) => return Err(CallError::bad_request("'arguments' must be a dict")),
        };
        Ok(ToolCall {
            server: string(&mut params, "server")?,
            tool: string(&mut params, "tool")?,
            arguments,
        })
    }
}

/// Parameter `key`, which must be a string (moved out of `params`, not copied).
fn string(params: &mut Value, key: &str) -> Result<String, CallError> {
    match params.get_mut(key).map(Value::take) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(CallError::bad_request(format!("'{key}' must be a string"))),
    }
}

/// Parameter `key`, which must be a string, None or absent (moved out of `params`).
fn optional_string(params: &mut Value, key: &str) -> Result<Option<String>, CallError> {
    match params.get_mut(key).map(Value::take) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(CallError::bad_request(format!(
            "'{key}' must be a string or None"
        ))),
    }
}

/// The `detail` parameter.
fn detail(params: &mut Value) -> Result<Detail, CallError> {
    Detail::parse(optional_string(params, "detail")?.as_deref()).map_err(CallError::bad_request)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(method: &str, params: Value) -> String {
        let err = HostRequest::parse(method, params).expect_err("refused");
        assert_eq!(err.kind.as_str(), "bad_request");
        err.message
    }

    #[test]
    fn each_method_parses_into_its_variant() {
        let call = HostRequest::parse(
            "call_tool",
            json!({"server": "gh", "tool": "t", "arguments": {"a": 1}}),
        );
        let Ok(HostRequest::Backend(BackendCall::CallTool(call))) = call else {
            panic!("{call:?}")
        };
        assert_eq!((call.server.as_str(), call.tool.as_str()), ("gh", "t"));
        assert_eq!(Value::Object(call.arguments), json!({"a": 1}));
        let bare = HostRequest::parse("call_tool", json!({"server": "gh", "tool": "t"}));
        assert!(
            matches!(bare, Ok(HostRequest::Backend(BackendCall::CallTool(c))) if c.arguments.is_empty())
        );
        assert_eq!(
            HostRequest::parse("ping", json!([1])),
            Ok(HostRequest::Ping(json!([1])))
        );
        assert_eq!(
            HostRequest::parse("search_tool_docs", json!({"query": "q", "limit": 1000})),
            Ok(HostRequest::Backend(BackendCall::SearchToolDocs {
                query: "q".into(),
                limit: MAX_SEARCH_LIMIT,
                detail: Detail::Summary
            }))
        );
        assert_eq!(
            HostRequest::parse("search_tool_docs", json!({"query": "q", "limit": "x"})),
            Ok(HostRequest::Backend(BackendCall::SearchToolDocs {
                query: "q".into(),
                limit: DEFAULT_SEARCH_LIMIT,
                detail: Detail::Summary
            }))
        );
        assert_eq!(
            HostRequest::parse(
                "query_tool_docs",
                json!({"server": "gh", "detail": "full", "tool": null})
            ),
            Ok(HostRequest::Backend(BackendCall::QueryToolDocs {
                server: "gh".into(),
                tool: None,
                detail: Detail::Full
            }))
        );
        for m in HostMethod::ALL {
            let params =
                json!({"server": "s", "tool": "t", "query": "q", "name": "n", "source": "x"});
            let r = HostRequest::parse(m.name(), params).expect("parses");
            assert_eq!(r.method(), *m);
        }
    }

    #[test]
    fn bad_params_are_bad_requests_naming_the_parameter() {
        assert_eq!(
            refused(
                "call_tool",
                json!({"server": "gh", "tool": "t", "arguments": [1]})
            ),
            "'arguments' must be a dict"
        );
        assert_eq!(
            refused("call_tool", json!({"tool": "t"})),
            "'server' must be a string"
        );
        assert_eq!(
            refused("call_tool", json!({"server": "gh", "tool": 3})),
            "'tool' must be a string"
        );
        assert_eq!(
            refused("list_tools", Value::Null),
            "'server' must be a string"
        );
        assert_eq!(
            refused("query_tool_docs", json!({"server": "gh", "tool": 1})),
            "'tool' must be a string or None"
        );
        assert_eq!(
            refused(
                "search_tool_docs",
                json!({"query": "q", "detail": "verbose"})
            ),
            "detail must be \"summary\" or \"full\", not \"verbose\""
        );
        assert_eq!(
            refused("describe_server", json!({})),
            "'name' must be a string"
        );
        assert_eq!(
            refused(
                "save_skill",
                json!({"name": "f", "source": "x", "is_async": "yes"})
            ),
            "'is_async' must be a bool"
        );
        assert_eq!(
            refused("save_skill", json!({"name": "f"})),
            "'source' must be a string"
        );
        assert_eq!(refused("load_skill", json!({})), "'name' must be a string");
        assert_eq!(refused("rm_rf", json!({})), "unknown host method 'rm_rf'");
        assert!(Detail::parse(Some("verbose")).is_err());
    }
}
