//! `stub-mcp`: a small, scriptable MCP stdio server for the bridge's tests.
//!
//! Tools (input schemas carry `properties`/`required`/descriptions):
//! - `echo(text: str)` → text `text`, structuredContent `{"text": text}`
//! - `add(a: number, b: number)` → text `{"sum": a+b}` (JSON as text, no structuredContent)
//! - `slow(seconds: number)` → sleeps, then text `done`; honours request cancellation
//! - `crash()` → writes `stub-mcp: crashing on purpose` to stderr and exits with code 3
//! - `big(bytes: integer)` → text of `bytes` `x` characters
//! - `fail(message: str)` → a tool-level error (`isError: true`) with text `message`
//! - `whoami()` → text `{"pid": .., "name": .., "starts": ..}` (JSON); `starts` is the number of
//!   lines in `$STUB_START_FILE` (null when unset)
//! - `tool_0` .. `tool_{N-1}` with `--extra-tools N`: varied, realistic descriptions; they return
//!   text `{"server": name, "tool": "tool_i", "arguments": {..}}` (JSON).
//! - with `--policy-tools`: `drop_table(name: str)` (`destructiveHint: true`), `peek(name: str)`
//!   (`readOnlyHint: true` and `destructiveHint: true`: read-only wins), `write_note(text: str)`
//!   (no hints); each returns text `{"tool": .., "arguments": {..}}` (JSON) and appends
//!   `<tool> <arguments>` to `$STUB_CALL_FILE` when set (what really ran).
//!
//! Bad arguments give a tool-level error (`isError: true`), an unknown tool a JSON-RPC
//! invalid-params error.
//!
//! Flags: `--name NAME` (`server_info` name, default `stub`), `--extra-tools N`,
//! `--garbage-stdout` (print a non-JSON line on stdout once the client sends `initialized`),
//! `--hang-initialize` (never read stdin: a server that hangs in its start),
//! `--linger` (stay alive after the client closes stdin, until killed), `--policy-tools`.
//! Environment: `STUB_START_FILE` — `started <pid>` is appended to it at startup;
//! `STUB_LOG_CALLS` — log every tool call to stderr; `STUB_EXTRA_TOOLS_FILE` — a file holding
//! the number of `tool_i` to list, read at startup (instead of `--extra-tools`): a server whose
//! tool list changes when it restarts.
//! Logs go to stderr only; stdout carries nothing but the protocol (unless `--garbage-stdout`).
// Tool argument helpers return a ready CallToolResult as their error on purpose.
#![allow(clippy::result_large_err)]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

/// Topics for the generated `tool_i` descriptions: (summary, detail of what it returns).
const TOPICS: &[(&str, &str)] = &[
    (
        "List calendar events between two dates",
        "Returns each event's title, start and end time, location and attendees.",
    ),
    (
        "Search GitHub issues in a repository",
        "Filters by label, state and assignee; returns issue numbers, titles and URLs.",
    ),
    (
        "Get the weather forecast for a city",
        "Returns hourly temperature, precipitation probability and wind speed.",
    ),
    (
        "Run a read-only SQL database query",
        "Returns the result rows as a list of objects keyed by column name.",
    ),
    (
        "Send a message to a Slack channel",
        "Posts plain text or markdown and returns the message timestamp.",
    ),
    (
        "Look up a customer record in the CRM",
        "Matches by email or account id and returns contact details and deal history.",
    ),
    (
        "Translate text between languages",
        "Detects the source language when omitted; returns the translated text.",
    ),
    (
        "Fetch stock market quotes for ticker symbols",
        "Returns last price, daily change and trading volume.",
    ),
    (
        "Create a Jira ticket in a project",
        "Sets summary, description, priority and assignee; returns the ticket key.",
    ),
    (
        "Search email messages in the inbox",
        "Matches sender, subject and body; returns message ids, subjects and snippets.",
    ),
    (
        "Read a spreadsheet range from Google Sheets",
        "Returns the cell values of the range as rows of strings.",
    ),
    (
        "Geocode a street address to coordinates",
        "Returns latitude, longitude and a normalized address.",
    ),
    (
        "Upload a file to cloud object storage",
        "Stores the content under a bucket and key; returns the object URL and size.",
    ),
    (
        "Summarize recent pull requests awaiting review",
        "Returns authors, titles, changed file counts and CI status.",
    ),
    (
        "Query application logs for errors",
        "Searches a time window by service and severity; returns matching log lines.",
    ),
    (
        "Convert an amount between currencies",
        "Uses the latest exchange rates; returns the converted amount and the rate.",
    ),
    (
        "Book a meeting room for a time slot",
        "Checks availability and capacity; returns the reservation id.",
    ),
    (
        "Fetch the contents of a web page as markdown",
        "Follows redirects and strips navigation; returns the page title and text.",
    ),
    (
        "List Kubernetes pods in a namespace",
        "Returns pod names, phases, restart counts and node placement.",
    ),
    (
        "Create an invoice for a customer",
        "Adds line items with quantities and prices; returns the invoice number and total.",
    ),
];

/// Parsed command line.
struct Options {
    name: String,
    extra_tools: usize,
    garbage_stdout: bool,
    hang_initialize: bool,
    linger: bool,
    policy_tools: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut opts = Options {
        name: "stub".to_string(),
        extra_tools: 0,
        garbage_stdout: false,
        hang_initialize: false,
        linger: false,
        policy_tools: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--name" => opts.name = args.next().ok_or("--name needs a value")?,
            "--extra-tools" => {
                let v = args.next().ok_or("--extra-tools needs a value")?;
                opts.extra_tools = v
                    .parse()
                    .map_err(|_| format!("--extra-tools: not a number: {v}"))?;
            }
            "--garbage-stdout" => opts.garbage_stdout = true,
            "--hang-initialize" => opts.hang_initialize = true,
            "--linger" => opts.linger = true,
            "--policy-tools" => opts.policy_tools = true,
            other => {
                if let Some(v) = other.strip_prefix("--name=") {
                    opts.name = v.to_string();
                } else if let Some(v) = other.strip_prefix("--extra-tools=") {
                    opts.extra_tools = v
                        .parse()
                        .map_err(|_| format!("--extra-tools: not a number: {v}"))?;
                } else {
                    return Err(format!("unknown argument: {other}"));
                }
            }
        }
    }
    Ok(opts)
}

/// A JSON Schema object for a tool's input.
#[allow(clippy::needless_pass_by_value)] // called with json!(..) temporaries
fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let v = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match v {
        Value::Object(m) => Arc::new(m),
        _ => unreachable!("schema is an object"),
    }
}

fn build_tools(opts: &Options) -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(
            "echo",
            "Echo the given text back unchanged (also as structured content).",
            schema(
                json!({"text": {"type": "string", "description": "Text to echo back"}}),
                &["text"],
            ),
        ),
        Tool::new(
            "add",
            "Add two numbers and return their sum as JSON text {\"sum\": a + b}.",
            schema(
                json!({
                    "a": {"type": "number", "description": "First addend"},
                    "b": {"type": "number", "description": "Second addend"},
                }),
                &["a", "b"],
            ),
        ),
        Tool::new(
            "slow",
            "Sleep for the given number of seconds, then return \"done\". Honours cancellation.",
            schema(
                json!({"seconds": {"type": "number", "description": "How long to sleep, in seconds"}}),
                &["seconds"],
            ),
        ),
        Tool::new(
            "crash",
            "Make the server process exit immediately with code 3 (fault injection).",
            schema(json!({}), &[]),
        ),
        Tool::new(
            "big",
            "Return a text result made of the given number of 'x' characters.",
            schema(
                json!({"bytes": {"type": "integer", "minimum": 0, "description": "Length of the returned text"}}),
                &["bytes"],
            ),
        ),
        Tool::new(
            "fail",
            "Report a tool-level error (isError) whose text is the given message.",
            schema(
                json!({"message": {"type": "string", "description": "The error message to report"}}),
                &["message"],
            ),
        ),
        Tool::new(
            "whoami",
            "Return this server's pid, name and how many times it has been started.",
            schema(json!({}), &[]),
        ),
    ];
    if opts.policy_tools {
        tools.extend(policy_tools());
    }
    for i in 0..opts.extra_tools {
        let (summary, detail) = TOPICS[i % TOPICS.len()];
        let round = i / TOPICS.len();
        let description = if round == 0 {
            format!("{summary}. {detail}")
        } else {
            format!("{summary} (variant {round}). {detail}")
        };
        tools.push(Tool::new(
            format!("tool_{i}"),
            description,
            schema(
                json!({
                    "query": {"type": "string", "description": "What to look for or act on"},
                    "limit": {"type": "integer", "description": "Maximum number of results", "default": 10},
                }),
                &["query"],
            ),
        ));
    }
    tools
}

/// Tools with behaviour hints, for the policy tests (`--policy-tools`).
fn policy_tools() -> Vec<Tool> {
    let named = || {
        schema(
            json!({"name": {"type": "string", "description": "Table name"}}),
            &["name"],
        )
    };
    let mut drop_table = Tool::new(
        "drop_table",
        "Drop a database table and all its rows.",
        named(),
    );
    drop_table.annotations = Some(ToolAnnotations::new().destructive(true).read_only(false));
    let mut peek = Tool::new("peek", "Show the first rows of a table.", named());
    peek.annotations = Some(ToolAnnotations::new().read_only(true).destructive(true));
    let write_note = Tool::new(
        "write_note",
        "Write a note to the team log.",
        schema(
            json!({"text": {"type": "string", "description": "The note"}}),
            &["text"],
        ),
    );
    vec![drop_table, peek, write_note]
}

/// Appends `<tool> <arguments>` to `$STUB_CALL_FILE`, if set: the calls that really ran.
fn record_call(tool: &str, args: &JsonObject) {
    if let Ok(path) = std::env::var("STUB_CALL_FILE") {
        let line = format!("{tool} {}\n", Value::Object(args.clone()));
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Appends `started <pid>` to `$STUB_START_FILE`, if set.
fn record_start() {
    if let Ok(path) = std::env::var("STUB_START_FILE") {
        let res = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            // One write: concurrent stubs appending to one file never mix their lines.
            .and_then(|mut f| f.write_all(format!("started {}\n", std::process::id()).as_bytes()));
        if let Err(e) = res {
            eprintln!("stub-mcp: cannot append to STUB_START_FILE {path}: {e}");
        }
    }
}

/// Number of lines in `$STUB_START_FILE`, or `None` when unset or unreadable.
fn start_count() -> Option<usize> {
    let path = std::env::var("STUB_START_FILE").ok()?;
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.lines().count())
}

struct Stub {
    name: String,
    garbage_stdout: bool,
    /// `STUB_LOG_CALLS` set: one stderr line per tool call.
    log_calls: bool,
    tools: Vec<Tool>,
}

fn text(s: impl Into<String>) -> Vec<ContentBlock> {
    vec![ContentBlock::text(s.into())]
}

fn bad_args(msg: impl Into<String>) -> CallToolResult {
    CallToolResult::error(text(msg))
}

fn arg_str<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, CallToolResult> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| bad_args(format!("argument '{key}' must be a string")))
}

fn arg_f64(args: &JsonObject, key: &str) -> Result<f64, CallToolResult> {
    args.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| bad_args(format!("argument '{key}' must be a number")))
}

impl Stub {
    async fn call(
        &self,
        name: &str,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, CallToolResult> {
        Ok(match name {
            "echo" => {
                let t = arg_str(args, "text")?;
                let mut r = CallToolResult::success(text(t));
                r.structured_content = Some(json!({ "text": t }));
                r
            }
            "add" => {
                let a = arg_f64(args, "a")?;
                let b = arg_f64(args, "b")?;
                let sum = a + b;
                // Integers stay integers: {"sum": 3}, not 3.0.
                #[allow(clippy::cast_possible_truncation)]
                let sum = if sum.fract() == 0.0 && sum.abs() < 9.0e15 {
                    json!(sum as i64)
                } else {
                    json!(sum)
                };
                CallToolResult::success(text(json!({ "sum": sum }).to_string()))
            }
            "slow" => {
                let secs = arg_f64(args, "seconds")?;
                if !(0.0..=86_400.0).contains(&secs) {
                    return Err(bad_args("argument 'seconds' must be between 0 and 86400"));
                }
                eprintln!("stub-mcp[{}]: slow: sleeping {secs}s", self.name);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs_f64(secs)) => {
                        CallToolResult::success(text("done"))
                    }
                    () = context.ct.cancelled() => {
                        eprintln!("stub-mcp[{}]: slow: cancelled", self.name);
                        CallToolResult::error(text("cancelled"))
                    }
                }
            }
            "crash" => {
                eprintln!("stub-mcp: crashing on purpose");
                std::process::exit(3);
            }
            "big" => {
                let n = args
                    .get("bytes")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| bad_args("argument 'bytes' must be a non-negative integer"))?;
                CallToolResult::success(text("x".repeat(usize::try_from(n).unwrap_or(usize::MAX))))
            }
            "fail" => CallToolResult::error(text(arg_str(args, "message")?)),
            "whoami" => {
                let v = json!({
                    "pid": std::process::id(),
                    "name": self.name,
                    "starts": start_count(),
                });
                CallToolResult::success(text(v.to_string()))
            }
            "drop_table" | "peek" | "write_note" => {
                record_call(name, args);
                let v = json!({"tool": name, "arguments": Value::Object(args.clone())});
                CallToolResult::success(text(v.to_string()))
            }
            other => {
                // Generated tools (tool_i); unknown names were rejected by the caller.
                arg_str(args, "query")?;
                let v = json!({
                    "server": self.name,
                    "tool": other,
                    "arguments": Value::Object(args.clone()),
                });
                CallToolResult::success(text(v.to_string()))
            }
        })
    }
}

impl ServerHandler for Stub {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name.clone(), "0.1.0"))
            .with_instructions("A stub MCP server for mcp-code-bridge tests.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        if !self.tools.iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{name}'"),
                None,
            ));
        }
        if self.log_calls {
            eprintln!("stub-mcp[{}]: call {name}", self.name);
        }
        let args = request.arguments.unwrap_or_default();
        let result = match self.call(name, &args, &context).await {
            Ok(r) | Err(r) => r,
        };
        Ok(result.into())
    }

    async fn on_initialized(&self, _context: NotificationContext<RoleServer>) {
        if self.garbage_stdout {
            eprintln!("stub-mcp[{}]: writing garbage to stdout", self.name);
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"this is not JSON-RPC: garbage from stub-mcp\n");
            let _ = out.flush();
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let opts = match parse_args() {
        Ok(mut o) => {
            if let Ok(path) = std::env::var("STUB_EXTRA_TOOLS_FILE") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                o.extra_tools = text.trim().parse().unwrap_or(0).min(1000);
            }
            o
        }
        Err(e) => {
            eprintln!("stub-mcp: {e}");
            eprintln!(
                "usage: stub-mcp [--name NAME] [--extra-tools N] [--garbage-stdout] \
                 [--hang-initialize] [--linger]"
            );
            std::process::exit(2);
        }
    };
    record_start();
    if opts.hang_initialize {
        eprintln!("stub-mcp[{}]: hanging before initialize", opts.name);
        std::future::pending::<()>().await;
    }
    let linger = opts.linger;
    let stub = Stub {
        tools: build_tools(&opts),
        name: opts.name,
        garbage_stdout: opts.garbage_stdout,
        log_calls: std::env::var_os("STUB_LOG_CALLS").is_some(),
    };
    eprintln!(
        "stub-mcp[{}]: pid {} serving {} tools on stdio",
        stub.name,
        std::process::id(),
        stub.tools.len()
    );
    let name = stub.name.clone();
    // Non-blocking pipes when stdin/stdout are pipes (as every client spawns it): rmcp's plain
    // `stdio()` reads and writes on tokio's blocking pool, a dozen context switches a message.
    let running = match rmcp::ServiceExt::serve(stub, rmcp::transport::stdio_pipes()).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("stub-mcp[{name}]: initialize failed: {e}");
            std::process::exit(1);
        }
    };
    match running.waiting().await {
        Ok(reason) => eprintln!("stub-mcp[{name}]: stopped: {reason:?}"),
        Err(e) => eprintln!("stub-mcp[{name}]: stopped with error: {e}"),
    }
    if linger {
        eprintln!("stub-mcp[{name}]: lingering after stdin closed");
        std::future::pending::<()>().await;
    }
}
