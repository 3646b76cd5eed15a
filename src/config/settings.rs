//! [`Settings`]: every `MCP_BRIDGE_*` environment variable, validated into typed values.

use std::path::PathBuf;
use std::time::Duration;

use super::clients::client_config_files;
use super::data::DataSettings;
use super::error::ConfigError;
use super::image_values::{
    parse_absolute_path, parse_backups, parse_build_mode, parse_image_ref, parse_mirror,
    parse_pip_packages, ImageBuildMode, DEFAULT_SETUP_BACKUPS,
};
use super::mounts::{engine_sockets, HostRules};
use super::spec::Sources;
use super::values::{
    parse_count, parse_cpus, parse_flag, parse_interval, parse_seconds, parse_size, parse_user,
};

/// The sandbox image the bridge uses unless `MCP_BRIDGE_IMAGE` says otherwise.
pub const DEFAULT_IMAGE: &str = "mcp-code-bridge-sandbox:latest";

/// The registry recipe's base image unless `MCP_BRIDGE_IMAGE_BASE` names another (the `BASE`
/// argument's default in `container/Containerfile`).
pub const DEFAULT_IMAGE_BASE: &str = "docker.io/library/python:3.12-slim";

/// How long a run waits for an image build before it is told to try again, unless
/// `MCP_BRIDGE_IMAGE_BUILD_WAIT` says otherwise: under the 60 s a client commonly allows a
/// request (the TypeScript SDK's default), so the run's answer arrives before the client gives up.
pub const DEFAULT_IMAGE_BUILD_WAIT: u64 = 50;

/// Which container engine to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeChoice {
    /// `DOCKER_HOST` if set, else the first live podman or docker socket, else podman's own service.
    Auto,
    /// Podman only.
    Podman,
    /// Docker only.
    Docker,
}

/// Which channel frames between the bridge and the sandbox use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelMode {
    /// A Unix socket bind-mounted into the sandbox when the engine is local, else stdio.
    Auto,
    /// Always the container's stdio (through the engine's attach stream).
    Stdio,
}

/// How results are rendered for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Plain text: stdout, then stderr and error sections when non-empty.
    Compact,
    /// The same payload as a TOON block.
    Toon,
}

/// Validated bridge settings, read once at startup.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `MCP_BRIDGE_RUNTIME`.
    pub runtime: RuntimeChoice,
    /// `MCP_BRIDGE_IMAGE`.
    pub image: String,
    /// `MCP_BRIDGE_IMAGE_BUILD`: how a missing image is built.
    pub image_build: ImageBuildMode,
    /// `MCP_BRIDGE_IMAGE_ROOTFS`: a root filesystem tarball to make the image from instead.
    pub image_rootfs: Option<PathBuf>,
    /// `MCP_BRIDGE_IMAGE_BASE`: the registry recipe's base image.
    pub image_base: String,
    /// `MCP_BRIDGE_IMAGE_MIRROR`: the Debian mirror of the Debian recipe (default: the host's).
    pub image_mirror: Option<String>,
    /// `MCP_BRIDGE_IMAGE_PIP`: packages the Debian recipe adds from PyPI (wheels only).
    pub image_pip: Option<String>,
    /// `MCP_BRIDGE_IMAGE_BUILD_WAIT`: how long a run waits for a build before it is told to
    /// try again.
    pub image_build_wait: Duration,
    /// `MCP_BRIDGE_IMAGE_HOST_BUILD`: the bridge may run the Debian recipe (debootstrap, apt,
    /// a chroot: as root, on this host) by itself when the image is missing.
    pub image_host_build: bool,
    /// `MCP_BRIDGE_SETUP_BACKUPS`: how many `setup` backups are kept per file.
    pub setup_backups: usize,
    /// Where image builds keep `.deb` files, tarballs and their lock
    /// (`$XDG_CACHE_HOME/mcp-code-bridge`, shared with `container/build.sh`).
    pub cache_dir: PathBuf,
    /// `MCP_BRIDGE_TIMEOUT`: default per-call timeout.
    pub timeout: Duration,
    /// `MCP_BRIDGE_MAX_TIMEOUT`: cap on the per-call timeout.
    pub max_timeout: Duration,
    /// `MCP_BRIDGE_MEMORY` in bytes.
    pub memory_bytes: u64,
    /// `MCP_BRIDGE_PIDS`.
    pub pids: u64,
    /// `MCP_BRIDGE_CPUS`.
    pub cpus: Option<f64>,
    /// `MCP_BRIDGE_CONTAINER_USER`.
    pub container_user: String,
    /// `MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT`; `None` when set to 0 (never stop).
    pub idle_timeout: Option<Duration>,
    /// `MCP_BRIDGE_STATE_DIR`.
    pub state_dir: PathBuf,
    /// `MCP_BRIDGE_SNAPSHOT_MAX`: the largest snapshot of the user's namespace saved when an
    /// idle sandbox is stopped, in bytes (default a quarter of `MCP_BRIDGE_MEMORY`); `None`
    /// when set to `0` or `off` (nothing is saved).
    pub snapshot_max: Option<usize>,
    /// `MCP_BRIDGE_SNAPSHOT_TIMEOUT`: how long saving or restoring a snapshot may take.
    pub snapshot_timeout: Duration,
    /// `MCP_BRIDGE_PROGRESS_INTERVAL`: how often a running cell's output is reported as MCP
    /// progress, to a client that sent a progress token.
    pub progress_interval: Duration,
    /// `MCP_BRIDGE_OUTPUT_MODE`.
    pub output_mode: OutputMode,
    /// `MCP_BRIDGE_LOG_LEVEL` (a tracing filter directive), when set; unset, `run` and `exec`
    /// log at `info` and the commands that speak to a person at `warn`.
    pub log_level: Option<String>,
    /// `MCP_BRIDGE_MAX_OUTPUT`: characters kept per output stream before cutting.
    pub max_output: usize,
    /// `MCP_BRIDGE_MAX_FRAME`: the largest frame accepted from the sandbox, in bytes.
    pub max_frame: usize,
    /// `MCP_BRIDGE_MAX_PENDING_RESULTS`: bytes of host replies (tool results) held for a
    /// sandbox that has not read them yet; a reply past it becomes an error reply.
    pub max_pending_results: usize,
    /// `MCP_BRIDGE_CHANNEL`: `auto` (socket when possible) or `stdio`.
    pub channel: ChannelMode,
    /// `MCP_BRIDGE_PREWARM`: start the sandbox when the server starts and replace a lost one
    /// at once, instead of on the next call.
    pub prewarm: bool,
    /// `MCP_BRIDGE_ALLOW_WEAK_SANDBOX`: use a sandbox even when it is less isolated than
    /// configured (the posture check fails).
    pub allow_weak_sandbox: bool,
    /// `MCP_BRIDGE_STRUCTURED_CONTENT`: add `structuredContent` to `run_python` results. Off by
    /// default: Claude Code then shows the model only that JSON, not the rendered text.
    pub structured_content: bool,
    /// `MCP_BRIDGE_CALL_LANE`: proxied `tools/call`s to stdio servers take the lane past rmcp's
    /// service loop (on by default); off, every call goes through rmcp's request path.
    pub call_lane: bool,
    /// `DOCKER_HOST`, when set.
    pub docker_host: Option<String>,
    /// `XDG_RUNTIME_DIR`, used to find per-user engine sockets.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// The user's home directory.
    pub home: Option<PathBuf>,
    /// `CLAUDE_CONFIG_DIR`: where Claude Code keeps `.claude.json` instead of the home folder.
    pub claude_config_dir: Option<PathBuf>,
    /// uv's cache (`UV_CACHE_DIR`, else `$XDG_CACHE_HOME/uv`, else `~/.cache/uv`), where `uvx`
    /// keeps the disposable environments it runs tools from.
    pub uv_cache_dir: Option<PathBuf>,
    /// Where MCP server definitions are read from.
    pub server_sources: Sources,
    /// Data in and out: mounts, the server-message cap, the outbox, pictures.
    pub data: DataSettings,
}

impl Settings {
    /// Settings read from `pairs` alone, as if they were the whole environment (tests).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    /// Reads settings from the process environment.
    ///
    /// # Errors
    /// A [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads settings through `get` (a stand-in for the environment in tests).
    ///
    /// # Errors
    /// A [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        fn parsed<T>(
            name: &'static str,
            raw: Option<String>,
            default: T,
            parse: impl Fn(&str) -> Result<T, String>,
        ) -> Result<T, ConfigError> {
            match raw {
                None => Ok(default),
                Some(v) => parse(&v).map_err(|reason| ConfigError::BadEnv {
                    var: name,
                    value: v,
                    reason,
                }),
            }
        }
        let runtime = parsed(
            "MCP_BRIDGE_RUNTIME",
            var("MCP_BRIDGE_RUNTIME"),
            RuntimeChoice::Auto,
            |v| match v.trim().to_ascii_lowercase().as_str() {
                "auto" => Ok(RuntimeChoice::Auto),
                "podman" => Ok(RuntimeChoice::Podman),
                "docker" => Ok(RuntimeChoice::Docker),
                _ => Err("expected podman, docker or auto".into()),
            },
        )?;
        let output_mode = parsed(
            "MCP_BRIDGE_OUTPUT_MODE",
            var("MCP_BRIDGE_OUTPUT_MODE"),
            OutputMode::Compact,
            |v| match v.trim().to_ascii_lowercase().as_str() {
                "compact" => Ok(OutputMode::Compact),
                "toon" => Ok(OutputMode::Toon),
                _ => Err("expected compact or toon".into()),
            },
        )?;
        let secs = |name: &'static str, default: u64, zero: bool| {
            parsed(name, var(name), default, |v| parse_seconds(v, zero))
        };
        let timeout = secs("MCP_BRIDGE_TIMEOUT", 30, false)?;
        let max_timeout = secs("MCP_BRIDGE_MAX_TIMEOUT", 120, false)?;
        if timeout > max_timeout {
            return Err(ConfigError::Conflict(format!(
                "MCP_BRIDGE_TIMEOUT ({timeout}) is larger than MCP_BRIDGE_MAX_TIMEOUT ({max_timeout})"
            )));
        }
        let idle = secs("MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", 300, true)?;
        let snapshot_timeout = secs("MCP_BRIDGE_SNAPSHOT_TIMEOUT", 30, false)?;
        let log_level = var("MCP_BRIDGE_LOG_LEVEL");
        if let Some(level) = &log_level {
            if let Err(e) = tracing_subscriber::EnvFilter::try_new(level) {
                return Err(ConfigError::BadEnv {
                    var: "MCP_BRIDGE_LOG_LEVEL",
                    value: level.clone(),
                    reason: e.to_string(),
                });
            }
        }
        let home = var("HOME").map(PathBuf::from).or_else(dirs::home_dir);
        let state_dir = var("MCP_BRIDGE_STATE_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs::state_dir().map(|d| d.join("mcp-code-bridge")))
            .or_else(|| dirs::cache_dir().map(|d| d.join("mcp-code-bridge")))
            .unwrap_or_else(|| std::env::temp_dir().join(per_user("mcp-code-bridge-state")));
        let flag = |name: &'static str| parsed(name, var(name), false, parse_flag);
        let cwd = std::env::current_dir().ok();
        let import = flag("MCP_BRIDGE_IMPORT_CLIENT_CONFIGS")?;
        // Claude Code keeps `.claude.json` and `settings.json` in CLAUDE_CONFIG_DIR when set.
        let claude_dir = var("CLAUDE_CONFIG_DIR").map(PathBuf::from);
        let server_sources = Sources {
            dir: var("MCP_BRIDGE_CONFIG_DIR")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join("MCPs"))),
            extra_file: var("MCP_SERVERS_CONFIG").map(PathBuf::from),
            client_files: if import {
                client_config_files(home.as_deref(), cwd.as_deref(), claude_dir.as_deref())
            } else {
                Vec::new()
            },
            allow_self: flag("MCP_BRIDGE_ALLOW_SELF_SERVER")?,
            home: home.clone(),
            project: cwd.clone(),
            claude_settings: claude_dir
                .clone()
                .map(|d| d.join("settings.json"))
                .or_else(|| home.as_ref().map(|h| h.join(".claude/settings.json"))),
            state_dir: Some(state_dir.clone()),
        };
        let image = var("MCP_BRIDGE_IMAGE").unwrap_or_else(|| DEFAULT_IMAGE.to_string());
        let image_build = parsed(
            "MCP_BRIDGE_IMAGE_BUILD",
            var("MCP_BRIDGE_IMAGE_BUILD"),
            ImageBuildMode::Auto,
            parse_build_mode,
        )?;
        let image_rootfs = parsed(
            "MCP_BRIDGE_IMAGE_ROOTFS",
            var("MCP_BRIDGE_IMAGE_ROOTFS"),
            None,
            |v| parse_absolute_path(v).map(Some),
        )?;
        let image_mirror = parsed(
            "MCP_BRIDGE_IMAGE_MIRROR",
            var("MCP_BRIDGE_IMAGE_MIRROR"),
            None,
            |v| parse_mirror(v).map(Some),
        )?;
        let image_pip = parsed(
            "MCP_BRIDGE_IMAGE_PIP",
            var("MCP_BRIDGE_IMAGE_PIP"),
            None,
            |v| parse_pip_packages(v).map(Some),
        )?;
        let image_base = parsed(
            "MCP_BRIDGE_IMAGE_BASE",
            var("MCP_BRIDGE_IMAGE_BASE"),
            DEFAULT_IMAGE_BASE.to_string(),
            parse_image_ref,
        )?;
        let image_build_wait = secs(
            "MCP_BRIDGE_IMAGE_BUILD_WAIT",
            DEFAULT_IMAGE_BUILD_WAIT,
            true,
        )?;
        let cache_dir = var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home.as_ref().map(|h| h.join(".cache")))
            .map(|d| d.join("mcp-code-bridge"))
            .unwrap_or_else(|| std::env::temp_dir().join(per_user("mcp-code-bridge-cache")));
        let xdg_runtime_dir = var("XDG_RUNTIME_DIR").map(PathBuf::from);
        let docker_host = var("DOCKER_HOST");
        let container_user = parsed(
            "MCP_BRIDGE_CONTAINER_USER",
            var("MCP_BRIDGE_CONTAINER_USER"),
            "65534:65534".into(),
            parse_user,
        )?;
        let rules = HostRules {
            sockets: engine_sockets(
                xdg_runtime_dir.as_deref(),
                home.as_deref(),
                docker_host.as_deref(),
                private_dir_in(xdg_runtime_dir.as_deref()),
            ),
            home: home.clone(),
            sandbox_uid: container_user
                .split(':')
                .next()
                .and_then(|u| u.parse().ok()),
        };
        let data = DataSettings::from_lookup(&var, &rules)?;
        let memory_bytes = parsed(
            "MCP_BRIDGE_MEMORY",
            var("MCP_BRIDGE_MEMORY"),
            512 << 20,
            |v| {
                parse_size(v).and_then(|b| {
                    if b < 16 << 20 {
                        Err("at least 16m is needed to run Python".into())
                    } else {
                        Ok(b)
                    }
                })
            },
        )?;
        Ok(Settings {
            runtime,
            image: image.trim().to_string(),
            image_build,
            image_rootfs,
            image_base,
            image_mirror,
            image_pip,
            image_build_wait: Duration::from_secs(image_build_wait),
            image_host_build: flag("MCP_BRIDGE_IMAGE_HOST_BUILD")?,
            setup_backups: parsed(
                "MCP_BRIDGE_SETUP_BACKUPS",
                var("MCP_BRIDGE_SETUP_BACKUPS"),
                DEFAULT_SETUP_BACKUPS,
                parse_backups,
            )?,
            cache_dir,
            timeout: Duration::from_secs(timeout),
            max_timeout: Duration::from_secs(max_timeout),
            memory_bytes,
            pids: parsed("MCP_BRIDGE_PIDS", var("MCP_BRIDGE_PIDS"), 128, parse_count)?,
            cpus: parsed("MCP_BRIDGE_CPUS", var("MCP_BRIDGE_CPUS"), None, |v| {
                parse_cpus(v).map(Some)
            })?,
            container_user,
            idle_timeout: (idle > 0).then(|| Duration::from_secs(idle)),
            state_dir,
            snapshot_max: parsed(
                "MCP_BRIDGE_SNAPSHOT_MAX",
                var("MCP_BRIDGE_SNAPSHOT_MAX"),
                // A quarter of the sandbox's memory: saving holds the pickles next to the
                // objects, restoring the bytes next to what they become.
                Some((memory_bytes / 4).max(1 << 20) as usize),
                |v| match v.trim().to_ascii_lowercase().as_str() {
                    "0" | "off" => Ok(None),
                    _ => parse_size(v).map(|n| Some(n.clamp(1 << 20, 16 << 30) as usize)),
                },
            )?,
            snapshot_timeout: Duration::from_secs(snapshot_timeout),
            progress_interval: parsed(
                "MCP_BRIDGE_PROGRESS_INTERVAL",
                var("MCP_BRIDGE_PROGRESS_INTERVAL"),
                Duration::from_secs(1),
                |v| parse_interval(v, 250),
            )?,
            output_mode,
            log_level,
            max_output: parsed(
                "MCP_BRIDGE_MAX_OUTPUT",
                var("MCP_BRIDGE_MAX_OUTPUT"),
                65_536,
                |v| parse_count(v).map(|n| n.clamp(256, 1 << 30) as usize),
            )?,
            max_frame: parsed(
                "MCP_BRIDGE_MAX_FRAME",
                var("MCP_BRIDGE_MAX_FRAME"),
                64 << 20,
                |v| parse_size(v).map(|n| n.clamp(64 << 10, 1 << 32) as usize),
            )?,
            max_pending_results: parsed(
                "MCP_BRIDGE_MAX_PENDING_RESULTS",
                var("MCP_BRIDGE_MAX_PENDING_RESULTS"),
                256 << 20,
                |v| parse_size(v).map(|n| n.clamp(1 << 20, 1 << 32) as usize),
            )?,
            channel: parsed(
                "MCP_BRIDGE_CHANNEL",
                var("MCP_BRIDGE_CHANNEL"),
                ChannelMode::Auto,
                |v| match v.trim().to_ascii_lowercase().as_str() {
                    "auto" | "socket" => Ok(ChannelMode::Auto),
                    "stdio" => Ok(ChannelMode::Stdio),
                    _ => Err("expected auto or stdio".into()),
                },
            )?,
            prewarm: parsed(
                "MCP_BRIDGE_PREWARM",
                var("MCP_BRIDGE_PREWARM"),
                true,
                parse_flag,
            )?,
            allow_weak_sandbox: parsed(
                "MCP_BRIDGE_ALLOW_WEAK_SANDBOX",
                var("MCP_BRIDGE_ALLOW_WEAK_SANDBOX"),
                false,
                parse_flag,
            )?,
            structured_content: flag("MCP_BRIDGE_STRUCTURED_CONTENT")?,
            call_lane: parsed(
                "MCP_BRIDGE_CALL_LANE",
                var("MCP_BRIDGE_CALL_LANE"),
                true,
                parse_flag,
            )?,
            docker_host,
            xdg_runtime_dir,
            uv_cache_dir: var("UV_CACHE_DIR")
                .map(PathBuf::from)
                .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("uv")))
                .or_else(|| home.as_ref().map(|h| h.join(".cache/uv"))),
            home,
            claude_config_dir: claude_dir,
            server_sources,
            data,
        })
    }

    /// The bridge's private runtime directory (`$XDG_RUNTIME_DIR` or the temp dir, per user):
    /// its own podman service's socket and the frame-channel sockets live there. Short, since
    /// unix socket paths are limited to ~100 bytes.
    pub fn private_dir(&self) -> PathBuf {
        private_dir_in(self.xdg_runtime_dir.as_deref())
    }

    /// Clamps a requested per-call timeout to `[1 s, max_timeout]`, or returns the default.
    pub fn call_timeout(&self, requested_secs: Option<u64>) -> Duration {
        match requested_secs {
            None => self.timeout,
            Some(s) => Duration::from_secs(s.max(1)).min(self.max_timeout),
        }
    }

    /// A note for the result when `requested_secs` is over `MCP_BRIDGE_MAX_TIMEOUT` and was cut.
    pub fn timeout_capped_note(&self, requested_secs: Option<u64>) -> Option<String> {
        let max = self.max_timeout.as_secs();
        match requested_secs {
            Some(s) if s > max => Some(format!(
                "timeout {s} s is over the limit (MCP_BRIDGE_MAX_TIMEOUT); ran with {max} s"
            )),
            _ => None,
        }
    }
}

/// See [`Settings::private_dir`].
/// The folder is only a name here: `private_dir::CheckedDir` opens it and refuses one that
/// another user made first or could change.
fn private_dir_in(xdg_runtime_dir: Option<&std::path::Path>) -> PathBuf {
    let base = xdg_runtime_dir.map_or_else(std::env::temp_dir, |d| d.to_path_buf());
    base.join(per_user("mcp-code-bridge"))
}

/// `<name>-<effective uid>`: a name in a shared folder (the temp dir) that differs per user.
fn per_user(name: &str) -> String {
    format!("{name}-{}", crate::private_dir::euid())
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
