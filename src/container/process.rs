//! A test double for [`ContainerRuntime`]: runs the sandbox command as a local child process.
//!
//! NOT a sandbox — no isolation at all. It exists so the bridge's session, timeout and restart
//! logic can be tested quickly and without an engine, against the real Python entrypoint and the
//! real frame protocol. It also records calls and can be told to fail, for fault tests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::runtime::{Attached, Chunk, ContainerRuntime, ManagedContainer};
use super::{RuntimeError, SandboxSpec};

struct Proc {
    spec: SandboxSpec,
    /// Stands in for the sandbox's outbox (`/workspace/out` does not exist here); removed
    /// with the "container".
    outbox: Option<tempfile::TempDir>,
    child: Option<Child>,
    pid: Option<u32>,
    exited: CancellationToken,
    code: Arc<Mutex<Option<i64>>>,
}

/// Runs each "container" as a local process. Test use only.
#[derive(Default)]
pub struct ProcessRuntime {
    procs: Mutex<HashMap<String, Proc>>,
    next: AtomicU64,
    /// Every call made, as `"create"`, `"remove <id>"`, ... in order.
    pub calls: Mutex<Vec<String>>,
    /// When set, `create` fails with this message.
    pub fail_create: Mutex<Option<String>>,
    /// When set, `create` refuses a sandbox with a frame-channel directory, as an engine that
    /// cannot bind-mount it does (its answer names the directory).
    pub refuse_mount: std::sync::atomic::AtomicBool,
    /// When set, `create` refuses a sandbox with `MCP_BRIDGE_MOUNTS` folders, as an engine in
    /// a VM the folder is not shared with does (its answer names the folder).
    pub refuse_host_mounts: std::sync::atomic::AtomicBool,
    /// When set, the socket frame channel is not offered (frames stay on stdio).
    pub no_channel: std::sync::atomic::AtomicBool,
    /// When set, claims to isolate, so the (unisolated) process's posture is enforced.
    pub claim_isolation: std::sync::atomic::AtomicBool,
    /// Cancelled while the "engine" is gone (see [`ProcessRuntime::cut_engine`]).
    outage: Mutex<CancellationToken>,
}

impl ProcessRuntime {
    /// A new runtime with no containers.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The OS pid of a started container's process, to kill it "from outside" in tests.
    pub fn pid_of(&self, id: &str) -> Option<u32> {
        self.procs
            .lock()
            .expect("lock poisoned")
            .get(id)
            .and_then(|p| p.pid)
    }

    /// Ids of containers that exist (created and not removed).
    pub fn live_ids(&self) -> Vec<String> {
        self.procs
            .lock()
            .expect("lock poisoned")
            .keys()
            .cloned()
            .collect()
    }

    /// Makes the engine vanish, as when its API service dies: every request fails, pending
    /// waits and attach streams break, and the processes run on.
    pub fn cut_engine(&self) {
        self.outage.lock().expect("lock poisoned").cancel();
    }

    /// Brings the engine back after [`cut_engine`](Self::cut_engine).
    pub fn restore_engine(&self) {
        *self.outage.lock().expect("lock poisoned") = CancellationToken::new();
    }

    fn outage(&self) -> CancellationToken {
        self.outage.lock().expect("lock poisoned").clone()
    }

    /// Fails with a transport error while the engine is cut.
    fn reachable(&self, action: &'static str) -> Result<(), RuntimeError> {
        if self.outage().is_cancelled() {
            return Err(engine_gone(action));
        }
        Ok(())
    }

    fn record(&self, call: String) {
        self.calls.lock().expect("lock poisoned").push(call);
    }
}

fn engine_gone(action: &'static str) -> RuntimeError {
    RuntimeError::Transport {
        engine: "process".into(),
        action,
        cause: super::TransportError::Closed("the engine is gone (cut by the test)"),
    }
}

fn gone(id: &str) -> RuntimeError {
    RuntimeError::Engine {
        engine: "process".into(),
        action: "find the container",
        status: 404,
        message: format!("no such container {id}"),
    }
}

#[async_trait::async_trait]
impl ContainerRuntime for ProcessRuntime {
    fn engine(&self) -> &str {
        "process"
    }

    fn isolates(&self) -> bool {
        self.claim_isolation.load(Ordering::Relaxed)
    }

    fn sees_host_folders(&self) -> bool {
        true
    }

    fn channel_target(&self, host_dir: &std::path::Path) -> Option<String> {
        // No mount needed: the "sandbox" sees the host's file system.
        (!self.no_channel.load(Ordering::Relaxed)).then(|| host_dir.display().to_string())
    }

    async fn ping(&self) -> Result<(), RuntimeError> {
        self.reachable("ping the engine")
    }

    async fn image_present(&self, _image: &str) -> Result<bool, RuntimeError> {
        self.reachable("inspect the sandbox image")?;
        Ok(true)
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<String, RuntimeError> {
        self.record("create".into());
        self.reachable("create the sandbox container")?;
        // Refusals go through the classifier the real engine's answers go through.
        let refused = |err: RuntimeError| Err(err.about_mounts(&spec.host_dirs()));
        if let Some(msg) = self.fail_create.lock().expect("lock poisoned").clone() {
            return refused(RuntimeError::Engine {
                engine: "process".into(),
                action: "create the sandbox container",
                status: 500,
                message: msg,
            });
        }
        if let Some((dir, _)) = &spec.channel_dir {
            if self.refuse_mount.load(Ordering::Relaxed) {
                return refused(RuntimeError::Engine {
                    engine: "process".into(),
                    action: "create the sandbox container",
                    status: 400,
                    message: format!(
                        "invalid mount config for type \"bind\": bind source path does not exist: {}",
                        dir.display()
                    ),
                });
            }
        }
        if let Some(m) = spec.mounts.first() {
            if self.refuse_host_mounts.load(Ordering::Relaxed) {
                return refused(RuntimeError::Engine {
                    engine: "process".into(),
                    action: "create the sandbox container",
                    status: 500,
                    message: format!("statfs {}: no such file or directory", m.host.display()),
                });
            }
        }
        let id = format!("proc-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let outbox = tempfile::Builder::new()
            .prefix("mcp-process-outbox-")
            .tempdir()
            .map_err(|err| RuntimeError::Io {
                about: "creating the process sandbox's outbox",
                err,
            })?;
        let proc = Proc {
            spec: spec.clone(),
            outbox: Some(outbox),
            child: None,
            pid: None,
            exited: CancellationToken::new(),
            code: Arc::default(),
        };
        self.procs
            .lock()
            .expect("lock poisoned")
            .insert(id.clone(), proc);
        Ok(id)
    }

    async fn attach(&self, id: &str) -> Result<Attached, RuntimeError> {
        self.record(format!("attach {id}"));
        self.reachable("attach to the sandbox")?;
        let outage = self.outage();
        let mut procs = self.procs.lock().expect("lock poisoned");
        let p = procs.get_mut(id).ok_or_else(|| gone(id))?;
        let (program, args) = p.spec.cmd.split_first().ok_or_else(|| gone(id))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for kv in &p.spec.env {
            if let Some((k, v)) = kv.split_once('=') {
                if k != "HOME" {
                    cmd.env(k, v);
                }
            }
        }
        if let Some(outbox) = &p.outbox {
            cmd.env("MCP_BRIDGE_OUTBOX", outbox.path().join("out"));
        }
        let mut child = cmd.spawn().map_err(|err| RuntimeError::Io {
            about: "spawning the process sandbox",
            err,
        })?;
        let stdin = child.stdin.take().ok_or_else(|| gone(id))?;
        let stdout = child.stdout.take().ok_or_else(|| gone(id))?;
        let stderr = child.stderr.take().ok_or_else(|| gone(id))?;
        p.pid = child.id();
        p.child = Some(child);
        let out = reader_stream(stdout, Chunk::Stdout);
        let err = reader_stream(stderr, Chunk::Stderr);
        let output = futures::stream::select(out, err)
            .take_until(outage.cancelled_owned())
            .boxed();
        Ok(Attached {
            input: Box::pin(stdin),
            output,
        })
    }

    async fn start(&self, id: &str) -> Result<(), RuntimeError> {
        self.record(format!("start {id}"));
        self.reachable("start the sandbox")?;
        let (mut child, exited, code) = {
            let mut procs = self.procs.lock().expect("lock poisoned");
            let p = procs.get_mut(id).ok_or_else(|| gone(id))?;
            (
                p.child.take().ok_or_else(|| gone(id))?,
                p.exited.clone(),
                p.code.clone(),
            )
        };
        tokio::spawn(async move {
            let status = child.wait().await;
            use std::os::unix::process::ExitStatusExt;
            let c = status
                .map(|s| {
                    s.code()
                        .map(i64::from)
                        .unwrap_or_else(|| 128 + i64::from(s.signal().unwrap_or(9)))
                })
                .unwrap_or(-1);
            *code.lock().expect("lock poisoned") = Some(c);
            exited.cancel();
        });
        Ok(())
    }

    async fn wait(&self, id: &str) -> Result<i64, RuntimeError> {
        let (exited, code) = {
            let procs = self.procs.lock().expect("lock poisoned");
            let p = procs.get(id).ok_or_else(|| gone(id))?;
            (p.exited.clone(), p.code.clone())
        };
        let outage = self.outage();
        tokio::select! {
            _ = exited.cancelled() => {}
            _ = outage.cancelled() => return Err(engine_gone("wait for the sandbox")),
        }
        let c = code.lock().expect("lock poisoned").unwrap_or(-1);
        Ok(c)
    }

    async fn remove(&self, id: &str) -> Result<(), RuntimeError> {
        self.record(format!("remove {id}"));
        self.reachable("remove the sandbox")?;
        if let Some(pid) = self.pid_of(id) {
            // SAFETY: kill(2) on a pid we spawned; no memory is touched.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        self.procs.lock().expect("lock poisoned").remove(id);
        Ok(())
    }

    async fn list_managed(&self) -> Result<Vec<ManagedContainer>, RuntimeError> {
        self.reachable("list sandboxes")?;
        let procs = self.procs.lock().expect("lock poisoned");
        Ok(procs
            .iter()
            .map(|(id, p)| ManagedContainer {
                id: id.clone(),
                labels: p.spec.labels.clone().into_iter().collect(),
            })
            .collect())
    }
}

fn reader_stream<R>(
    reader: R,
    wrap: fn(bytes::Bytes) -> Chunk,
) -> futures::stream::BoxStream<'static, Result<Chunk, RuntimeError>>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
{
    futures::stream::unfold(reader, move |mut r| async move {
        let mut buf = vec![0u8; 8192];
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(wrap(bytes::Bytes::from(buf))), r))
            }
        }
    })
    .boxed()
}
