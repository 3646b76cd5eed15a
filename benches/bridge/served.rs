//! [`Served`]: the release `mcp-code-bridge serve --http` on a free loopback port with a tokens
//! file, and [`Agent`]: one rmcp client of it over streamable HTTP with a bearer token, in either
//! revision (a 2025-11-25 session, or 2026-07-28 stateless with the sandbox handle passed back).
//! Also what the engine says of the bridge's containers: how many, and their memory.

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use crate::client::{bridge_bin, text_of, Workdir};

/// The stderr line `serve` logs once it listens, up to the address.
const SERVING: &str = "serving MCP on ";
/// The `_meta` key of a 2026-07-28 result carrying the sandbox handle.
pub const SANDBOX_META: &str = "mcp-code-bridge/sandbox";
/// How long `serve` may take to listen.
const LISTEN_WAIT: Duration = Duration::from_secs(60);
/// How long one call (or the handshake) may take before the bench counts it lost.
const CALL_WAIT: Duration = Duration::from_secs(120);
/// Lines of the bridge's stderr kept for a failure message.
const TAIL_LINES: usize = 40;

/// A running `serve --http` process, its config folder and its tokens.
pub struct Served {
    /// The endpoint, `http://IP:PORT/mcp`.
    pub url: String,
    /// The bridge's pid.
    pub pid: u32,
    /// One token per client, in client order.
    pub tokens: Vec<String>,
    child: tokio::process::Child,
    tail: Arc<Mutex<VecDeque<String>>>,
    _work: Workdir,
}

impl Served {
    /// Starts `serve` on `work` with `clients` tokens (`bench-<i>` named `client<i>`) and
    /// `extra_env`; returns once it listens.
    pub async fn start(work: Workdir, clients: usize, extra_env: &[(&str, String)]) -> Served {
        let tokens: Vec<String> = (0..clients)
            .map(|i| format!("bench-{i}-{:x}", rand_u64()))
            .collect();
        let path = work.path().join("tokens");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .expect("tokens file");
        for (i, t) in tokens.iter().enumerate() {
            writeln!(f, "{t} client{i}").expect("write tokens");
        }
        drop(f);
        let mut cmd = tokio::process::Command::new(bridge_bin());
        cmd.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
            .arg(&path)
            .env("MCP_BRIDGE_CONFIG_DIR", work.path())
            .env("MCP_BRIDGE_STATE_DIR", work.path().join("state"))
            .env("MCP_BRIDGE_LOG_LEVEL", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn serve");
        let pid = child.id().expect("serve pid");
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let (found_tx, found_rx) = tokio::sync::oneshot::channel();
        let stderr = child.stderr.take().expect("stderr");
        tokio::spawn(keep_tail(stderr, tail.clone(), found_tx));
        let url = match tokio::time::timeout(LISTEN_WAIT, found_rx).await {
            Ok(Ok(url)) => url,
            _ => panic!(
                "serve did not listen within {LISTEN_WAIT:?}:\n{}",
                tail_text(&tail)
            ),
        };
        Served {
            url,
            pid,
            tokens,
            child,
            tail,
            _work: work,
        }
    }

    /// SIGTERM, then waits for the exit (at most `bound`); returns how long it took (None when
    /// it had to be killed) and the end of its stderr, shutdown lines included.
    pub async fn terminate(mut self, bound: Duration) -> (Option<Duration>, String) {
        let began = Instant::now();
        // SAFETY: kill(2) with a pid we spawned and still hold (not yet reaped).
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        let exited = tokio::time::timeout(bound, self.child.wait()).await;
        let took = match exited {
            Ok(Ok(_)) => Some(began.elapsed()),
            _ => {
                let _ = self.child.kill().await;
                None
            }
        };
        // The reader gets the last lines as the pipe closes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        (took, tail_text(&self.tail))
    }
}

/// Reads the bridge's stderr to its end: the last [`TAIL_LINES`] lines kept, the endpoint of the
/// "serving MCP on" line sent once.
async fn keep_tail(
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    found: tokio::sync::oneshot::Sender<String>,
) {
    let mut found = Some(found);
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(at) = line.find(SERVING) {
            let url = line[at + SERVING.len()..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string();
            if let Some(tx) = found.take() {
                let _ = tx.send(url);
            }
        }
        let mut t = tail.lock().expect("tail lock");
        if t.len() == TAIL_LINES {
            t.pop_front();
        }
        t.push_back(line);
    }
}

fn tail_text(tail: &Mutex<VecDeque<String>>) -> String {
    let t = tail.lock().expect("tail lock");
    t.iter().cloned().collect::<Vec<_>>().join("\n")
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish()
}

/// One client of a [`Served`] bridge.
pub struct Agent {
    client: RunningService<RoleClient, ()>,
    /// The 2026-07-28 sandbox handle, once a result named it.
    pub sandbox: Option<String>,
}

impl Agent {
    /// Connects to `url` with `token`: a 2025-11-25 session, or 2026-07-28 when `stateless`.
    ///
    /// # Errors
    /// The client's error, as text.
    pub async fn connect(url: &str, token: &str, stateless: bool) -> Result<Agent, String> {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string());
        let transport = StreamableHttpClientTransport::from_config(config);
        let lifecycle = if stateless {
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            }
        } else {
            ClientLifecycleMode::Initialize
        };
        let client = tokio::time::timeout(CALL_WAIT, ().serve_with_lifecycle(transport, lifecycle))
            .await
            .map_err(|_| format!("no answer to the handshake within {CALL_WAIT:?}"))?
            .map_err(|e| format!("connect: {e}"))?;
        Ok(Agent {
            client,
            sandbox: None,
        })
    }

    /// Calls `run_python` in this agent's sandbox (its handle passed when it has one, and kept
    /// from the reply); returns (text, is_error).
    ///
    /// # Errors
    /// No reply within [`CALL_WAIT`], or the client's error, as text.
    pub async fn run(&mut self, code: &str, servers: &[&str]) -> Result<(String, bool), String> {
        let mut args = json!({"code": code, "servers": servers, "timeout": 60});
        if let Some(h) = &self.sandbox {
            args["sandbox"] = Value::String(h.clone());
        }
        let Value::Object(args) = args else {
            unreachable!("a json object")
        };
        let call = self
            .client
            .peer()
            .call_tool(CallToolRequestParams::new("run_python").with_arguments(args));
        let r = tokio::time::timeout(CALL_WAIT, call)
            .await
            .map_err(|_| format!("no reply within {CALL_WAIT:?}"))?
            .map_err(|e| format!("tools/call: {e}"))?;
        if let Some(h) = r
            .meta
            .as_ref()
            .and_then(|m| m.0.get(SANDBOX_META))
            .and_then(Value::as_str)
        {
            self.sandbox = Some(h.to_string());
        }
        Ok((text_of(&r), r.is_error == Some(true)))
    }

    /// Closes the client (a session is deleted).
    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.client.cancel()).await;
    }
}

/// The container engine CLI the bench inspects (`MCP_BRIDGE_RUNTIME`, else podman).
fn engine_cli() -> String {
    match std::env::var("MCP_BRIDGE_RUNTIME") {
        Ok(r) if r.trim() == "docker" => "docker".into(),
        _ => "podman".into(),
    }
}

/// Full ids of the containers labelled with bridge `pid` (any state).
pub fn containers_of(pid: u32) -> Vec<String> {
    let out = std::process::Command::new(engine_cli())
        .args(["ps", "-a", "-q", "--no-trunc", "--filter"])
        .arg(format!("label=mcp-code-bridge.pid={pid}"))
        .output()
        .expect("engine ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Memory of one container from its cgroup, in bytes: (resident anonymous memory, usage
/// including page cache). cgroup v1 (`memory.stat` total_rss, `memory.usage_in_bytes`) or v2
/// (`memory.stat` anon, `memory.current`); None when its cgroup is not found.
pub fn cgroup_memory(id: &str) -> Option<(u64, u64)> {
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory");
    let root = if v1.is_dir() {
        v1
    } else {
        std::path::Path::new("/sys/fs/cgroup")
    };
    let dir = find_dir(root, id, 4)?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).ok()?;
    let field = |name: &str| {
        stat.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    let rss = field("total_rss").or_else(|| field("anon"))?;
    let usage = read("memory.usage_in_bytes").or_else(|| read("memory.current"))?;
    Some((rss, usage))
}

/// The first folder under `root` (at most `depth` levels down) whose name contains `id`.
fn find_dir(root: &std::path::Path, id: &str, depth: usize) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !kind.is_dir() {
            continue;
        }
        if entry.file_name().to_string_lossy().contains(id) {
            return Some(entry.path());
        }
        if depth > 1 {
            if let Some(found) = find_dir(&entry.path(), id, depth - 1) {
                return Some(found);
            }
        }
    }
    None
}
