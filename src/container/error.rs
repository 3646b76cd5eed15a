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
    /// The engine refused to create or start a container because it cannot bind-mount host
    /// folder `dir` (missing on the engine's side, or not shared with the engine's VM).
    #[error("{engine} refused to {action}: {message} (HTTP {status})")]
    MountRefused {
        /// The host folder refused.
        dir: std::path::PathBuf,
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
    #[error("{engine}: could not {action}: {cause}")]
    Transport {
        /// The engine's name.
        engine: String,
        /// What we asked for.
        action: &'static str,
        /// What went wrong.
        #[source]
        cause: TransportError,
    },
    /// The engine the user named (`DOCKER_HOST`) does not answer.
    #[error(
        "the container engine at {endpoint} is unreachable: {cause}. Start that engine, or unset \
         DOCKER_HOST (and CONTAINER_HOST) to let the bridge find or start one"
    )]
    Unreachable {
        /// The address tried.
        endpoint: String,
        /// What went wrong.
        #[source]
        cause: TransportError,
    },
    /// A folder the bridge keeps its sockets in was refused (another user could reach it).
    #[error(transparent)]
    Folder(#[from] crate::checked_dir::DirError),
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

/// Why the engine could not be reached, or the connection to it broke.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The engine's API client failed (connecting, sending, decoding).
    #[error(transparent)]
    Client(Box<dyn std::error::Error + Send + Sync>),
    /// A read or write on the engine's socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// No socket exists at the address.
    #[error("no socket exists there")]
    NoSocket,
    /// The engine did not answer in time.
    #[error("no answer within {secs} s")]
    NoAnswer {
        /// The time allowed.
        secs: u64,
    },
    /// The engine answered with an HTTP status other than the one expected.
    #[error("HTTP {0}")]
    Status(u16),
    /// The answer's JSON did not parse.
    #[error("bad JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The answer broke HTTP or was not what the request asks for (what is wrong).
    #[error("{0}")]
    Malformed(String),
    /// The connection or stream ended before the answer did (which one).
    #[error("{0}")]
    Closed(&'static str),
    /// The engine's address cannot be used as given (scheme, missing TLS files): why.
    #[error("{0}")]
    Address(String),
    /// A container id we were given holds characters no id has.
    #[error("not a container id: {0:?}")]
    NotAnId(String),
}

impl RuntimeError {
    /// True when the engine said the container does not exist (already gone).
    pub fn is_not_found(&self) -> bool {
        matches!(self, RuntimeError::Engine { status: 404, .. })
    }

    /// True when the engine refused a container over the bind mount of host directory `dir`
    /// ([`RuntimeError::MountRefused`]). Any other refusal is not about the mount.
    pub fn refuses_mount_of(&self, dir: &std::path::Path) -> bool {
        matches!(self, RuntimeError::MountRefused { dir: refused, .. } if refused == dir)
    }

    /// This error as [`RuntimeError::MountRefused`] when it is the engine's refusal of a
    /// container that binds the host folders `dirs` and its answer names one of them. The
    /// engine says so only in words (docker: "bind source path does not exist: DIR", "error
    /// while creating mount source path 'DIR'", "Mounts denied: The path DIR is not shared from
    /// the host"; podman: "statfs DIR: ..."), so the runtimes read them here, once, where the
    /// answer arrives; everyone else matches the kind.
    pub fn about_mounts(self, dirs: &[std::path::PathBuf]) -> RuntimeError {
        let RuntimeError::Engine {
            engine,
            action,
            status,
            message,
        } = self
        else {
            return self;
        };
        let named = dirs.iter().find(|dir| {
            let dir = dir.to_string_lossy();
            !dir.is_empty() && message.contains(dir.as_ref())
        });
        match named {
            Some(dir) => RuntimeError::MountRefused {
                dir: dir.clone(),
                engine,
                action,
                status,
                message,
            },
            None => RuntimeError::Engine {
                engine,
                action,
                status,
                message,
            },
        }
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
        let dirs = [std::path::PathBuf::from("/data"), dir.to_path_buf()];
        let text = "invalid mount config for type \"bind\": bind source path does not exist: /run/user/0/mcp-code-bridge-0/ch-7-1";
        let refused = engine(text).about_mounts(&dirs);
        assert!(refused.refuses_mount_of(dir), "{refused:?}");
        assert!(!refused.refuses_mount_of(std::path::Path::new("/data")));
        assert_eq!(refused.to_string(), engine(text).to_string(), "same words");
        let other = engine("no space left on device").about_mounts(&dirs);
        assert!(matches!(other, RuntimeError::Engine { .. }), "{other:?}");
        assert!(!other.refuses_mount_of(dir));
        let broken = RuntimeError::Transport {
            engine: "docker".into(),
            action: "create the sandbox container",
            cause: TransportError::Closed("connection reset"),
        }
        .about_mounts(&dirs);
        assert!(!broken.refuses_mount_of(dir));
    }

    #[test]
    fn only_the_kind_says_a_mount_was_refused_not_the_words() {
        // An answer naming the folder that the runtime did not classify (another request
        // than a create or start) is no refused mount.
        let dir = std::path::Path::new("/data");
        assert!(!engine("statfs /data: permission denied").refuses_mount_of(dir));
    }
}
