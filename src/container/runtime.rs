//! The [`ContainerRuntime`] trait: the seam between the bridge and a container engine.

use std::collections::HashMap;
use std::pin::Pin;

use bytes::Bytes;
use futures::stream::BoxStream;
use tokio::io::AsyncWrite;

use super::{RuntimeError, SandboxSpec};

/// One chunk of container output. Chunks are not lines: frames must be reassembled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Bytes the container wrote to its stdout.
    Stdout(Bytes),
    /// Bytes the container wrote to its stderr.
    Stderr(Bytes),
}

/// The attached stdio of a container.
pub struct Attached {
    /// Writes to the container's stdin.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    /// The container's stdout and stderr; ends when the container dies.
    pub output: BoxStream<'static, Result<Chunk, RuntimeError>>,
}

/// A container carrying the bridge's labels, as listed by the engine.
#[derive(Debug, Clone)]
pub struct ManagedContainer {
    /// The engine's container id.
    pub id: String,
    /// All labels of the container.
    pub labels: HashMap<String, String>,
}

/// A container engine able to run hardened sandboxes.
#[async_trait::async_trait]
pub trait ContainerRuntime: Send + Sync + 'static {
    /// A short name for messages: `podman`, `docker`, ...
    fn engine(&self) -> &str;
    /// Where a host directory given as [`SandboxSpec::channel_dir`] appears inside the sandbox,
    /// when this engine can share one (a local engine on this machine). `None` (the default)
    /// keeps every frame on stdio.
    fn channel_target(&self, _host_dir: &std::path::Path) -> Option<String> {
        None
    }
    /// Whether a bind mount names a folder of this machine (a local engine; an engine in a VM
    /// behind a local socket sees the folders shared with it). False for a remote engine:
    /// `MCP_BRIDGE_MOUNTS` is refused there rather than mounting the remote machine's folders.
    fn sees_host_folders(&self) -> bool {
        false
    }
    /// Whether this runtime isolates at all, so the sandbox's posture is enforced (true for
    /// real engines; the process test double is no sandbox).
    fn isolates(&self) -> bool {
        true
    }
    /// Checks, on a fresh connection and within a few seconds, that the engine answers.
    async fn ping(&self) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// Whether `image` is present locally.
    async fn image_present(&self, image: &str) -> Result<bool, RuntimeError>;
    /// Creates (does not start) a container for `spec`; returns its id.
    async fn create(&self, spec: &SandboxSpec) -> Result<String, RuntimeError>;
    /// Attaches to stdin, stdout and stderr. Call before [`start`](Self::start).
    async fn attach(&self, id: &str) -> Result<Attached, RuntimeError>;
    /// Starts a created container.
    async fn start(&self, id: &str) -> Result<(), RuntimeError>;
    /// Waits for the container to exit and returns its exit code.
    async fn wait(&self, id: &str) -> Result<i64, RuntimeError>;
    /// Force-removes the container. A container that is already gone is not an error.
    async fn remove(&self, id: &str) -> Result<(), RuntimeError>;
    /// Lists every container (running or not) labelled [`LABEL_MANAGED`](super::LABEL_MANAGED).
    async fn list_managed(&self) -> Result<Vec<ManagedContainer>, RuntimeError>;
}
