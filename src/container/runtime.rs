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

/// What the engine knows of an image (`image status`, the recipe check).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageInfo {
    /// The engine's image id.
    pub id: String,
    /// Size in bytes, as the engine counts it.
    pub size: u64,
    /// When it was made, as the engine reports it (RFC 3339).
    pub created: String,
    /// The image's labels.
    pub labels: HashMap<String, String>,
}

/// Where an engine's build or load output goes, one line at a time.
pub type LineSink<'a> = dyn Fn(&str) + Send + Sync + 'a;

/// A docker-archive (`docker save` format) as a stream of bytes, for [`ContainerRuntime::load_image`].
pub type ArchiveStream = BoxStream<'static, Result<Bytes, std::io::Error>>;

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
    /// What the engine knows of `image`; `None` when it is absent.
    async fn image_info(&self, image: &str) -> Result<Option<ImageInfo>, RuntimeError> {
        Ok(self.image_present(image).await?.then(ImageInfo::default))
    }
    /// Builds `tag` from a build context (a tar holding `Containerfile`), with `args` as build
    /// arguments; each line of the engine's output goes to `on_line`.
    async fn build_image(
        &self,
        _context: Bytes,
        _tag: &str,
        _args: &[(String, String)],
        _on_line: &LineSink<'_>,
    ) -> Result<(), RuntimeError> {
        Err(RuntimeError::NotFound(format!(
            "{} cannot build images",
            self.engine()
        )))
    }
    /// Loads a docker-archive into the engine (the tags its manifest names); each line of the
    /// engine's output goes to `on_line`.
    async fn load_image(
        &self,
        _archive: ArchiveStream,
        _on_line: &LineSink<'_>,
    ) -> Result<(), RuntimeError> {
        Err(RuntimeError::NotFound(format!(
            "{} cannot load images",
            self.engine()
        )))
    }
    /// Removes `image` (the tag; the engine drops the layers no other image uses). `Ok(false)`
    /// when there was no such image.
    async fn remove_image(&self, _image: &str) -> Result<bool, RuntimeError> {
        Err(RuntimeError::NotFound(format!(
            "{} cannot remove images",
            self.engine()
        )))
    }
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
