//! Errors of the container layer.

/// A failure talking to the container engine or managing a container.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No usable engine was found.
    #[error("no container runtime found: {0}")]
    NotFound(String),
    /// The sandbox image is not present in the engine.
    #[error(
        "sandbox image '{image}' is not present in {engine}, and building it automatically is off \
         (MCP_BRIDGE_IMAGE_BUILD=off). Build it with `mcp-code-bridge image build`, or set \
         MCP_BRIDGE_IMAGE to an image with python3"
    )]
    ImageMissing {
        /// The image name.
        image: String,
        /// The engine that lacks it.
        engine: String,
    },
    /// The engine answered a request with an error status.
    #[error("{engine} refused to {action}: {message} (HTTP {status})")]
    Engine {
        /// The engine's name.
        engine: String,
        /// What we asked for.
        action: &'static str,
        /// The HTTP status code.
        status: u16,
        /// The engine's message.
        message: String,
    },
    /// The engine reported a failure in the middle of a build or load.
    #[error("{engine} failed to {action}: {message}")]
    Stream {
        /// The engine's name.
        engine: String,
        /// What we asked for.
        action: &'static str,
        /// The engine's message.
        message: String,
    },
    /// The engine could not be reached or the connection broke.
    #[error("{engine}: could not {action}: {message}")]
    Transport {
        /// The engine's name.
        engine: String,
        /// What we asked for.
        action: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The engine the user named (`DOCKER_HOST`) does not answer.
    #[error("the container engine at {endpoint} is unreachable: {message}")]
    Unreachable {
        /// The address tried.
        endpoint: String,
        /// What went wrong, and what to do.
        message: String,
    },
    /// A folder the bridge keeps its sockets in was refused (another user could reach it).
    #[error(transparent)]
    Folder(#[from] crate::private_dir::DirError),
    /// A local I/O failure (spawning the podman service, a child process, ...).
    #[error("{about}: {err}")]
    Io {
        /// What we were doing.
        about: &'static str,
        /// The underlying error.
        #[source]
        err: std::io::Error,
    },
}

impl RuntimeError {
    /// True when the engine said the container does not exist (already gone).
    pub fn is_not_found(&self) -> bool {
        matches!(self, RuntimeError::Engine { status: 404, .. })
    }

    /// True when the engine refused a request over the bind mount of host directory `dir`: its
    /// answer names the directory (docker: "bind source path does not exist: DIR", "error while
    /// creating mount source path 'DIR'", "Mounts denied: The path DIR is not shared from the
    /// host"; podman: "statfs DIR: ..."). Any other refusal is not about the mount.
    pub fn refuses_mount_of(&self, dir: &std::path::Path) -> bool {
        let dir = dir.to_string_lossy();
        matches!(self, RuntimeError::Engine { message, .. } if !dir.is_empty() && message.contains(dir.as_ref()))
    }

    /// True when the engine was not reached or the connection broke (not an engine's answer).
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            RuntimeError::Transport { .. } | RuntimeError::Unreachable { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(message: &str) -> RuntimeError {
        RuntimeError::Engine {
            engine: "docker".into(),
            action: "create the sandbox container",
            status: 400,
            message: message.into(),
        }
    }

    #[test]
    fn a_refused_mount_is_an_answer_naming_the_directory() {
        let dir = std::path::Path::new("/run/user/0/mcp-code-bridge-0/ch-7-1");
        let refused = engine("invalid mount config for type \"bind\": bind source path does not exist: /run/user/0/mcp-code-bridge-0/ch-7-1");
        assert!(refused.refuses_mount_of(dir));
        assert!(!engine("no space left on device").refuses_mount_of(dir));
        let broken = RuntimeError::Transport {
            engine: "docker".into(),
            action: "create the sandbox container",
            message: "connection reset".into(),
        };
        assert!(!broken.refuses_mount_of(dir));
    }
}
