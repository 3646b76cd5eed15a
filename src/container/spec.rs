//! [`SandboxSpec`]: what a sandbox container must look like, independent of the engine.

use std::collections::BTreeMap;

use crate::config::Settings;

/// Size of the `/tmp` tmpfs.
pub const TMP_SIZE: &str = "64m";
/// Size of the `/workspace` tmpfs.
pub const WORKSPACE_SIZE: &str = "256m";
/// Size of the `/var/tmp` tmpfs (podman would otherwise add an unlimited, executable one).
pub const VAR_TMP_SIZE: &str = "16m";
/// Open-files limit inside the sandbox (podman's default exceeds some hosts' hard limit).
pub const NOFILE_LIMIT: i64 = 1024;

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
    /// Mount point → tmpfs options; all are noexec and nosuid.
    pub tmpfs: BTreeMap<String, String>,
    /// `(name, soft, hard)` rlimits.
    pub ulimits: Vec<(String, i64, i64)>,
    /// `(host dir, path inside)`: the frame-channel directory, bind-mounted read-only.
    pub channel_dir: Option<(std::path::PathBuf, String)>,
}

impl SandboxSpec {
    /// Builds the spec for `settings`, running `cmd`, owned by the bridge described by `labels`.
    pub fn new(
        settings: &Settings,
        name: String,
        cmd: Vec<String>,
        labels: BTreeMap<String, String>,
    ) -> Self {
        let tmpfs = [
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
            ],
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
        }
    }
}
