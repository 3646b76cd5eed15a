//! Building the sandbox image on an engine: which recipe ([`Route`]), running it, and a
//! [`BuildError`] that names the cause and the fix. The engine connection is the bridge's own
//! (bollard, `ContainerRuntime`): the registry recipe goes to the engine's `/build`, a root
//! filesystem tarball to its `/images/load`; no engine CLI is needed.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::archive::{self, ArchiveError};
use super::debian::{self, DebianError, DebianSpec};
use super::recipe::{Source, CONTAINERFILE};
use crate::config::{ImageBuildMode, Settings};
use crate::container::{ContainerRuntime, RuntimeError};

/// The file name the registry recipe is sent under (the engine's build reads it).
const CONTEXT_FILE: &str = "Containerfile";

/// Which recipe makes the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The registry recipe; when its base image cannot be had, the Debian recipe if it can run.
    Auto,
    /// The Containerfile on a registry's Python image.
    Registry,
    /// The Debian recipe (root, debootstrap, a Debian mirror).
    Debian,
    /// A root filesystem tarball the user made or was given.
    Rootfs(PathBuf),
}

/// Everything a build needs besides the engine.
#[derive(Debug, Clone)]
pub struct BuildSpec {
    /// The image to make (`MCP_BRIDGE_IMAGE`).
    pub image: String,
    /// The recipe.
    pub route: Route,
    /// The registry recipe's base image (`MCP_BRIDGE_IMAGE_BASE`).
    pub base: String,
    /// What the Debian recipe needs.
    pub debian: DebianSpec,
    /// The user allowed the Debian recipe to run on this host (`image build`, or
    /// `MCP_BRIDGE_IMAGE_HOST_BUILD=1` for the bridge's own builds).
    pub host_build: bool,
}

impl BuildSpec {
    /// The build `settings` ask for (`None` when automatic builds are off).
    pub fn from_settings(settings: &Settings) -> Option<BuildSpec> {
        let route = match (&settings.image_rootfs, settings.image_build) {
            (_, ImageBuildMode::Off) => return None,
            (Some(path), _) => Route::Rootfs(path.clone()),
            (None, ImageBuildMode::Auto) => Route::Auto,
            (None, ImageBuildMode::Registry) => Route::Registry,
            (None, ImageBuildMode::Debian) => Route::Debian,
        };
        Some(BuildSpec::with_route(settings, route))
    }

    /// A build of `settings`' image along `route`, whatever `MCP_BRIDGE_IMAGE_BUILD` says.
    pub fn with_route(settings: &Settings, route: Route) -> BuildSpec {
        BuildSpec {
            image: settings.image.clone(),
            route,
            base: settings.image_base.clone(),
            debian: DebianSpec {
                cache_dir: settings.cache_dir.clone(),
                mirror: settings.image_mirror.clone(),
                pip: settings.image_pip.clone(),
                refresh: false,
            },
            host_build: settings.image_host_build,
        }
    }
}

/// What a build reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Report<'a> {
    /// A new phase ("installing the Python stack with apt").
    Phase(&'a str),
    /// A detail of the current phase ("setting up python3-scipy").
    Detail(&'a str),
}

/// Where a build reports as it goes.
pub type Reporter<'a> = dyn for<'r> Fn(Report<'r>) + Send + Sync + 'a;

/// The fix for a host where the Debian recipe cannot run.
const OFFLINE_FIX: &str = "Fix: with a rootful engine, run `sudo mcp-code-bridge image build \
    --debian`; for a rootless one, make the root filesystem as root (`sudo mcp-code-bridge image \
    build --save-rootfs /var/tmp/mcb-rootfs.tar`) and point the bridge at it \
    (MCP_BRIDGE_IMAGE_ROOTFS=/var/tmp/mcb-rootfs.tar, or `mcp-code-bridge image build --rootfs \
    /var/tmp/mcb-rootfs.tar`)";

/// Why an image build failed: the cause, then what to do.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No engine to build on.
    #[error("{0}")]
    Engine(#[source] RuntimeError),
    /// The registry recipe failed (most often: the base image cannot be pulled).
    #[error("the registry recipe failed on {base}: {cause}. Fix: make the registry reachable, \
             set MCP_BRIDGE_IMAGE_BASE to a Python image the engine can pull (a mirror's copy), or \
             build offline from Debian packages as root (`sudo mcp-code-bridge image build --debian`)")]
    Registry {
        /// The base image.
        base: String,
        /// The engine's message.
        cause: String,
    },
    /// The registry recipe failed and the Debian recipe cannot run on this host.
    #[error(
        "no recipe can build the image here: the registry recipe failed on {base} ({registry}), \
             and the offline Debian recipe cannot run: {offline}. {OFFLINE_FIX}"
    )]
    NoRoute {
        /// The base image.
        base: String,
        /// Why the registry recipe failed.
        registry: String,
        /// Why the Debian recipe cannot run.
        offline: String,
    },
    /// The Debian recipe was asked for and cannot run on this host.
    #[error("the Debian recipe cannot run here: {0}. {OFFLINE_FIX}")]
    OfflineUnavailable(String),
    /// The Debian recipe could run here, but the user has not allowed it to.
    #[error(
        "the sandbox image is missing{}, and making it on this host needs your go-ahead: the \
         Debian recipe runs debootstrap, apt and a chroot as root here (and pip, for \
         MCP_BRIDGE_IMAGE_PIP). Fix: build it once with `sudo mcp-code-bridge image build`, or \
         set MCP_BRIDGE_IMAGE_HOST_BUILD=1 to let the bridge build it when missing; or point \
         MCP_BRIDGE_IMAGE_ROOTFS at a root filesystem tarball",
        .registry.as_deref().map(|r| format!(" (the registry recipe failed: {r})")).unwrap_or_default()
    )]
    HostBuildNotAllowed {
        /// Why the registry recipe failed first, when it was tried.
        registry: Option<String>,
    },
    /// The Debian recipe failed.
    #[error("the Debian recipe failed: {0}")]
    Debian(#[source] DebianError),
    /// The Debian recipe's cached tarball is not as it was written.
    #[error(
        "{0}. Fix: make it again with `sudo mcp-code-bridge image build --debian --refresh`, or \
         remove it"
    )]
    Cached(#[source] ArchiveError),
    /// The root filesystem tarball cannot become an image.
    #[error(
        "{0}. Fix: MCP_BRIDGE_IMAGE_ROOTFS (or --rootfs) must name an uncompressed tar of a \
             root filesystem with python3, such as `sudo mcp-code-bridge image build --save-rootfs \
             FILE` makes"
    )]
    Rootfs(#[source] ArchiveError),
    /// The engine did not take the image.
    #[error("the engine did not take the image: {0}")]
    Load(#[source] RuntimeError),
    /// The build was stopped (the bridge is exiting).
    #[error("the build was stopped")]
    Stopped,
}

/// Builds `spec.image` on `runtime` by `spec.route`; returns the recipe that made it.
///
/// # Errors
/// [`BuildError`], naming the cause and the fix.
pub async fn build_on(
    runtime: &dyn ContainerRuntime,
    spec: &BuildSpec,
    report: &Reporter<'_>,
    ct: &CancellationToken,
) -> Result<Source, BuildError> {
    match &spec.route {
        Route::Rootfs(path) => {
            tokio::select! {
                r = load_rootfs(runtime, spec, path, Source::Rootfs, report) => r?,
                _ = ct.cancelled() => return Err(BuildError::Stopped),
            }
            Ok(Source::Rootfs)
        }
        Route::Registry => registry(runtime, spec, report, ct).await,
        Route::Debian => {
            may_build_on_host(spec, debian::available(), None)?;
            offline(runtime, spec, report, ct).await
        }
        Route::Auto => match registry(runtime, spec, report, ct).await {
            Ok(source) => Ok(source),
            Err(BuildError::Registry { base, cause }) => {
                may_build_on_host(
                    spec,
                    debian::available(),
                    Some((base.clone(), cause.clone())),
                )?;
                tracing::info!(%base, %cause, "the registry recipe failed; building offline from Debian packages");
                offline(runtime, spec, report, ct).await
            }
            Err(other) => Err(other),
        },
    }
}

/// Whether the Debian recipe may run for `spec`, given whether it can run here (`available`)
/// and, on the automatic route, why the registry recipe failed first (`registry`: base, cause).
/// It can't: the reason; it could but the user has not allowed it: [`BuildError::HostBuildNotAllowed`].
fn may_build_on_host(
    spec: &BuildSpec,
    available: Result<(), String>,
    registry: Option<(String, String)>,
) -> Result<(), BuildError> {
    match (available, registry) {
        (Err(offline), Some((base, registry))) => Err(BuildError::NoRoute {
            base,
            registry,
            offline,
        }),
        (Err(offline), None) => Err(BuildError::OfflineUnavailable(offline)),
        (Ok(()), _) if spec.host_build => Ok(()),
        (Ok(()), registry) => Err(BuildError::HostBuildNotAllowed {
            registry: registry.map(|(base, cause)| format!("{base}: {cause}")),
        }),
    }
}

async fn registry(
    runtime: &dyn ContainerRuntime,
    spec: &BuildSpec,
    report: &Reporter<'_>,
    ct: &CancellationToken,
) -> Result<Source, BuildError> {
    report(Report::Phase(&format!(
        "building from the registry image {}",
        spec.base
    )));
    let context = archive::single_file_tar(CONTEXT_FILE, CONTAINERFILE.as_bytes());
    let args = [("BASE".to_string(), spec.base.clone())];
    let on_line = |line: &str| {
        let line = line.trim();
        if let Some(step) = line.strip_prefix("STEP ").or(line.strip_prefix("Step ")) {
            report(Report::Phase(&format!("step {step}")));
        } else if line.starts_with("Collecting ") || line.starts_with("Downloading ") {
            report(Report::Detail(line));
        }
    };
    let built = tokio::select! {
        r = runtime.build_image(context, &spec.image, &args, &on_line) => r,
        _ = ct.cancelled() => return Err(BuildError::Stopped),
    };
    match built {
        Ok(()) => Ok(Source::Registry),
        Err(e @ RuntimeError::Transport { .. }) | Err(e @ RuntimeError::Unreachable { .. }) => {
            Err(BuildError::Engine(e))
        }
        Err(RuntimeError::Stream { message, .. }) | Err(RuntimeError::Engine { message, .. }) => {
            Err(BuildError::Registry {
                base: spec.base.clone(),
                cause: message,
            })
        }
        Err(other) => Err(BuildError::Registry {
            base: spec.base.clone(),
            cause: other.to_string(),
        }),
    }
}

async fn offline(
    runtime: &dyn ContainerRuntime,
    spec: &BuildSpec,
    report: &Reporter<'_>,
    ct: &CancellationToken,
) -> Result<Source, BuildError> {
    let phase = |p: &str| report(Report::Phase(p));
    let detail = |d: &str| report(Report::Detail(d));
    let tarball = debian::make_rootfs(&spec.debian, &phase, &detail, ct)
        .await
        .map_err(|e| match e {
            DebianError::Stopped => BuildError::Stopped,
            other => BuildError::Debian(other),
        })?;
    report(Report::Phase(&format!(
        "loading {} into {}",
        tarball.display(),
        runtime.engine()
    )));
    let load = async {
        let archive = archive::from_cached(&tarball, &spec.image, Source::Debian)
            .await
            .map_err(|e| match e {
                e @ ArchiveError::Unverified { .. } => BuildError::Cached(e),
                other => BuildError::Rootfs(other),
            })?;
        runtime
            .load_image(archive, &|line| report(Report::Detail(line)))
            .await
            .map_err(BuildError::Load)
    };
    tokio::select! {
        r = load => r?,
        _ = ct.cancelled() => return Err(BuildError::Stopped),
    }
    Ok(Source::Debian)
}

/// Loads a user's tarball (`MCP_BRIDGE_IMAGE_ROOTFS`, `--rootfs`).
async fn load_rootfs(
    runtime: &dyn ContainerRuntime,
    spec: &BuildSpec,
    tarball: &std::path::Path,
    source: Source,
    report: &Reporter<'_>,
) -> Result<(), BuildError> {
    report(Report::Phase(&format!(
        "loading {} into {}",
        tarball.display(),
        runtime.engine()
    )));
    let archive = archive::from_rootfs(tarball, &spec.image, source)
        .await
        .map_err(BuildError::Rootfs)?;
    runtime
        .load_image(archive, &|line| report(Report::Detail(line)))
        .await
        .map_err(BuildError::Load)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pairs: &[(&str, &str)]) -> Option<BuildSpec> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let settings = Settings::from_lookup(|k| map.get(k).cloned()).expect("valid settings");
        BuildSpec::from_settings(&settings)
    }

    #[test]
    fn the_settings_choose_the_recipe_and_a_tarball_wins_unless_builds_are_off() {
        assert_eq!(spec(&[]).expect("auto").route, Route::Auto);
        assert_eq!(
            spec(&[("MCP_BRIDGE_IMAGE_BUILD", "debian")])
                .expect("debian")
                .route,
            Route::Debian
        );
        let rootfs = [
            ("MCP_BRIDGE_IMAGE_BUILD", "registry"),
            ("MCP_BRIDGE_IMAGE_ROOTFS", "/srv/r.tar"),
        ];
        assert_eq!(
            spec(&rootfs).expect("rootfs").route,
            Route::Rootfs("/srv/r.tar".into())
        );
        assert!(spec(&[("MCP_BRIDGE_IMAGE_BUILD", "off")]).is_none());
    }

    #[test]
    fn the_host_build_runs_only_when_allowed_and_possible() {
        let mut s = spec(&[("MCP_BRIDGE_IMAGE_BUILD", "debian")]).expect("debian");
        assert!(!s.host_build, "not allowed unless asked for");
        let reg = || Some(("b".to_string(), "pull failed".to_string()));
        let err = may_build_on_host(&s, Ok(()), None).expect_err("not allowed");
        assert!(matches!(
            err,
            BuildError::HostBuildNotAllowed { registry: None }
        ));
        for want in [
            "MCP_BRIDGE_IMAGE_HOST_BUILD=1",
            "mcp-code-bridge image build",
            "root",
        ] {
            assert!(err.to_string().contains(want), "{want}: {err}");
        }
        let err = may_build_on_host(&s, Ok(()), reg()).expect_err("not allowed");
        assert!(err.to_string().contains("pull failed"), "{err}");
        assert!(matches!(
            may_build_on_host(&s, Err("needs root".into()), None),
            Err(BuildError::OfflineUnavailable(_))
        ));
        assert!(matches!(
            may_build_on_host(&s, Err("needs root".into()), reg()),
            Err(BuildError::NoRoute { .. })
        ));
        s = spec(&[("MCP_BRIDGE_IMAGE_HOST_BUILD", "1")]).expect("auto");
        assert!(s.host_build);
        may_build_on_host(&s, Ok(()), reg()).expect("allowed");
    }

    #[test]
    fn every_error_names_its_fix() {
        let no_route = BuildError::NoRoute {
            base: "docker.io/library/python:3.12-slim".into(),
            registry: "no such host".into(),
            offline: "it needs root".into(),
        };
        let text = no_route.to_string();
        for want in [
            "no such host",
            "it needs root",
            "--save-rootfs",
            "MCP_BRIDGE_IMAGE_ROOTFS=",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
        let registry = BuildError::Registry {
            base: "b".into(),
            cause: "pull failed".into(),
        };
        assert!(registry.to_string().contains("MCP_BRIDGE_IMAGE_BASE"));
        assert!(BuildError::OfflineUnavailable("x".into())
            .to_string()
            .contains("Fix:"));
    }
}
