//! The host's own folders the bridge works with, found as the tools that own them find them:
//! the home folder, the bridge's state and cache folders, uv's cache, Claude Code's config
//! folder, the per-user runtime folder and the engine's `DOCKER_HOST`. These variables are the
//! host's (`HOME`, `XDG_*`, `UV_CACHE_DIR`, ...), not the bridge's settings, except
//! `MCP_BRIDGE_STATE_DIR`, read through its row.

use std::path::{Path, PathBuf};

use super::rows;
use super::table::Lookup;

/// The host's folders, read once with the settings.
#[derive(Debug, Clone)]
pub(super) struct HostPaths {
    /// `HOME`, else the account's home folder.
    pub home: Option<PathBuf>,
    /// `MCP_BRIDGE_STATE_DIR`, else the per-user state folder.
    pub state_dir: PathBuf,
    /// Where image builds keep `.deb` files, tarballs and their lock.
    pub cache_dir: PathBuf,
    /// uv's cache.
    pub uv_cache_dir: Option<PathBuf>,
    /// `XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// `DOCKER_HOST`, else `CONTAINER_HOST` (podman's name for it).
    pub docker_host: Option<String>,
    /// Which of the two named the engine.
    pub docker_host_var: &'static str,
    /// The folder of `ca.pem`, `cert.pem` and `key.pem` when `DOCKER_TLS_VERIFY` is set (any
    /// value, as docker's CLI reads it): `DOCKER_CERT_PATH`, else `~/.docker`.
    pub docker_tls: Option<PathBuf>,
    /// `CLAUDE_CONFIG_DIR`.
    pub claude_config_dir: Option<PathBuf>,
}

impl HostPaths {
    /// The folders, from `var` (an environment lookup returning non-blank values).
    pub fn from_lookup(var: &Lookup) -> HostPaths {
        let home = var("HOME").map(PathBuf::from).or_else(dirs::home_dir);
        let state_dir = rows::STATE_DIR
            .raw(var)
            .map(PathBuf::from)
            .or_else(|| dirs::state_dir().map(|d| d.join("mcp-code-bridge")))
            .or_else(|| dirs::cache_dir().map(|d| d.join("mcp-code-bridge")))
            .unwrap_or_else(|| std::env::temp_dir().join(per_user("mcp-code-bridge-state")));
        let cache_dir = var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| home.as_ref().map(|h| h.join(".cache")))
            .map(|d| d.join("mcp-code-bridge"))
            .unwrap_or_else(|| std::env::temp_dir().join(per_user("mcp-code-bridge-cache")));
        // As uv finds it: UV_CACHE_DIR, else $XDG_CACHE_HOME/uv, else ~/.cache/uv.
        let uv_cache_dir = var("UV_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("uv")))
            .or_else(|| home.as_ref().map(|h| h.join(".cache/uv")));
        let (docker_host, docker_host_var) = match var("DOCKER_HOST") {
            Some(host) => (Some(host), "DOCKER_HOST"),
            None => (var("CONTAINER_HOST"), "CONTAINER_HOST"),
        };
        let docker_tls = var("DOCKER_TLS_VERIFY").map(|_| {
            var("DOCKER_CERT_PATH")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".docker")))
                .unwrap_or_else(|| PathBuf::from(".docker"))
        });
        HostPaths {
            state_dir,
            cache_dir,
            uv_cache_dir,
            xdg_runtime_dir: var("XDG_RUNTIME_DIR").map(PathBuf::from),
            docker_host,
            docker_host_var,
            docker_tls,
            // Claude Code keeps `.claude.json` and `settings.json` here when set.
            claude_config_dir: var("CLAUDE_CONFIG_DIR").map(PathBuf::from),
            home,
        }
    }
}

/// The bridge's private runtime folder under `xdg_runtime_dir` (else the temp dir), per user.
/// The folder is only a name here: `checked_dir::CheckedDir` opens it and refuses one that
/// another user made first or could change.
pub(super) fn private_dir_in(xdg_runtime_dir: Option<&Path>) -> PathBuf {
    let base = xdg_runtime_dir.map_or_else(std::env::temp_dir, |d| d.to_path_buf());
    base.join(per_user("mcp-code-bridge"))
}

/// `<name>-<effective uid>`: a name in a shared folder (the temp dir) that differs per user.
fn per_user(name: &str) -> String {
    format!("{name}-{}", crate::checked_dir::euid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn paths(pairs: &[(&str, &str)]) -> HostPaths {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        HostPaths::from_lookup(&|k| map.get(k).map(|v| v.to_string()))
    }

    #[test]
    fn uvs_cache_is_found_as_uv_finds_it() {
        let home = [("HOME", "/home/u")];
        let dir = |pairs: &[(&str, &str)]| paths(pairs).uv_cache_dir;
        assert_eq!(dir(&home), Some(PathBuf::from("/home/u/.cache/uv")));
        assert_eq!(
            dir(&[home[0], ("XDG_CACHE_HOME", "/c")]),
            Some(PathBuf::from("/c/uv"))
        );
        assert_eq!(
            dir(&[home[0], ("XDG_CACHE_HOME", "/c"), ("UV_CACHE_DIR", "/u")]),
            Some(PathBuf::from("/u"))
        );
        let p = paths(&[home[0], ("CLAUDE_CONFIG_DIR", "/cc")]);
        assert_eq!(p.claude_config_dir, Some(PathBuf::from("/cc")));
    }

    #[test]
    fn the_engine_address_and_its_certificates_are_read_as_docker_reads_them() {
        let home = ("HOME", "/home/u");
        let p = paths(&[home, ("CONTAINER_HOST", "tcp://h:2376")]);
        assert_eq!(p.docker_host.as_deref(), Some("tcp://h:2376"));
        assert_eq!((p.docker_host_var, p.docker_tls), ("CONTAINER_HOST", None));
        let p = paths(&[
            home,
            ("CONTAINER_HOST", "tcp://h:2376"),
            ("DOCKER_HOST", "tcp://d:2376"),
            ("DOCKER_TLS_VERIFY", "1"),
        ]);
        assert_eq!(p.docker_host.as_deref(), Some("tcp://d:2376"));
        assert_eq!(p.docker_host_var, "DOCKER_HOST");
        assert_eq!(p.docker_tls, Some(PathBuf::from("/home/u/.docker")));
        let p = paths(&[home, ("DOCKER_TLS_VERIFY", "0"), ("DOCKER_CERT_PATH", "/c")]);
        assert_eq!(
            p.docker_tls,
            Some(PathBuf::from("/c")),
            "any value turns it on"
        );
    }
}
