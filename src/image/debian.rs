//! Running the Debian recipe (`container/rootfs.sh`, compiled in) on this host: it makes, or
//! takes from the cache, the root filesystem tarball. Its "==> " lines are the build's phases;
//! apt's and debootstrap's lines become the phase's detail ("installing python3-scipy"). The
//! script runs in its own process group, so stopping a build stops debootstrap and apt too.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::recipe::ROOTFS_SCRIPT;
use crate::lines::LineTail;

/// How long a stopped recipe gets to unmount and clean up after SIGTERM before SIGKILL.
pub const STOP_GRACE_SECS: u64 = 5;
/// Lines of the recipe's output kept for an error message.
const TAIL_LINES: usize = 15;

/// Why the Debian recipe did not make a tarball.
#[derive(Debug, thiserror::Error)]
pub enum DebianError {
    /// The script could not be started (no bash).
    #[error("cannot run the Debian recipe with bash: {0}")]
    Spawn(#[source] std::io::Error),
    /// The script failed: its own error line, and the last lines of output.
    #[error("{cause}")]
    Failed {
        /// The script's `rootfs.sh: error:` line (or its exit status).
        cause: String,
        /// The last lines of its output.
        tail: String,
    },
    /// The build was stopped (the bridge is exiting).
    #[error("the build was stopped")]
    Stopped,
    /// The cache folder is refused: another user could change what the build reads from it.
    #[error(transparent)]
    Folder(#[from] crate::checked_dir::DirError),
}

/// What the Debian recipe needs from the caller.
#[derive(Debug, Clone)]
pub struct DebianSpec {
    /// The cache directory (`.deb` files and tarballs).
    pub cache_dir: PathBuf,
    /// A Debian mirror instead of the host's apt source.
    pub mirror: Option<String>,
    /// Packages to add from PyPI (`MCP_BRIDGE_IMAGE_PIP`).
    pub pip: Option<String>,
    /// Re-run debootstrap even when a cached tarball exists.
    pub refresh: bool,
}

/// Whether the Debian recipe can run here; `Err` says why not.
pub fn available() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "it needs root (debootstrap and chroot), and this bridge runs as a user".into(),
        );
    }
    let found = [
        "/usr/sbin/debootstrap",
        "/usr/bin/debootstrap",
        "/sbin/debootstrap",
    ]
    .iter()
    .any(|p| Path::new(p).is_file());
    if !found {
        return Err("debootstrap is not installed (apt-get install debootstrap)".into());
    }
    Ok(())
}

/// Runs the recipe; returns the tarball's path. Each phase goes to `phase`, each detail line
/// to `detail`.
///
/// # Errors
/// [`DebianError`]; `Stopped` when `ct` was cancelled (the script got SIGTERM, then SIGKILL).
pub async fn make_rootfs(
    spec: &DebianSpec,
    phase: &(dyn Fn(&str) + Send + Sync + '_),
    detail: &(dyn Fn(&str) + Send + Sync + '_),
    ct: &CancellationToken,
) -> Result<PathBuf, DebianError> {
    // The script makes and reuses files in the cache as root: only in a folder of this user
    // that no one else can write to (`checked_dir`).
    crate::checked_dir::CheckedDir::open(
        &spec.cache_dir,
        crate::checked_dir::Access::Shared,
        crate::checked_dir::FIX_CACHE,
    )?;
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c").arg(ROOTFS_SCRIPT).arg("rootfs.sh");
    if spec.refresh {
        cmd.arg("--refresh");
    }
    cmd.env("MCB_CACHE_DIR", &spec.cache_dir)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    match &spec.mirror {
        Some(m) => cmd.env("MCB_MIRROR", m),
        None => cmd.env_remove("MCB_MIRROR"),
    };
    match &spec.pip {
        Some(p) => cmd.env("MCB_PIP", p),
        None => cmd.env_remove("MCB_PIP"),
    };
    let mut child = cmd.spawn().map_err(DebianError::Spawn)?;
    let pgid = child.id().map(|id| id as i32);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let tail = LineTail::new(TAIL_LINES, 400);
    let mut last_error = None;
    let read_err = async {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(p) = line.strip_prefix("==> ") {
                phase(p);
            } else if let Some(d) = describe(&line) {
                detail(&d);
            }
            if let Some(cause) = line.strip_prefix("rootfs.sh: error: ") {
                last_error = Some(cause.to_string());
            }
            tail.push(line);
        }
    };
    let read_out = async {
        let mut out = String::new();
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            out = line;
        }
        out
    };
    let run = async {
        let ((), path) = tokio::join!(read_err, read_out);
        (child.wait().await, path)
    };
    let (status, path) = tokio::select! {
        r = run => r,
        _ = ct.cancelled() => {
            stop_group(pgid).await;
            return Err(DebianError::Stopped);
        }
    };
    match status {
        Ok(s) if s.success() && !path.is_empty() => Ok(PathBuf::from(path)),
        Ok(s) => Err(DebianError::Failed {
            cause: last_error.unwrap_or_else(|| format!("the Debian recipe exited with {s}")),
            tail: tail.joined(),
        }),
        Err(e) => Err(DebianError::Spawn(e)),
    }
}

/// SIGTERM to the recipe's process group (its trap unmounts and removes its work directory),
/// SIGKILL after [`STOP_GRACE_SECS`].
async fn stop_group(pgid: Option<i32>) {
    let Some(pgid) = pgid else { return };
    // SAFETY: signals a process group this module created; no memory is involved.
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    for _ in 0..STOP_GRACE_SECS * 10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // SAFETY: as above; signal 0 only checks whether the group still exists.
        if unsafe { libc::kill(-pgid, 0) } != 0 {
            return;
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

/// A short description of an apt or debootstrap progress line, if it is one.
fn describe(line: &str) -> Option<String> {
    let word = |rest: &str| rest.split([' ', ':']).next().unwrap_or("").to_string();
    if let Some(rest) = line.strip_prefix("Setting up ") {
        return Some(format!("setting up {}", word(rest)));
    }
    if let Some(rest) = line.strip_prefix("Unpacking ") {
        return Some(format!("unpacking {}", word(rest)));
    }
    if let Some(rest) = line.strip_prefix("I: Retrieving ") {
        return Some(format!("downloading {}", word(rest)));
    }
    if let Some(rest) = line.strip_prefix("I: Extracting ") {
        return Some(format!("extracting {}", word(rest)));
    }
    if line.starts_with("Get:") {
        // "Get:12 http://deb.debian.org/debian bookworm/main amd64 python3-scipy amd64 1.10.1-2 [15.2 MB]"
        return line
            .split_whitespace()
            .nth(4)
            .map(|p| format!("downloading {p}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_and_debootstrap_lines_become_short_details() {
        assert_eq!(
            describe("Setting up python3-pandas (1.5.3+dfsg-2) ...").as_deref(),
            Some("setting up python3-pandas")
        );
        assert_eq!(
            describe("Unpacking python3-scipy (1.10.1-2) ...").as_deref(),
            Some("unpacking python3-scipy")
        );
        assert_eq!(
            describe("Get:12 http://deb.debian.org/debian bookworm/main amd64 python3-scipy amd64 1.10.1-2 [15.2 MB]").as_deref(),
            Some("downloading python3-scipy")
        );
        assert_eq!(
            describe("I: Retrieving libc6 2.36").as_deref(),
            Some("downloading libc6")
        );
        assert_eq!(describe("Reading package lists..."), None);
    }

    #[tokio::test]
    async fn a_cache_folder_others_can_write_is_refused_before_anything_runs() {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || available().is_err() {
            eprintln!("skipped: the recipe stops earlier without root and debootstrap");
            return;
        }
        let d = tempfile::tempdir().expect("tempdir");
        let shared = d.path().join("cache");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let spec = DebianSpec {
            cache_dir: shared.clone(),
            mirror: Some("http://127.0.0.1:1/debian".into()),
            pip: None,
            refresh: false,
        };
        let none = |_: &str| {};
        let err = make_rootfs(&spec, &none, &none, &CancellationToken::new())
            .await
            .expect_err("refused");
        let text = err.to_string();
        // The bridge refuses it (`checked_dir`) before rootfs.sh, which would refuse it too.
        assert!(
            matches!(err, DebianError::Folder(_))
                && text.contains("open to other users")
                && text.contains("0777"),
            "{text}"
        );
        let left: Vec<_> = std::fs::read_dir(&shared).expect("ls").collect();
        assert!(left.is_empty(), "the recipe wrote into it: {left:?}");
    }
}
