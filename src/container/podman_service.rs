//! A `podman system service` started for the bridge's own use when no API socket is running.
//!
//! The service listens on a private socket, dies with the bridge (SIGTERM on exit, and
//! `PR_SET_PDEATHSIG` on Linux should the bridge be killed), and is never shared.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::RuntimeError;
use crate::checked_dir::{Access, CheckedDir, FIX_RUNTIME};

/// The longest path a unix socket can be bound to on Linux (`sun_path` less its NUL).
const MAX_SOCKET_PATH: usize = 107;

/// How long to wait for a freshly started podman service to accept connections.
pub const SERVICE_START_TIMEOUT_SECS: u64 = 15;

/// A podman API service owned by this bridge.
pub struct PodmanService {
    child: Child,
    socket: PathBuf,
}

impl PodmanService {
    /// Starts `podman system service` on a socket in the private folder `dir` (made 0700 and
    /// checked: owned by this user, open to no one else, reached without links another user
    /// could have made; see `private_dir`).
    ///
    /// # Errors
    /// [`RuntimeError::Folder`] when `dir` is refused; [`RuntimeError::Io`] if podman cannot
    /// be spawned.
    pub fn spawn(dir: &Path) -> Result<Self, RuntimeError> {
        let dir = CheckedDir::open(dir, Access::Private, FIX_RUNTIME)?;
        // One name per service: a process may run two at once (the sandbox's engine connection
        // and an image build's own), and one stopping must not remove the other's socket.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // The first keeps the short name: socket paths are limited to ~107 bytes.
        let name = match n {
            0 => format!("podman-{}.sock", std::process::id()),
            n => format!("podman-{}.{n}.sock", std::process::id()),
        };
        // Only this user can write in `dir`: a socket of this name is a leftover of ours (a
        // process of this pid before).
        match dir.remove_file(&name) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(RuntimeError::Io {
                    about: "removing an old socket of this process",
                    err,
                })
            }
            _ => {}
        }
        let socket = dir.join(&name);
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(RuntimeError::NotFound(format!(
                "the podman service's socket path {} is longer than a unix socket allows \
                 ({MAX_SOCKET_PATH} bytes): set XDG_RUNTIME_DIR or TMPDIR to a shorter folder",
                crate::shown::ShownPath(&socket)
            )));
        }
        let dir = dir.path();
        let mut cmd = Command::new("podman");
        cmd.args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            // conmon drops files such as `oom` in its working directory: keep them private.
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        die_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(|err| RuntimeError::Io {
            about: "starting `podman system service`",
            err,
        })?;
        tracing::info!(socket = %socket.display(), "started a podman API service for this bridge");
        Ok(PodmanService { child, socket })
    }

    /// The socket path the service listens on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Waits until the socket file exists (connecting is then retried by the caller).
    ///
    /// # Errors
    /// [`RuntimeError::NotFound`] if the service exits or the socket does not appear in time.
    pub async fn wait_ready(&mut self) -> Result<(), RuntimeError> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(SERVICE_START_TIMEOUT_SECS) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(RuntimeError::NotFound(format!(
                    "`podman system service` exited at once ({status})"
                )));
            }
            if self.socket.exists() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Err(RuntimeError::NotFound(format!(
            "`podman system service` did not open {} within {SERVICE_START_TIMEOUT_SECS} s",
            self.socket.display()
        )))
    }

    /// Stops the service and removes its socket.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SIGTERM first so podman cleans up; then make sure.
            // SAFETY: kill(2) with a pid we spawned and still own; no memory is touched.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            if tokio::time::timeout(Duration::from_secs(2), self.child.wait())
                .await
                .is_err()
            {
                let _ = self.child.kill().await;
            }
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_path_too_long_is_refused_before_podman_starts() {
        let d = tempfile::tempdir().expect("tempdir");
        let deep = d.path().join("x".repeat(100));
        let err = PodmanService::spawn(&deep).err().expect("refused");
        assert!(err.to_string().contains("shorter folder"), "{err}");
    }

    #[tokio::test]
    async fn two_services_of_one_process_have_two_sockets() {
        // Only the names: no podman needed. The second must not take (and later remove) the
        // first's socket.
        let d = tempfile::tempdir().expect("tempdir");
        let (Ok(a), Ok(b)) = (
            PodmanService::spawn(d.path()),
            PodmanService::spawn(d.path()),
        ) else {
            return; // podman is not installed: nothing was spawned
        };
        assert_ne!(a.socket(), b.socket());
        a.stop().await;
        b.stop().await;
    }
}
