//! Finding a container engine: `DOCKER_HOST` (or `CONTAINER_HOST`; a unix socket, plain TCP or
//! TLS: `remote.rs`), podman's and docker's sockets, or a podman service of our own.

use std::path::PathBuf;
use std::sync::Arc;

use super::docker::DockerRuntime;
use super::error::TransportError;
use super::podman_service::PodmanService;
use super::remote::Remote;
use super::{ContainerRuntime, RuntimeError};
use crate::config::{RuntimeChoice, Settings};

/// Opens an engine connection when it is first needed (the sandbox actor, an image build).
pub type Connector = Arc<
    dyn Fn() -> futures::future::BoxFuture<'static, Result<Connection, RuntimeError>> + Send + Sync,
>;

/// A live engine connection, plus the podman service we started for it, if any.
pub struct Connection {
    /// The engine.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Where we connected, for messages and `doctor`.
    pub endpoint: String,
    service: Option<PodmanService>,
}

impl Connection {
    /// Wraps an existing runtime (tests, fakes).
    pub fn from_runtime(runtime: Arc<dyn ContainerRuntime>, endpoint: impl Into<String>) -> Self {
        Connection {
            runtime,
            endpoint: endpoint.into(),
            service: None,
        }
    }

    /// Stops the podman service this bridge started, if any.
    pub async fn close(self) {
        if let Some(service) = self.service {
            service.stop().await;
        }
    }
}

/// Connects to the engine `settings` asks for: `DOCKER_HOST` (or `CONTAINER_HOST`) when set (the user chose
/// that engine: it is never swapped silently for another while it is down), unless it answers
/// as another engine than `MCP_BRIDGE_RUNTIME` names; else the first that answers.
///
/// # Errors
/// [`RuntimeError::Unreachable`] when `DOCKER_HOST` does not answer;
/// [`RuntimeError::NotFound`] listing what was tried when no engine answers.
pub async fn connect(settings: &Settings) -> Result<Connection, RuntimeError> {
    let want = settings.runtime;
    let mut tried = Vec::new();
    if let Some(host) = &settings.docker_host {
        let (var, tls) = (settings.docker_host_var, settings.docker_tls.as_deref());
        match connect_named(host, var, tls, want).await? {
            Ok(conn) => return Ok(conn),
            Err(engine) => tried.push(format!("{host} ({var}; is {engine}, not wanted)")),
        }
    }
    for endpoint in candidates(settings) {
        let result = if let Some(path) = endpoint.strip_prefix("unix://") {
            if !std::path::Path::new(path).exists() {
                continue;
            }
            DockerRuntime::connect_unix(path).await
        } else {
            DockerRuntime::connect_http(&endpoint).await
        };
        match result {
            Ok(rt) if matches_choice(want, rt.engine()) => {
                tracing::info!(engine = rt.engine(), endpoint = %endpoint, "connected to the container engine");
                return Ok(Connection {
                    runtime: Arc::new(rt),
                    endpoint,
                    service: None,
                });
            }
            Ok(rt) => tried.push(format!("{endpoint} (is {}, not wanted)", rt.engine())),
            Err(err) => tried.push(format!("{endpoint} ({err})")),
        }
    }
    if want != RuntimeChoice::Docker && which("podman").is_some() {
        let mut service = PodmanService::spawn(&private_dir(settings))?;
        service.wait_ready().await?;
        let path = service.socket().display().to_string();
        let mut last = None;
        for _ in 0..50 {
            match DockerRuntime::connect_unix(&path).await {
                Ok(rt) => {
                    return Ok(Connection {
                        runtime: Arc::new(rt),
                        endpoint: format!("unix://{path} (podman service started by the bridge)"),
                        service: Some(service),
                    })
                }
                Err(err) => last = Some(err),
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        service.stop().await;
        return Err(
            last.unwrap_or_else(|| RuntimeError::NotFound("podman service did not answer".into()))
        );
    }
    let what = match want {
        RuntimeChoice::Auto => "podman or docker",
        RuntimeChoice::Podman => "podman (MCP_BRIDGE_RUNTIME=podman)",
        RuntimeChoice::Docker => "docker (MCP_BRIDGE_RUNTIME=docker)",
    };
    let tried = if tried.is_empty() {
        "no engine socket exists".to_string()
    } else {
        tried.join("; ")
    };
    Err(RuntimeError::NotFound(format!(
        "install and start {what}; tried: {tried}. See GUIDE.md, section \"Container runtime\""
    )))
}

/// Connects to the engine `var` (`DOCKER_HOST` or `CONTAINER_HOST`) names, over TLS with the
/// certificates in `tls` when given; `Ok(Err(engine))` when it is another engine than `want`.
async fn connect_named(
    host: &str,
    var: &'static str,
    tls: Option<&std::path::Path>,
    want: RuntimeChoice,
) -> Result<Result<Connection, String>, RuntimeError> {
    let unreachable = |cause: TransportError| RuntimeError::Unreachable {
        endpoint: format!("{host} ({var})"),
        cause,
    };
    let mut endpoint = host.to_string();
    let result = match host.strip_prefix("unix://") {
        Some(path) if !std::path::Path::new(path).exists() => {
            return Err(unreachable(TransportError::NoSocket))
        }
        Some(path) => DockerRuntime::connect_unix(path).await,
        None => {
            let remote = Remote::of(host, tls).map_err(unreachable)?;
            if let Some(warning) = remote.warning() {
                tracing::warn!("{warning}");
            }
            endpoint = remote.describe(var);
            match &remote {
                Remote::Plain { addr } => DockerRuntime::connect_http(addr).await,
                Remote::Tls { addr, certs } => DockerRuntime::connect_tls(addr, certs).await,
            }
        }
    };
    let rt = result.map_err(|err| match err {
        RuntimeError::Transport { cause, .. } => unreachable(cause),
        other => other,
    })?;
    if !matches_choice(want, rt.engine()) {
        return Ok(Err(rt.engine().to_string()));
    }
    tracing::info!(engine = rt.engine(), endpoint = %endpoint, "connected to the container engine");
    Ok(Ok(Connection {
        runtime: Arc::new(rt),
        endpoint,
        service: None,
    }))
}

fn matches_choice(want: RuntimeChoice, engine: &str) -> bool {
    match want {
        RuntimeChoice::Auto => true,
        RuntimeChoice::Podman => engine == "podman",
        RuntimeChoice::Docker => engine == "docker",
    }
}

/// Engine sockets to try, in order, when `DOCKER_HOST` is not set.
fn candidates(settings: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    let uid = current_uid();
    let mut podman = Vec::new();
    if let Some(xdg) = &settings.xdg_runtime_dir {
        podman.push(xdg.join("podman/podman.sock"));
    }
    if let Some(uid) = uid {
        podman.push(PathBuf::from(format!("/run/user/{uid}/podman/podman.sock")));
    }
    podman.push(PathBuf::from("/run/podman/podman.sock"));
    let mut docker = vec![PathBuf::from("/var/run/docker.sock")];
    if let Some(home) = &settings.home {
        docker.push(home.join(".docker/run/docker.sock"));
        docker.push(home.join(".docker/desktop/docker.sock"));
    }
    if let Some(xdg) = &settings.xdg_runtime_dir {
        docker.push(xdg.join("docker.sock"));
    }
    let (first, second) = match settings.runtime {
        RuntimeChoice::Docker => (docker, Vec::new()),
        RuntimeChoice::Podman => (podman, Vec::new()),
        RuntimeChoice::Auto => (podman, docker),
    };
    for p in first.into_iter().chain(second) {
        let s = format!("unix://{}", p.display());
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// A short directory for our own podman socket (unix socket paths are limited to ~100 bytes).
/// The bridge's private runtime directory (`$XDG_RUNTIME_DIR` or the temp dir, per user).
pub fn private_dir(settings: &Settings) -> PathBuf {
    settings.private_dir()
}

fn current_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid()).ok()
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(bin))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::from_pairs(pairs).expect("valid settings")
    }

    #[test]
    fn sockets_are_tried_in_order_and_choice_filters() {
        let s = settings(&[("XDG_RUNTIME_DIR", "/run/user/1000")]);
        let c = candidates(&s);
        assert!(c.contains(&"unix:///run/user/1000/podman/podman.sock".to_string()));
        let podman_pos = c
            .iter()
            .position(|e| e.contains("podman"))
            .expect("podman listed");
        let docker_pos = c
            .iter()
            .position(|e| e.contains("docker.sock"))
            .expect("docker listed");
        assert!(podman_pos < docker_pos, "auto prefers podman");
        let d = candidates(&settings(&[("MCP_BRIDGE_RUNTIME", "docker")]));
        assert!(d.iter().all(|e| !e.contains("podman")), "{d:?}");
        assert!(matches_choice(RuntimeChoice::Podman, "podman"));
        assert!(!matches_choice(RuntimeChoice::Podman, "docker"));
    }

    #[tokio::test]
    async fn docker_host_is_the_only_engine_tried() {
        let s = settings(&[("DOCKER_HOST", "unix:///nonexistent/mcp-bridge-test.sock")]);
        let err = connect(&s).await.err().expect("no engine there");
        assert!(matches!(err, RuntimeError::Unreachable { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("/nonexistent/mcp-bridge-test.sock") && msg.contains("unreachable"),
            "{msg}"
        );
    }
}
