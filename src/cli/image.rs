//! `mcp-code-bridge image build|status|remove`: the sandbox image by hand. `build` shows its
//! progress on stderr and takes the same per-user lock as a bridge's background build; `status`
//! and `remove` print to stdout. Each returns its exit code: 0 done (status: present and not
//! stale), 1 failed (status: missing or stale).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::checked_dir::new_file::{Folder, NewFile};
use crate::config::Settings;
use crate::container::{connect, Connection};
use crate::image::build::{build_on, BuildSpec, Report, Route};
use crate::image::cached;
use crate::image::debian::{self, DebianSpec};
use crate::image::lock::{self, Attempt, BuildLock};
use crate::image::status::{self, Recipe};
use crate::shown::ShownPath;
use crate::shutdown;

/// Exit code: done.
pub const EXIT_OK: u8 = 0;
/// Exit code: failed, or (status) the image is missing or stale.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: stopped by a signal.
pub const EXIT_INTERRUPTED: u8 = 130;

/// What `image build` was asked for.
#[derive(Debug, Clone, Default)]
pub struct BuildArgs {
    /// `--registry`, `--debian` or `--rootfs FILE`; `None`: as the settings say (auto when off).
    pub route: Option<Route>,
    /// `--save-rootfs FILE`: only make the Debian root filesystem and copy it there.
    pub save_rootfs: Option<PathBuf>,
    /// `--refresh`: re-run debootstrap even when a cached root filesystem exists.
    pub refresh: bool,
}

/// `image build`.
pub async fn build(settings: &Settings, args: BuildArgs) -> u8 {
    let ct = CancellationToken::new();
    let stop = ct.clone();
    tokio::spawn(async move {
        shutdown::signalled().await;
        stop.cancel();
    });
    let mut spec = BuildSpec::from_settings(settings)
        .unwrap_or_else(|| BuildSpec::with_route(settings, Route::Auto));
    spec.debian.refresh = args.refresh;
    // Running `image build` is the go-ahead for the Debian recipe on this host.
    spec.host_build = true;
    if let Some(route) = args.route {
        spec.route = route;
    }
    let Some(_lock) = take_lock(settings, &ct).await else {
        return EXIT_INTERRUPTED;
    };
    if let Some(out) = args.save_rootfs {
        return save_rootfs(&spec.debian, &out, &ct).await;
    }
    let conn = match connect(settings).await {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    let code = build_with(&conn, &spec, settings, &ct).await;
    conn.close().await;
    code
}

async fn build_with(
    conn: &Connection,
    spec: &BuildSpec,
    settings: &Settings,
    ct: &CancellationToken,
) -> u8 {
    let runtime = conn.runtime.as_ref();
    let engine = format!("{} at {}", runtime.engine(), conn.endpoint);
    let before = runtime.image_info(&spec.image).await.ok().flatten();
    eprintln!("==> building {} on {engine}", spec.image);
    let began = std::time::Instant::now();
    let built = build_on(runtime, spec, &progress_to_stderr, ct).await;
    if let Err(e) = built {
        return if ct.is_cancelled() {
            EXIT_INTERRUPTED
        } else {
            fail(&e.to_string())
        };
    }
    let after = runtime.image_info(&spec.image).await.ok().flatten();
    // The image this build replaced, if nothing else uses it (the engine refuses otherwise).
    if let (Some(old), Some(new)) = (&before, &after) {
        if old.id != new.id && runtime.remove_image(&old.id).await.unwrap_or(false) {
            eprintln!("==> removed the image it replaced ({})", short(&old.id));
        }
    }
    eprintln!("==> built in {} s", began.elapsed().as_secs());
    print(&status::report(
        &spec.image,
        &engine,
        after.as_ref(),
        settings,
    ));
    EXIT_OK
}

fn progress_to_stderr(report: Report<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = match report {
        Report::Phase(p) => writeln!(err, "==> {p}"),
        Report::Detail(d) => writeln!(err, "    {d}"),
    };
}

/// Takes the build lock, saying once whom it waits for; `None` when interrupted first.
async fn take_lock(settings: &Settings, ct: &CancellationToken) -> Option<Option<BuildLock>> {
    let path = lock::path(&settings.cache_dir);
    let mut said = false;
    loop {
        match lock::try_lock(&path) {
            Ok(Attempt::Held(held)) => return Some(Some(held)),
            Ok(Attempt::Busy(note)) if !said => {
                eprintln!("==> waiting for another image build to finish ({note})");
                said = true;
            }
            Ok(Attempt::Busy(_)) => {}
            Err(e) => {
                eprintln!(
                    "warning: cannot take the build lock {}: {e}",
                    path.display()
                );
                return Some(None);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = ct.cancelled() => return None,
        }
    }
}

async fn save_rootfs(spec: &DebianSpec, out: &std::path::Path, ct: &CancellationToken) -> u8 {
    if let Err(why) = debian::available() {
        return fail(&format!("the Debian recipe cannot run here: {why}"));
    }
    // The target's folder is checked (and the file begun) before minutes of building.
    let to = match NewFile::create(out, Folder::Safe) {
        Ok(to) => to,
        Err(e) => return fail(&e.to_string()),
    };
    let phase = |p: &str| progress_to_stderr(Report::Phase(p));
    let detail = |d: &str| progress_to_stderr(Report::Detail(d));
    let tarball = match debian::make_rootfs(spec, &phase, &detail, ct).await {
        Ok(t) => t,
        Err(_) if ct.is_cancelled() => return EXIT_INTERRUPTED,
        Err(e) => return fail(&format!("the Debian recipe failed: {e}")),
    };
    match copy_verified(&tarball, to, out) {
        Ok(bytes) => {
            print(&format!(
                "{} ({} MB): load it with `mcp-code-bridge image build --rootfs {0}` or MCP_BRIDGE_IMAGE_ROOTFS={0}\n",
                ShownPath(out),
                bytes / 1_000_000
            ));
            EXIT_OK
        }
        Err(e) => fail(&e),
    }
}

/// Copies the cached tarball to `out` if it is as recorded (`image::cached`), through `to`, a
/// fresh file renamed over `out` (`checked_dir::new_file`): a link planted at `out` is replaced, not
/// followed.
fn copy_verified(tarball: &Path, mut to: NewFile, out: &Path) -> Result<u64, String> {
    let cannot_read = |e: std::io::Error| format!("cannot use {}: {e}", ShownPath(tarball));
    let mut from = cached::open_owned(tarball).map_err(cannot_read)?;
    let recorded = cached::recorded(tarball)
        .map_err(|why| format!("the cached root filesystem {}: {why}", ShownPath(tarball)))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(cannot_read(e)),
        };
        hasher.update(&buf[..n]);
        to.file()
            .write_all(&buf[..n])
            .map_err(|e| format!("cannot write {}: {e}", ShownPath(out)))?;
        bytes += n as u64;
    }
    let digest: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if digest != recorded {
        return Err(format!(
            "the cached root filesystem {} does not match its record (SHA-256 {digest}, recorded \
             {recorded}); nothing was written. Fix: run again with --refresh",
            ShownPath(tarball)
        ));
    }
    // Readable by all: a rootless user loads it with `image build --rootfs`.
    to.commit(0o644).map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// `image status`: 0 when present and not stale.
pub async fn status(settings: &Settings) -> u8 {
    let conn = match connect(settings).await {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    let engine = format!("{} at {}", conn.runtime.engine(), conn.endpoint);
    let info = conn.runtime.image_info(&settings.image).await;
    conn.close().await;
    let info = match info {
        Ok(i) => i,
        Err(e) => return fail(&e.to_string()),
    };
    print(&status::report(
        &settings.image,
        &engine,
        info.as_ref(),
        settings,
    ));
    match info.as_ref().map(status::recipe_of) {
        Some(Recipe::Current | Recipe::Unknown) => EXIT_OK,
        _ => EXIT_FAILED,
    }
}

/// `image remove`: removes the configured image from the engine.
pub async fn remove(settings: &Settings) -> u8 {
    let conn = match connect(settings).await {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    let engine = conn.runtime.engine().to_string();
    let removed = conn.runtime.remove_image(&settings.image).await;
    conn.close().await;
    match removed {
        Ok(true) => {
            print(&format!("removed {} from {engine}\n", settings.image));
            EXIT_OK
        }
        Ok(false) => {
            print(&format!("{} is not present in {engine}\n", settings.image));
            EXIT_OK
        }
        Err(e) => fail(&format!(
            "{e} (a sandbox of a running bridge may use it: stop that bridge first)"
        )),
    }
}

fn short(id: &str) -> &str {
    let id = id.trim_start_matches("sha256:");
    &id[..id.len().min(12)]
}

/// Writes to stdout; a closed stdout (`| head`) ends quietly.
fn print(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn fail(message: &str) -> u8 {
    eprintln!("mcp-code-bridge: {message}");
    EXIT_FAILED
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached_tarball(dir: &Path) -> PathBuf {
        let tarball = dir.join("rootfs-bookworm-amd64-k.tar");
        std::fs::write(&tarball, vec![7u8; 4096]).expect("write");
        let sum: String = Sha256::digest(std::fs::read(&tarball).expect("read"))
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(cached::record_path(&tarball), sum).expect("record");
        tarball
    }

    #[test]
    fn save_rootfs_replaces_a_planted_link_instead_of_writing_through_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let tarball = cached_tarball(d.path());
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let out = d.path().join("mcb-rootfs.tar");
        std::os::unix::fs::symlink(&victim, &out).expect("symlink");
        assert_eq!(
            copy_verified(
                &tarball,
                NewFile::create(&out, Folder::Safe).expect("new file"),
                &out
            )
            .expect("copied"),
            4096
        );
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
        let meta = std::fs::symlink_metadata(&out).expect("meta");
        assert!(meta.file_type().is_file(), "the link was replaced");
        assert_eq!(std::fs::read(&out).expect("read"), vec![7u8; 4096]);
    }

    #[test]
    fn save_rootfs_refuses_a_tampered_cache_and_writes_nothing() {
        let d = tempfile::tempdir().expect("tempdir");
        let tarball = cached_tarball(d.path());
        std::fs::write(&tarball, vec![8u8; 4096]).expect("tamper");
        let out = d.path().join("out.tar");
        let err = copy_verified(
            &tarball,
            NewFile::create(&out, Folder::Safe).expect("new file"),
            &out,
        )
        .expect_err("refused");
        assert!(err.contains("does not match its record"), "{err}");
        assert!(!out.exists());
        let names: Vec<_> = std::fs::read_dir(d.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    }
}

/// What `mcp-code-bridge image` does.
#[derive(clap::Subcommand)]
pub enum ImageAction {
    /// Build (or rebuild) the image on the engine, progress on stderr. Default recipe: the
    /// registry's Python image, else offline from Debian packages (as root, on this host:
    /// running this command is the go-ahead a bridge needs MCP_BRIDGE_IMAGE_HOST_BUILD=1 for).
    Build {
        /// Only the registry recipe (container/Containerfile on MCP_BRIDGE_IMAGE_BASE).
        #[arg(long, group = "recipe")]
        registry: bool,
        /// Only the offline Debian recipe (root, debootstrap, a Debian mirror).
        #[arg(long, group = "recipe")]
        debian: bool,
        /// Make the image from this root filesystem tarball (uncompressed tar).
        #[arg(long, group = "recipe", value_name = "FILE")]
        rootfs: Option<std::path::PathBuf>,
        /// Only make the Debian root filesystem and save it here (as root; no engine needed).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["registry", "rootfs"])]
        save_rootfs: Option<std::path::PathBuf>,
        /// Re-run debootstrap even when a cached root filesystem exists.
        #[arg(long)]
        refresh: bool,
    },
    /// Show the image: present, recipe version against this binary's, source, size, created.
    /// Exit 1 when it is missing or stale.
    Status,
    /// Remove the image from the engine.
    Remove,
}

/// Runs `image ACTION` on `engine` (`podman`, `docker`, or the settings' choice); the exit code.
pub async fn run_action(
    settings: std::sync::Arc<Settings>,
    engine: Option<String>,
    action: ImageAction,
) -> u8 {
    let mut settings = settings.as_ref().clone();
    match engine.as_deref() {
        Some("podman") => settings.runtime = crate::config::RuntimeChoice::Podman,
        Some("docker") => settings.runtime = crate::config::RuntimeChoice::Docker,
        _ => {}
    }
    match action {
        ImageAction::Build {
            registry,
            debian,
            rootfs,
            save_rootfs,
            refresh,
        } => {
            let route = match (registry, debian, rootfs) {
                (true, _, _) => Some(crate::image::Route::Registry),
                (_, true, _) => Some(crate::image::Route::Debian),
                (_, _, Some(path)) => Some(crate::image::Route::Rootfs(path)),
                _ => None,
            };
            let args = BuildArgs {
                route,
                save_rootfs,
                refresh,
            };
            build(&settings, args).await
        }
        ImageAction::Status => status(&settings).await,
        ImageAction::Remove => remove(&settings).await,
    }
}
