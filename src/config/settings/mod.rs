//! [`Settings`]: every `MCP_BRIDGE_*` environment variable, validated into typed values.

pub(super) mod data;
pub(super) mod guide_table;
pub(super) mod host_paths;
pub(super) mod host_system;
pub(super) mod image_values;
pub(super) mod languages;
pub(super) mod modes;
pub(super) mod mounts;
pub(super) mod net_settings;
pub(super) mod oauth_settings;
pub(super) mod overrides;
pub(super) mod policy_settings;
pub(super) mod rows;
pub(super) mod serve_settings;
pub(super) mod special_files;
pub(super) mod table;
pub(super) mod values;

use std::path::PathBuf;
use std::time::Duration;

use self::data::DataSettings;
use self::host_paths::{private_dir_in, HostPaths};
use self::image_values::{
    parse_absolute_path, parse_build_mode, parse_image_ref, parse_mirror, parse_pip_packages,
    ImageBuildMode,
};
use self::languages::{parse_languages, Languages};
use self::modes::{
    parse_channel, parse_log_level, parse_output_mode, parse_pin_tools, parse_runtime, ChannelMode,
    OutputMode, PinTools, RuntimeChoice,
};
use self::mounts::{engine_sockets, HostRules};
use self::net_settings::NetSettings;
use self::oauth_settings::OAuthSettings;
use self::overrides::{overrides, Override};
use self::policy_settings::PolicySettings;
use self::rows::{DEFAULT_IMAGE, DEFAULT_IMAGE_BASE};
use self::serve_settings::ServeSettings;
use self::table::{Lookup, Reading};
use self::values::{parse_cpus, parse_user};
use super::error::ConfigError;
use super::servers::clients::client_config_files;
use super::servers::spec::Sources;

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
    /// `MCP_BRIDGE_LANGUAGES`: the languages offered besides Python.
    pub languages: Languages,
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
    /// `MCP_BRIDGE_PIN_TOOLS`: whose tool definitions are pinned at first start.
    pub pin_tools: PinTools,
    /// `DOCKER_HOST` (else `CONTAINER_HOST`), when set.
    pub docker_host: Option<String>,
    /// Which variable named the engine: `DOCKER_HOST` or `CONTAINER_HOST`.
    pub docker_host_var: &'static str,
    /// With `DOCKER_TLS_VERIFY`: the folder holding `ca.pem`, `cert.pem` and `key.pem`
    /// (`DOCKER_CERT_PATH`, else `~/.docker`); a `tcp://` engine is then reached over TLS.
    pub docker_tls: Option<PathBuf>,
    /// `XDG_RUNTIME_DIR`, used to find per-user engine sockets.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// The private runtime folder chosen at startup (`app::check_folders`: a fallback folder
    /// when another user holds the per-user name); `None`: the per-user name.
    pub runtime_folder: Option<PathBuf>,
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
    /// Policy: the audit log, approvals, default limits.
    pub policy: PolicySettings,
    /// Serving many agents (`serve --http`) and the modules a waiting sandbox imports ahead.
    pub serve: ServeSettings,
    /// Signing in to remote servers.
    pub oauth: OAuthSettings,
    /// The sandbox's egress allow list and its bounds.
    pub net: NetSettings,
    /// The settings given a value other than their default, in the table's order (what
    /// `doctor` shows).
    pub overrides: Vec<Override>,
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

    /// Reads settings through `get` (a stand-in for the environment in tests): each variable
    /// through its row of the settings table (`rows.rs`).
    ///
    /// # Errors
    /// A [`ConfigError::BadEnv`] naming the first variable with an unusable value, or a
    /// [`ConfigError::Conflict`] between two.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let var: &Lookup = &var;
        let timeout = rows::TIMEOUT.duration(var)?;
        let max_timeout = rows::MAX_TIMEOUT.duration(var)?;
        if timeout > max_timeout {
            return Err(ConfigError::Conflict(format!(
                "MCP_BRIDGE_TIMEOUT ({}) is larger than MCP_BRIDGE_MAX_TIMEOUT ({})",
                timeout.as_secs(),
                max_timeout.as_secs()
            )));
        }
        let paths = HostPaths::from_lookup(var);
        let container_user =
            rows::CONTAINER_USER.parse(var, "65534:65534".to_string(), parse_user)?;
        let rules = HostRules {
            sockets: engine_sockets(
                paths.xdg_runtime_dir.as_deref(),
                paths.home.as_deref(),
                paths.docker_host.as_deref(),
                private_dir_in(paths.xdg_runtime_dir.as_deref()),
            ),
            runtime_folder: Some(private_dir_in(paths.xdg_runtime_dir.as_deref())),
            home: paths.home.clone(),
            sandbox_uid: container_user
                .split(':')
                .next()
                .and_then(|u| u.parse().ok()),
        };
        let memory_bytes = rows::MEMORY.get(var)?;
        let snapshot_max = match rows::SNAPSHOT_MAX.read(var)? {
            // A quarter of the sandbox's memory: saving holds the pickles next to the
            // objects, restoring the bytes next to what they become.
            Reading::Unset => Some((memory_bytes / 4).max(1 << 20) as usize),
            Reading::Off => None,
            Reading::Value(n) => Some(n as usize),
        };
        let idle = rows::RUNTIME_IDLE_TIMEOUT.duration(var)?;
        Ok(Settings {
            runtime: rows::RUNTIME.parse(var, RuntimeChoice::Auto, parse_runtime)?,
            image: rows::IMAGE
                .raw(var)
                .map_or_else(|| DEFAULT_IMAGE.to_string(), |i| i.trim().to_string()),
            image_build: rows::IMAGE_BUILD.parse(var, ImageBuildMode::Auto, parse_build_mode)?,
            image_rootfs: rows::IMAGE_ROOTFS
                .parse(var, None, |v| parse_absolute_path(v).map(Some))?,
            image_base: rows::IMAGE_BASE.parse(
                var,
                DEFAULT_IMAGE_BASE.to_string(),
                parse_image_ref,
            )?,
            image_mirror: rows::IMAGE_MIRROR.parse(var, None, |v| parse_mirror(v).map(Some))?,
            image_pip: rows::IMAGE_PIP.parse(var, None, |v| parse_pip_packages(v).map(Some))?,
            image_build_wait: rows::IMAGE_BUILD_WAIT.duration(var)?,
            image_host_build: rows::IMAGE_HOST_BUILD.get(var)?,
            setup_backups: rows::SETUP_BACKUPS.get(var)? as usize,
            cache_dir: paths.cache_dir.clone(),
            timeout,
            max_timeout,
            memory_bytes,
            pids: rows::PIDS.get(var)?,
            cpus: rows::CPUS.parse(var, None, |v| parse_cpus(v).map(Some))?,
            server_sources: server_sources(var, &paths)?,
            data: DataSettings::from_lookup(var, &rules)?,
            policy: PolicySettings::from_lookup(var)?,
            serve: ServeSettings::from_lookup(var)?,
            oauth: OAuthSettings::from_lookup(var)?,
            net: NetSettings::from_lookup(var)?,
            container_user,
            idle_timeout: (!idle.is_zero()).then_some(idle),
            state_dir: paths.state_dir,
            snapshot_max,
            snapshot_timeout: rows::SNAPSHOT_TIMEOUT.duration(var)?,
            progress_interval: rows::PROGRESS_INTERVAL.duration(var)?,
            output_mode: rows::OUTPUT_MODE.parse(var, OutputMode::Compact, parse_output_mode)?,
            languages: languages::LANGUAGES.parse(var, Languages::default(), parse_languages)?,
            log_level: rows::LOG_LEVEL.parse(var, None, parse_log_level)?,
            max_output: rows::MAX_OUTPUT.get(var)? as usize,
            max_frame: rows::MAX_FRAME.get(var)? as usize,
            max_pending_results: rows::MAX_PENDING_RESULTS.get(var)? as usize,
            channel: rows::CHANNEL.parse(var, ChannelMode::Auto, parse_channel)?,
            prewarm: rows::PREWARM.get(var)?,
            allow_weak_sandbox: rows::ALLOW_WEAK_SANDBOX.get(var)?,
            structured_content: rows::STRUCTURED_CONTENT.get(var)?,
            call_lane: rows::CALL_LANE.get(var)?,
            pin_tools: rows::PIN_TOOLS.parse(var, PinTools::Untrusted, parse_pin_tools)?,
            docker_host: paths.docker_host,
            docker_host_var: paths.docker_host_var,
            docker_tls: paths.docker_tls,
            xdg_runtime_dir: paths.xdg_runtime_dir,
            runtime_folder: None,
            uv_cache_dir: paths.uv_cache_dir,
            home: paths.home,
            claude_config_dir: paths.claude_config_dir,
            overrides: overrides(var),
        })
    }

    /// The bridge's private runtime directory (`$XDG_RUNTIME_DIR` or the temp dir, per user;
    /// the folder chosen at startup instead when another user holds that name): its own podman
    /// service's socket and the frame-channel sockets live there. Short, since unix socket
    /// paths are limited to ~100 bytes.
    pub fn private_dir(&self) -> PathBuf {
        self.runtime_folder
            .clone()
            .unwrap_or_else(|| self.named_private_dir())
    }

    /// The per-user name of the private runtime folder, which another user may hold (then
    /// [`runtime_folder`](Self::runtime_folder) is the folder used instead).
    pub fn named_private_dir(&self) -> PathBuf {
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

/// Where MCP server definitions are read from.
fn server_sources(var: &Lookup, paths: &HostPaths) -> Result<Sources, ConfigError> {
    let cwd = std::env::current_dir().ok();
    let home = paths.home.as_deref();
    let claude_dir = paths.claude_config_dir.as_deref();
    Ok(Sources {
        dir: rows::CONFIG_DIR
            .raw(var)
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join("MCPs"))),
        extra_file: rows::SERVERS_CONFIG.raw(var).map(PathBuf::from),
        client_files: if rows::IMPORT_CLIENT_CONFIGS.get(var)? {
            client_config_files(home, cwd.as_deref(), claude_dir)
        } else {
            Vec::new()
        },
        allow_self: rows::ALLOW_SELF_SERVER.get(var)?,
        home: paths.home.clone(),
        project: cwd,
        claude_settings: claude_dir
            .map(|d| d.join("settings.json"))
            .or_else(|| home.map(|h| h.join(".claude/settings.json"))),
        state_dir: Some(paths.state_dir.clone()),
        limits: PolicySettings::from_lookup(var)?.limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        Settings::from_pairs(pairs)
    }

    #[test]
    fn defaults_match_the_contract() {
        let s = with(&[]).expect("defaults are valid");
        assert_eq!(s.runtime, RuntimeChoice::Auto);
        assert_eq!(s.image, DEFAULT_IMAGE);
        assert_eq!(s.timeout, Duration::from_secs(30));
        assert_eq!(s.max_timeout, Duration::from_secs(120));
        assert_eq!(s.memory_bytes, 512 << 20);
        assert_eq!(s.pids, 128);
        assert_eq!(s.cpus, None);
        assert_eq!(s.container_user, "65534:65534");
        assert_eq!(s.idle_timeout, Some(Duration::from_secs(300)));
        assert_eq!(s.output_mode, OutputMode::Compact);
        assert_eq!(s.snapshot_max, Some(128 << 20));
        assert_eq!(s.snapshot_timeout, Duration::from_secs(30));
        assert_eq!(s.progress_interval, Duration::from_secs(1));
        assert!(s.call_lane);
        assert_eq!(s.image_build, ImageBuildMode::Auto);
        assert_eq!(s.image_rootfs, None);
        assert_eq!(s.image_base, "docker.io/library/python:3.12-slim");
        assert_eq!(s.image_mirror, None);
        assert_eq!(s.image_build_wait, Duration::from_secs(50));
        assert_eq!(s.log_level, None);
        assert_eq!(s.max_output, 65_536);
        assert_eq!(s.max_frame, 64 << 20);
        assert_eq!(s.max_pending_results, 256 << 20);
        assert!(s.overrides.is_empty(), "{:?}", s.overrides);
        assert!(
            !with(&[("MCP_BRIDGE_CALL_LANE", "0")])
                .expect("valid")
                .call_lane
        );
    }

    #[test]
    fn the_hosts_folders_are_passed_on() {
        let s = with(&[("HOME", "/home/u"), ("CLAUDE_CONFIG_DIR", "/cc")]).expect("valid");
        assert_eq!(s.uv_cache_dir, Some(PathBuf::from("/home/u/.cache/uv")));
        assert_eq!(s.claude_config_dir, Some(PathBuf::from("/cc")));
        assert_eq!(
            s.server_sources.claude_settings,
            Some(PathBuf::from("/cc/settings.json"))
        );
        assert_eq!(s.server_sources.dir, Some(PathBuf::from("/home/u/MCPs")));
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (k, v) in [
            ("MCP_BRIDGE_RUNTIME", "lxc"),
            ("MCP_BRIDGE_TIMEOUT", "soon"),
            ("MCP_BRIDGE_MEMORY", "lots"),
            ("MCP_BRIDGE_PIDS", "0"),
            ("MCP_BRIDGE_CPUS", "-1"),
            ("MCP_BRIDGE_OUTPUT_MODE", "yaml"),
            ("MCP_BRIDGE_CONTAINER_USER", "root root"),
            ("MCP_BRIDGE_LOG_LEVEL", "[[["),
            ("MCP_BRIDGE_CALL_LANE", "fast"),
            ("MCP_BRIDGE_CHANNEL", "pipe"),
            ("MCP_BRIDGE_IMAGE_BUILD", "sometimes"),
            ("MCP_BRIDGE_IMAGE_ROOTFS", "relative/rootfs.tar"),
            ("MCP_BRIDGE_IMAGE_MIRROR", "ftp://mirror"),
            ("MCP_BRIDGE_IMAGE_BASE", "python 3"),
            ("MCP_BRIDGE_IMAGE_BUILD_WAIT", "a while"),
            ("MCP_BRIDGE_IMAGE_PIP", "pyarrow; rm -rf /"),
            ("MCP_BRIDGE_MOUNTS", "/no/such/folder:/data"),
            ("MCP_BRIDGE_MAX_SERVER_MESSAGE", "0"),
            ("MCP_BRIDGE_OUTBOX_MAX_FILE", "big"),
            ("MCP_BRIDGE_SNAPSHOT_MAX", "big"),
            ("MCP_BRIDGE_SNAPSHOT_MAX", "-1m"),
            ("MCP_BRIDGE_SNAPSHOT_TIMEOUT", "0"),
            ("MCP_BRIDGE_SNAPSHOT_TIMEOUT", "a while"),
            ("MCP_BRIDGE_PROGRESS_INTERVAL", "10ms"),
            ("MCP_BRIDGE_PROGRESS_INTERVAL", "often"),
            ("MCP_BRIDGE_PROGRESS_INTERVAL", "0.1"),
            ("MCP_BRIDGE_PROGRESS_INTERVAL", "100ms"),
            ("MCP_BRIDGE_PROGRESS_INTERVAL", "1e9"),
            ("MCP_BRIDGE_PROGRESS_INTERVAL", "nan"),
        ] {
            let err = with(&[(k, v)]).expect_err(k).to_string();
            assert!(err.contains(k), "{err}");
        }
        let err = with(&[("MCP_BRIDGE_TIMEOUT", "200")])
            .expect_err("conflict")
            .to_string();
        assert!(err.contains("MCP_BRIDGE_MAX_TIMEOUT"), "{err}");
    }

    #[test]
    fn snapshots_can_be_turned_off_and_small_limits_are_refused() {
        for off in ["0", "off", "OFF"] {
            let s = with(&[("MCP_BRIDGE_SNAPSHOT_MAX", off)]).expect("valid");
            assert_eq!(s.snapshot_max, None, "{off}");
        }
        // Once raised to 1m in silence; now refused, naming the range.
        let err = with(&[("MCP_BRIDGE_SNAPSHOT_MAX", "10k")])
            .expect_err("under 1m")
            .to_string();
        assert!(
            err.contains("MCP_BRIDGE_SNAPSHOT_MAX") && err.contains("from 1m to 16g"),
            "{err}"
        );
        let s = with(&[("MCP_BRIDGE_SNAPSHOT_MAX", "1m")]).expect("valid");
        assert_eq!(s.snapshot_max, Some(1 << 20));
        let s = with(&[("MCP_BRIDGE_MEMORY", "2g")]).expect("valid");
        assert_eq!(
            s.snapshot_max,
            Some(512 << 20),
            "a quarter of the memory by default"
        );
        let s = with(&[
            ("MCP_BRIDGE_SNAPSHOT_MAX", "32m"),
            ("MCP_BRIDGE_PROGRESS_INTERVAL", "500ms"),
        ])
        .expect("valid");
        assert_eq!(s.snapshot_max, Some(32 << 20));
        assert_eq!(s.progress_interval, Duration::from_millis(500));
    }

    #[test]
    fn timeouts_are_clamped() {
        let s = with(&[("MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "0")]).expect("valid");
        assert_eq!(s.idle_timeout, None);
        assert_eq!(s.call_timeout(None), Duration::from_secs(30));
        assert_eq!(s.call_timeout(Some(5)), Duration::from_secs(5));
        assert_eq!(s.call_timeout(Some(1000)), Duration::from_secs(120));
        assert_eq!(s.timeout_capped_note(Some(120)), None);
        assert!(s
            .timeout_capped_note(Some(1000))
            .expect("capped")
            .contains("ran with 120 s"));
    }
}
