//! [`SandboxSpec`]: what a sandbox container must look like, independent of the engine.

use std::collections::BTreeMap;

use crate::config::{Mount, Settings};

/// Size of the `/tmp` tmpfs.
pub const TMP_SIZE: &str = "64m";
/// Size of the `/workspace` tmpfs.
pub const WORKSPACE_SIZE: &str = "256m";
/// Size of the `/var/tmp` tmpfs (podman would otherwise add an unlimited, executable one).
pub const VAR_TMP_SIZE: &str = "16m";
/// Open-files limit inside the sandbox (podman's default exceeds some hosts' hard limit).
pub const NOFILE_LIMIT: i64 = 1024;
/// The outbox: files sandbox code writes here are copied to the host after each cell.
pub const OUTBOX_DIR: &str = "/workspace/out";
/// The package folder (`MCP_BRIDGE_NETWORK_ALLOW` only): on `sys.path`, pip's target, and the
/// one writable place mounted without `noexec`, so compiled extensions load.
pub const PACKAGES_DIR: &str = "/opt/packages";

/// The hardened shape of one sandbox container.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// Image to run.
    pub image: String,
    /// Container name (unique per bridge process and sandbox generation).
    pub name: String,
    /// Command line (python3 and the bootstrap).
    pub cmd: Vec<String>,
    /// `KEY=VALUE` environment entries.
    pub env: Vec<String>,
    /// `uid:gid` to run as.
    pub user: String,
    /// Working directory.
    pub workdir: String,
    /// Labels identifying the owning bridge.
    pub labels: BTreeMap<String, String>,
    /// Memory limit in bytes (swap is disabled by setting the same total).
    pub memory_bytes: i64,
    /// Process limit.
    pub pids: i64,
    /// CPU quota in whole nano-cpus, if limited.
    pub nano_cpus: Option<i64>,
    /// Mount point → tmpfs options; all nosuid, all noexec but [`PACKAGES_DIR`].
    pub tmpfs: BTreeMap<String, String>,
    /// `(name, soft, hard)` rlimits.
    pub ulimits: Vec<(String, i64, i64)>,
    /// `(host dir, path inside)`: the frame-channel directory, bind-mounted read-only.
    pub channel_dir: Option<(std::path::PathBuf, String)>,
    /// Host folders bind-mounted read-only and not recursively (`MCP_BRIDGE_MOUNTS`).
    pub mounts: Vec<Mount>,
}

impl SandboxSpec {
    /// The host folders the container binds: the frame-channel directory, then the mounts.
    pub fn host_dirs(&self) -> Vec<std::path::PathBuf> {
        let channel = self.channel_dir.iter().map(|(dir, _)| dir.clone());
        channel
            .chain(self.mounts.iter().map(|m| m.host.clone()))
            .collect()
    }

    /// Builds the spec for `settings`, running `cmd`, owned by the bridge described by `labels`.
    pub fn new(
        settings: &Settings,
        name: String,
        cmd: Vec<String>,
        labels: BTreeMap<String, String>,
    ) -> Self {
        let mut tmpfs: BTreeMap<String, String> = [
            ("/tmp", TMP_SIZE),
            ("/workspace", WORKSPACE_SIZE),
            ("/var/tmp", VAR_TMP_SIZE),
        ]
        .into_iter()
        .map(|(dir, size)| {
            // 1777 so the unprivileged sandbox user can write, noexec so nothing written runs.
            (
                dir.to_string(),
                format!("rw,noexec,nosuid,nodev,size={size},mode=1777"),
            )
        })
        .collect();
        let net = &settings.net;
        // The way out's package folder: only with an allow list (pip has nowhere to fetch from
        // without one), and the one scratch place that may hold code to map.
        let packages = net.enabled().then(|| {
            tmpfs.insert(
                PACKAGES_DIR.to_string(),
                format!(
                    "rw,exec,nosuid,nodev,size={}k,mode=1777",
                    net.packages_size / 1024
                ),
            );
            [
                format!("MCP_BRIDGE_PACKAGES={PACKAGES_DIR}"),
                format!("PYTHONPATH={PACKAGES_DIR}"),
                format!("PIP_TARGET={PACKAGES_DIR}"),
                "PIP_BREAK_SYSTEM_PACKAGES=1".to_string(),
                "PIP_DISABLE_PIP_VERSION_CHECK=1".to_string(),
                "PIP_NO_WARN_SCRIPT_LOCATION=1".to_string(),
            ]
        });
        let data = &settings.data;
        // The entrypoint's side of the outbox and pictures (entrypoint/outbox.py, pictures.py):
        // where the outbox is and the limits it applies before the host applies them again.
        let entrypoint_env = [
            ("MCP_BRIDGE_OUTBOX", OUTBOX_DIR.to_string()),
            (
                "MCP_BRIDGE_OUTBOX_MAX_FILE",
                data.outbox.max_file.to_string(),
            ),
            (
                "MCP_BRIDGE_OUTBOX_MAX_CELL",
                data.outbox.max_cell.to_string(),
            ),
            (
                "MCP_BRIDGE_OUTBOX_MAX_FILES",
                data.outbox.max_files.to_string(),
            ),
            (
                "MCP_BRIDGE_IMAGES_MAX_SIDE",
                data.images.max_side.to_string(),
            ),
            (
                "MCP_BRIDGE_IMAGES_MAX_BYTES",
                data.images.max_bytes.to_string(),
            ),
            ("MCP_BRIDGE_MAX_FRAME", settings.max_frame.to_string()),
        ]
        .map(|(k, v)| format!("{k}={v}"));
        // The shared folders, for the entrypoint's write rule (entrypoint/confine.py): set only
        // when there are some, so the rule is asked for exactly when a folder is shared.
        let shared = (!data.mounts.is_empty()).then(|| {
            let inside: Vec<&str> = data.mounts.iter().map(|m| m.inside.as_str()).collect();
            format!("MCP_BRIDGE_SHARED={}", inside.join(":"))
        });
        SandboxSpec {
            image: settings.image.clone(),
            name,
            cmd,
            env: vec![
                "HOME=/tmp".into(),
                "MPLCONFIGDIR=/tmp/matplotlib".into(),
                "MPLBACKEND=Agg".into(),
                "PYTHONDONTWRITEBYTECODE=1".into(),
                "PYTHONUNBUFFERED=1".into(),
            ]
            .into_iter()
            .chain(entrypoint_env)
            .chain(shared)
            .chain(packages.into_iter().flatten())
            .collect(),
            user: settings.container_user.clone(),
            workdir: "/workspace".into(),
            labels,
            memory_bytes: i64::try_from(settings.memory_bytes).unwrap_or(i64::MAX),
            pids: i64::try_from(settings.pids).unwrap_or(i64::MAX),
            nano_cpus: settings.cpus.map(|c| (c * 1e9) as i64),
            tmpfs,
            ulimits: vec![
                ("nofile".into(), NOFILE_LIMIT, NOFILE_LIMIT),
                (
                    "nproc".into(),
                    i64::try_from(settings.pids)
                        .unwrap_or(i64::MAX)
                        .saturating_mul(4)
                        .max(256),
                    i64::try_from(settings.pids)
                        .unwrap_or(i64::MAX)
                        .saturating_mul(4)
                        .max(256),
                ),
            ],
            channel_dir: None,
            mounts: data.mounts.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pairs: &[(&str, &str)]) -> SandboxSpec {
        let settings = Settings::from_pairs(pairs).expect("settings");
        SandboxSpec::new(&settings, "n".into(), Vec::new(), BTreeMap::new())
    }

    #[test]
    fn the_package_folder_exists_only_with_an_allow_list_and_is_the_one_exec_mount() {
        let plain = spec(&[]);
        assert!(!plain.tmpfs.contains_key(PACKAGES_DIR));
        assert!(plain.tmpfs.values().all(|o| o.contains("noexec")));
        assert!(!plain
            .env
            .iter()
            .any(|e| e.starts_with("PIP_") || e.starts_with("PYTHONPATH")));
        let net = spec(&[
            ("MCP_BRIDGE_NETWORK_ALLOW", "pypi.org"),
            ("MCP_BRIDGE_NETWORK_PACKAGES_SIZE", "64m"),
        ]);
        let packages = &net.tmpfs[PACKAGES_DIR];
        assert!(
            packages.contains(",exec,") && packages.contains("nosuid"),
            "{packages}"
        );
        assert!(packages.contains("size=65536k"), "{packages}");
        let others = net.tmpfs.iter().filter(|(k, _)| k.as_str() != PACKAGES_DIR);
        assert!(others.clone().count() == 3 && others.clone().all(|(_, o)| o.contains("noexec")));
        assert!(net.env.contains(&format!("PIP_TARGET={PACKAGES_DIR}")));
        assert!(net.env.contains(&"PIP_BREAK_SYSTEM_PACKAGES=1".to_string()));
    }
}
