//! The sandbox image's recipes, compiled into the binary so an installed bridge can build its
//! image anywhere: the registry recipe (`container/Containerfile`, built by the engine) and the
//! Debian recipe (`container/rootfs.sh`, run on the host as root, its tarball loaded into the
//! engine). `container/build.sh` uses the same two files from the source tree.
//!
//! The Debian recipe stays a shell script rather than Rust: it is a sequence of root commands
//! (debootstrap, chroot apt-get, mount, tar) that `build.sh` and `.ci/setup-podman.sh` must run
//! before any binary exists, and one script keeps both paths making the same image.

/// The recipe version: the `mcp-code-bridge.image-recipe` label of images this binary builds.
/// An image with an older one is stale (`image status`, `doctor`).
pub const RECIPE_VERSION: u32 = 5;
/// The label carrying [`RECIPE_VERSION`].
pub const LABEL_RECIPE: &str = "mcp-code-bridge.image-recipe";
/// The label naming the recipe an image came from (see [`Source`]).
pub const LABEL_SOURCE: &str = "mcp-code-bridge.image-source";
/// The registry recipe.
pub const CONTAINERFILE: &str = include_str!("../../container/Containerfile");
/// The Debian recipe: makes (or reuses from the cache) a root filesystem tarball.
pub const ROOTFS_SCRIPT: &str = include_str!("../../container/rootfs.sh");
pub use crate::config::DEFAULT_IMAGE_BASE as DEFAULT_BASE;
/// Environment of an image made from a root filesystem tarball (the Containerfile sets its own).
pub const ROOTFS_ENV: &[&str] = &[
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "HOME=/tmp",
    "MPLCONFIGDIR=/tmp/matplotlib",
    "PYTHONDONTWRITEBYTECODE=1",
];
/// Working directory of an image made from a root filesystem tarball.
pub const ROOTFS_WORKDIR: &str = "/workspace";

/// Where an image came from: the value of [`LABEL_SOURCE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The Containerfile on a registry's Python image.
    Registry,
    /// The Debian recipe (debootstrap), offline.
    Debian,
    /// A root filesystem tarball the user pointed at (`MCP_BRIDGE_IMAGE_ROOTFS`, `--rootfs`).
    Rootfs,
}

impl Source {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Source::Registry => "registry",
            Source::Debian => "debian",
            Source::Rootfs => "rootfs",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recipe_file_carries_the_same_version() {
        let label = format!("{LABEL_RECIPE}={RECIPE_VERSION} ");
        assert!(CONTAINERFILE.contains(&label), "Containerfile: {label}");
        let script = format!("\nRECIPE_VERSION={RECIPE_VERSION}\n");
        assert!(ROOTFS_SCRIPT.contains(&script), "rootfs.sh: {script}");
        assert!(CONTAINERFILE.contains(&format!("ARG BASE={DEFAULT_BASE}\n")));
    }

    #[test]
    fn build_sh_gives_a_loaded_rootfs_the_same_config() {
        let build_sh = include_str!("../../container/build.sh");
        for env in ROOTFS_ENV {
            assert!(build_sh.contains(&format!("--change 'ENV {env}'")), "{env}");
        }
        assert!(build_sh.contains(&format!("--change 'WORKDIR {ROOTFS_WORKDIR}'")));
        assert!(build_sh.contains(&format!("LABEL {LABEL_SOURCE}=debian")));
        assert!(build_sh.contains("container/rootfs.sh") || build_sh.contains("rootfs.sh\""));
    }
}
