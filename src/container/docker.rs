//! [`DockerRuntime`]: the Docker Engine API through bollard, for podman and docker alike.
//!
//! The only file that names bollard. Containers run with `tty: false`, stdin open, and are
//! attached before they start; errors are classified by HTTP status code.

use std::collections::HashMap;
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountBindOptions, MountType,
    ResourcesUlimits,
};
use bollard::query_parameters::{
    AttachContainerOptions, CreateContainerOptions, ListContainersOptions, RemoveContainerOptions,
};
use bollard::Docker;
use futures::StreamExt;

use super::error::TransportError;
use super::runtime::{Attached, Chunk, ContainerRuntime, ManagedContainer};
use super::{ArchiveStream, ImageInfo, LineSink, RuntimeError, SandboxSpec, LABEL_MANAGED};

mod images;

/// Timeout for one engine request's response headers (long streams are not bounded by it).
pub const REQUEST_TIMEOUT_SECS: u64 = 60;

/// Time an engine gets to answer a ping.
pub const PING_TIMEOUT_SECS: u64 = 5;

/// Where the frame-channel directory is mounted inside the sandbox.
pub const CHANNEL_MOUNT: &str = "/run/mcp-bridge";

/// A connection to a Docker-API engine.
pub struct DockerRuntime {
    docker: Docker,
    engine: String,
    unix_path: Option<String>,
    /// The host folders each created container binds: docker refuses a bind at start.
    bound: std::sync::Mutex<HashMap<String, Vec<std::path::PathBuf>>>,
}

/// Pauses before each new try of a removal the engine refused with HTTP 500.
const REMOVE_RETRY_MS: [u64; 3] = [200, 500, 1000];

impl DockerRuntime {
    /// Connects to the unix socket at `path` and identifies the engine.
    ///
    /// # Errors
    /// [`RuntimeError::Transport`] when the socket does not answer a version request.
    pub async fn connect_unix(path: &str) -> Result<Self, RuntimeError> {
        let docker =
            Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
                .map_err(|e| transport("engine", "connect", e))?;
        // `/_ping` rather than `/version`: podman takes ~300 ms to answer the latter.
        let engine = super::workarounds::identify(path).await?;
        Ok(DockerRuntime {
            docker,
            engine,
            unix_path: Some(path.to_string()),
            bound: Default::default(),
        })
    }

    /// Connects to a `tcp://` or `http://` engine address.
    ///
    /// # Errors
    /// [`RuntimeError::Transport`] when the address does not answer a version request.
    pub async fn connect_http(addr: &str) -> Result<Self, RuntimeError> {
        let docker =
            Docker::connect_with_http(addr, REQUEST_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
                .map_err(|e| transport("engine", "connect", e))?;
        Self::identify(docker).await
    }

    /// Connects to a `tcp://` or `https://` engine over TLS: the server checked against
    /// `certs/ca.pem`, this client known by `certs/cert.pem` and `certs/key.pem` (docker's
    /// `DOCKER_CERT_PATH` layout).
    ///
    /// # Errors
    /// [`RuntimeError::Transport`] when a file does not parse, the handshake fails or the engine
    /// does not answer a version request.
    pub async fn connect_tls(addr: &str, certs: &std::path::Path) -> Result<Self, RuntimeError> {
        let docker = Docker::connect_with_ssl(
            addr,
            &certs.join("key.pem"),
            &certs.join("cert.pem"),
            &certs.join("ca.pem"),
            REQUEST_TIMEOUT_SECS,
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|e| transport("engine", "read the TLS certificates", e))?;
        Self::identify(docker).await
    }

    async fn identify(docker: Docker) -> Result<Self, RuntimeError> {
        let version = tokio::time::timeout(Duration::from_secs(5), docker.version())
            .await
            .map_err(|_| RuntimeError::Transport {
                engine: "engine".into(),
                action: "get the engine version",
                cause: TransportError::NoAnswer { secs: 5 },
            })?
            .map_err(|e| transport("engine", "get the engine version", e))?;
        let is_podman = version
            .components
            .unwrap_or_default()
            .iter()
            .any(|c| c.name.to_ascii_lowercase().contains("podman"));
        let engine = if is_podman { "podman" } else { "docker" }.to_string();
        Ok(DockerRuntime {
            docker,
            engine,
            unix_path: None,
            bound: Default::default(),
        })
    }

    fn err(&self, action: &'static str, e: BollardError) -> RuntimeError {
        match e {
            BollardError::DockerResponseServerError {
                status_code,
                message,
            } => RuntimeError::Engine {
                engine: self.engine.clone(),
                action,
                status: status_code,
                message,
            },
            other => transport(&self.engine, action, other),
        }
    }
}

/// A host folder bound read-only and not recursively: folders mounted inside it on the host
/// (which a plain read-only bind would leave writable on docker before 25) are not visible.
fn read_only_bind(m: &crate::config::Mount) -> Mount {
    Mount {
        target: Some(m.inside.clone()),
        source: Some(m.host.display().to_string()),
        typ: Some(MountType::BIND),
        read_only: Some(true),
        bind_options: Some(MountBindOptions {
            non_recursive: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn transport(engine: &str, action: &'static str, e: BollardError) -> RuntimeError {
    RuntimeError::Transport {
        engine: engine.to_string(),
        action,
        cause: TransportError::Client(Box::new(e)),
    }
}

#[async_trait::async_trait]
impl ContainerRuntime for DockerRuntime {
    fn engine(&self) -> &str {
        &self.engine
    }

    fn channel_target(&self, _host_dir: &std::path::Path) -> Option<String> {
        // Only an engine on this Linux machine can bind-mount a host socket into the container
        // (Docker Desktop and podman machines run the engine in a VM; tcp engines are remote).
        (cfg!(target_os = "linux") && self.unix_path.is_some()).then(|| CHANNEL_MOUNT.to_string())
    }

    fn sees_host_folders(&self) -> bool {
        // A tcp engine runs on another machine: a bind mount would name *its* folders. An
        // engine in a VM behind a local socket sees the folders shared with the VM; others
        // are refused by the engine, with a message naming the folder.
        self.unix_path.is_some()
    }

    async fn ping(&self) -> Result<(), RuntimeError> {
        if let Some(path) = &self.unix_path {
            return match super::workarounds::identify(path).await {
                Ok(_) => Ok(()),
                Err(RuntimeError::Transport { action, cause, .. }) => {
                    Err(RuntimeError::Transport {
                        engine: self.engine.clone(),
                        action,
                        cause,
                    })
                }
                Err(other) => Err(other),
            };
        }
        match tokio::time::timeout(Duration::from_secs(PING_TIMEOUT_SECS), self.docker.ping()).await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(transport(&self.engine, "ping the engine", e)),
            Err(_) => Err(RuntimeError::Transport {
                engine: self.engine.clone(),
                action: "ping the engine",
                cause: TransportError::NoAnswer {
                    secs: PING_TIMEOUT_SECS,
                },
            }),
        }
    }

    async fn image_present(&self, image: &str) -> Result<bool, RuntimeError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(BollardError::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(self.err("inspect the sandbox image", e)),
        }
    }

    async fn image_info(&self, image: &str) -> Result<Option<ImageInfo>, RuntimeError> {
        self.inspect(image).await
    }

    async fn build_image(
        &self,
        context: bytes::Bytes,
        tag: &str,
        args: &[(String, String)],
        on_line: &LineSink<'_>,
    ) -> Result<(), RuntimeError> {
        self.build(context, tag, args, on_line).await
    }

    async fn load_image(
        &self,
        archive: ArchiveStream,
        on_line: &LineSink<'_>,
    ) -> Result<(), RuntimeError> {
        self.load(archive, on_line).await
    }

    async fn remove_image(&self, image: &str) -> Result<bool, RuntimeError> {
        self.remove_tag(image).await
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<String, RuntimeError> {
        let host = HostConfig {
            network_mode: Some("none".into()),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            memory: Some(spec.memory_bytes),
            memory_swap: Some(spec.memory_bytes),
            pids_limit: Some(spec.pids),
            nano_cpus: spec.nano_cpus,
            ulimits: Some(
                spec.ulimits
                    .iter()
                    .map(|(name, soft, hard)| ResourcesUlimits {
                        name: Some(name.clone()),
                        soft: Some(*soft),
                        hard: Some(*hard),
                    })
                    .collect(),
            ),
            tmpfs: Some(spec.tmpfs.clone().into_iter().collect()),
            binds: spec
                .channel_dir
                .as_ref()
                .map(|(host, inside)| vec![format!("{}:{inside}:ro", host.display())]),
            mounts: (!spec.mounts.is_empty())
                .then(|| spec.mounts.iter().map(read_only_bind).collect()),
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(spec.cmd.clone()),
            env: Some(spec.env.clone()),
            user: Some(spec.user.clone()),
            working_dir: Some(spec.workdir.clone()),
            labels: Some(spec.labels.clone().into_iter().collect()),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            open_stdin: Some(true),
            stdin_once: Some(false),
            tty: Some(false),
            network_disabled: Some(true),
            host_config: Some(host),
            ..Default::default()
        };
        let options = CreateContainerOptions {
            name: Some(spec.name.clone()),
            ..Default::default()
        };
        let dirs = spec.host_dirs();
        match self.docker.create_container(Some(options), body).await {
            Ok(created) => {
                let mut bound = self.bound.lock().expect("bound lock");
                bound.insert(created.id.clone(), dirs);
                Ok(created.id)
            }
            Err(BollardError::DockerResponseServerError {
                status_code: 404, ..
            }) => Err(RuntimeError::ImageMissing {
                image: spec.image.clone(),
                engine: self.engine.clone(),
            }),
            Err(e) => Err(self
                .err("create the sandbox container", e)
                .about_mounts(&dirs)),
        }
    }

    async fn attach(&self, id: &str) -> Result<Attached, RuntimeError> {
        let options = AttachContainerOptions {
            stdin: true,
            stdout: true,
            stderr: true,
            stream: true,
            logs: false,
            ..Default::default()
        };
        let attached = self
            .docker
            .attach_container(id, Some(options))
            .await
            .map_err(|e| self.err("attach to the sandbox", e))?;
        let engine = self.engine.clone();
        let output = attached
            .output
            .filter_map(move |item| {
                let out = match item {
                    Ok(bollard::container::LogOutput::StdOut { message }) => {
                        Some(Ok(Chunk::Stdout(message)))
                    }
                    Ok(bollard::container::LogOutput::StdErr { message }) => {
                        Some(Ok(Chunk::Stderr(message)))
                    }
                    Ok(bollard::container::LogOutput::Console { message }) => {
                        Some(Ok(Chunk::Stdout(message)))
                    }
                    Ok(bollard::container::LogOutput::StdIn { .. }) => None,
                    Err(e) => Some(Err(transport(&engine, "read the sandbox output", e))),
                };
                futures::future::ready(out)
            })
            .boxed();
        Ok(Attached {
            input: attached.input,
            output,
        })
    }

    async fn start(&self, id: &str) -> Result<(), RuntimeError> {
        self.docker.start_container(id, None).await.map_err(|e| {
            let bound = self.bound.lock().expect("bound lock");
            let dirs = bound.get(id).map(Vec::as_slice).unwrap_or_default();
            self.err("start the sandbox", e).about_mounts(dirs)
        })
    }

    async fn wait(&self, id: &str) -> Result<i64, RuntimeError> {
        if let (Some(path), "podman") = (&self.unix_path, self.engine.as_str()) {
            // The Docker-API wait busy-polls on podman < 4.5 (workarounds.rs).
            return super::workarounds::podman_wait(&self.engine, path, id).await;
        }
        let mut stream = self.docker.wait_container(id, None);
        match stream.next().await {
            Some(Ok(r)) => Ok(r.status_code),
            Some(Err(BollardError::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(self.err("wait for the sandbox", e)),
            None => Err(RuntimeError::Transport {
                engine: self.engine.clone(),
                action: "wait for the sandbox",
                cause: TransportError::Closed("the engine closed the wait stream"),
            }),
        }
    }

    async fn remove(&self, id: &str) -> Result<(), RuntimeError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        let mut removed = self
            .docker
            .remove_container(id, Some(options.clone()))
            .await;
        // Under load podman may refuse a forced removal racing the container's own stop
        // ("could not be stopped ... container state improper", HTTP 500); it succeeds a moment
        // later. Try again a few times before giving up on it.
        for pause in REMOVE_RETRY_MS {
            match &removed {
                Err(BollardError::DockerResponseServerError {
                    status_code: 500, ..
                }) => {
                    tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                    removed = self
                        .docker
                        .remove_container(id, Some(options.clone()))
                        .await;
                }
                _ => break,
            }
        }
        self.bound.lock().expect("bound lock").remove(id);
        match removed {
            Ok(()) => Ok(()),
            Err(BollardError::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(self.err("remove the sandbox", e)),
        }
    }

    async fn list_managed(&self) -> Result<Vec<ManagedContainer>, RuntimeError> {
        let filters = HashMap::from([("label".to_string(), vec![LABEL_MANAGED.to_string()])]);
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        let list = match self.docker.list_containers(Some(options)).await {
            Ok(list) => list,
            Err(e @ BollardError::JsonDataError { .. })
            | Err(e @ BollardError::JsonSerdeError { .. }) => {
                // podman reports states bollard does not know ("stopped"): read ids and labels only.
                let Some(path) = &self.unix_path else {
                    return Err(self.err("list sandboxes", e));
                };
                tracing::debug!(cause = %e, "typed container list failed; using the raw list");
                return super::workarounds::list_managed(&self.engine, path).await;
            }
            Err(e) => return Err(self.err("list sandboxes", e)),
        };
        Ok(list
            .into_iter()
            .filter_map(|c| {
                let labels = c.labels.unwrap_or_default();
                // The engine filtered by label already; check again rather than trust it.
                labels
                    .contains_key(LABEL_MANAGED)
                    .then_some(ManagedContainer { id: c.id?, labels })
            })
            .collect())
    }
}
