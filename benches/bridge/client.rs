//! [`Bridge`]: the release `mcp-code-bridge run` binary driven by an rmcp client over stdio,
//! and [`Direct`]: an rmcp client talking to the stub server with no bridge in between.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::{json, Value};

/// Path of the bridge binary cargo built for this bench.
pub const BRIDGE_BIN: &str = env!("CARGO_BIN_EXE_mcp-code-bridge");

/// The bridge binary [`Bridge::start`] runs: [`BRIDGE_BIN`] unless [`use_bridge`] chose
/// another (the baseline of `BENCH_BASELINE`).
static IN_USE: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Makes [`Bridge::start`] run `bin` from now on.
pub fn use_bridge(bin: &Path) {
    *IN_USE.lock().expect("bridge binary lock") = Some(bin.to_path_buf());
}

/// The bridge binary in use.
pub fn bridge_bin() -> PathBuf {
    IN_USE
        .lock()
        .expect("bridge binary lock")
        .clone()
        .unwrap_or_else(|| BRIDGE_BIN.into())
}
/// Path of the stub MCP server binary.
pub const STUB_BIN: &str = env!("CARGO_BIN_EXE_stub-mcp");

/// A scratch directory with a server config: `stub` plus `extra` stub servers of 20 tools.
pub struct Workdir {
    dir: tempfile::TempDir,
}

impl Workdir {
    /// Writes `servers.json` with the stub and `extra` × 20-tool stubs.
    pub fn new(extra: usize) -> Workdir {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut servers = serde_json::Map::new();
        servers.insert("stub".into(), json!({"command": STUB_BIN}));
        for i in 0..extra {
            let name = format!("s{i:02}");
            let args = json!(["--extra-tools", "20", "--name", name]);
            servers.insert(name, json!({"command": STUB_BIN, "args": args}));
        }
        let body = json!({ "mcpServers": servers }).to_string();
        std::fs::write(dir.path().join("servers.json"), body).expect("write config");
        Workdir { dir }
    }

    /// Writes `servers.json` with these `mcpServers` entries (`STUB` in a `command` is the stub).
    pub fn with_servers(servers: serde_json::Map<String, serde_json::Value>) -> Workdir {
        let dir = tempfile::tempdir().expect("tempdir");
        let body = json!({ "mcpServers": servers }).to_string();
        std::fs::write(dir.path().join("servers.json"), body).expect("write config");
        Workdir { dir }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// One bridge process and its MCP client session.
pub struct Bridge {
    /// The client session.
    pub client: RunningService<RoleClient, ()>,
    /// The bridge's pid (for RSS).
    pub pid: u32,
    /// When the process was spawned.
    pub spawned: Instant,
}

impl Bridge {
    /// Spawns the bridge on `work` and completes `initialize`.
    pub async fn start(work: &Workdir, extra_env: &[(&str, &str)]) -> Bridge {
        let mut cmd = tokio::process::Command::new(bridge_bin());
        cmd.arg("run")
            .env("MCP_BRIDGE_CONFIG_DIR", work.path())
            .env("MCP_BRIDGE_STATE_DIR", work.path().join("state"))
            .env("MCP_BRIDGE_LOG_LEVEL", "warn");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let spawned = Instant::now();
        let (transport, _stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn the bridge");
        let pid = transport.id().expect("bridge pid");
        let client = ().serve(transport).await.expect("initialize the bridge");
        Bridge {
            client,
            pid,
            spawned,
        }
    }

    /// Calls `run_python`; returns (text, is_error).
    pub async fn run(&self, code: &str, servers: &[&str], timeout: u64) -> (String, bool) {
        let r = self.call(code, servers, timeout).await;
        (text_of(&r), r.is_error == Some(true))
    }

    /// Calls `run_python`; returns the whole result.
    pub async fn call(&self, code: &str, servers: &[&str], timeout: u64) -> CallToolResult {
        let args = json!({"code": code, "servers": servers, "timeout": timeout});
        self.client
            .peer()
            .call_tool(CallToolRequestParams::new("run_python").with_arguments(obj(args)))
            .await
            .expect("tools/call run_python")
    }

    /// Calls the tool `tool` (`run_python`, `run_typescript`) with `code`; returns (text,
    /// is_error).
    pub async fn run_tool(&self, tool: &'static str, code: &str) -> (String, bool) {
        let args = json!({"code": code, "timeout": 30});
        let r = self
            .client
            .peer()
            .call_tool(CallToolRequestParams::new(tool).with_arguments(obj(args)))
            .await
            .expect("tools/call");
        (text_of(&r), r.is_error == Some(true))
    }

    /// Runs sandbox code that prints one `BENCH <json>` line and returns that JSON.
    pub async fn measure(&self, code: &str, servers: &[&str]) -> Value {
        let (text, is_error) = self.run(code, servers, 600).await;
        assert!(!is_error, "bench code failed:\n{text}");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("BENCH "))
            .unwrap_or_else(|| panic!("no BENCH line in:\n{text}"));
        serde_json::from_str(line).expect("BENCH json")
    }

    /// Resident set size of the bridge process, and its peak, in KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        rss_of(self.pid)
    }

    /// Closes the session and waits for the process to exit.
    pub async fn stop(self) {
        let _ = tokio::time::timeout(Duration::from_secs(20), self.client.cancel()).await;
    }
}

/// An rmcp client talking to the stub directly: the baseline for the proxy overhead.
pub struct Direct {
    client: RunningService<RoleClient, ()>,
    _child: tokio::process::Child,
}

impl Direct {
    /// Spawns the stub and initializes (messages up to 64 MiB, like the bridge's client).
    pub async fn start() -> Direct {
        let mut child = tokio::process::Command::new(STUB_BIN)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn stub");
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let transport = rmcp::transport::async_rw::AsyncRwTransport::<RoleClient, _, _>::new(
            stdout.expect("stdout"),
            stdin.expect("stdin"),
        )
        .with_max_line_length(64 << 20);
        Direct {
            client: ().serve(transport).await.expect("initialize stub"),
            _child: child,
        }
    }

    /// One `tool` call.
    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        self.client
            .peer()
            .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(obj(args)))
            .await
            .expect("direct call")
    }

    /// Tool list JSON of a stub started with `args` (what a client without the bridge pays).
    pub async fn tools_json(args: &[&str]) -> String {
        let mut cmd = tokio::process::Command::new(STUB_BIN);
        cmd.args(args);
        let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("spawn stub");
        let client = ().serve(transport).await.expect("initialize stub");
        let tools = client.peer().list_all_tools().await.expect("tools/list");
        let _ = client.cancel().await;
        serde_json::to_string(&json!({ "tools": tools })).expect("json")
    }

    /// Closes the client (the stub exits).
    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

fn obj(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The text blocks of a result, joined.
pub fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// VmRSS and VmHWM of `pid`, in KiB (0 when unreadable).
pub fn rss_of(pid: u32) -> (u64, u64) {
    let status =
        std::fs::read_to_string(PathBuf::from(format!("/proc/{pid}/status"))).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU seconds (user + system) used so far by `pid` (0 when unreadable).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / hz
}

/// Direct children of `pid` (from /proc), with their command names.
pub fn children_of(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u32>().ok());
        if ppid == Some(pid) {
            let comm = head
                .split_once('(')
                .map(|(_, c)| c)
                .unwrap_or("")
                .to_string();
            out.push((child, comm));
        }
    }
    out
}
