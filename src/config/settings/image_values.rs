//! Parsers for the image settings (`MCP_BRIDGE_IMAGE_*`): how a missing image is built, a
//! tarball path, a Debian mirror, a base image reference, the packages pip adds.

use std::path::PathBuf;

/// How the bridge builds a missing sandbox image (`MCP_BRIDGE_IMAGE_BUILD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageBuildMode {
    /// The registry recipe, else the Debian recipe where it can run.
    Auto,
    /// The registry recipe only.
    Registry,
    /// The Debian recipe only (root, debootstrap, a Debian mirror).
    Debian,
    /// Never build: a missing image is an error saying how to build it.
    Off,
}

/// `auto`, `registry`, `debian` or `off`.
pub fn parse_build_mode(v: &str) -> Result<ImageBuildMode, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(ImageBuildMode::Auto),
        "registry" => Ok(ImageBuildMode::Registry),
        "debian" => Ok(ImageBuildMode::Debian),
        "off" | "0" | "no" => Ok(ImageBuildMode::Off),
        _ => Err("expected auto, registry, debian or off".into()),
    }
}

/// An absolute path (of a tarball).
pub fn parse_absolute_path(v: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(v.trim());
    if p.is_absolute() {
        Ok(p)
    } else {
        Err("expected an absolute path to a .tar file".into())
    }
}

/// An `http://`, `https://` or `file:/` URL with no blanks, without a trailing `/`.
pub fn parse_mirror(v: &str) -> Result<String, String> {
    let v = v.trim();
    let ok = ["http://", "https://", "file:/"]
        .iter()
        .any(|s| v.starts_with(s))
        && !v.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(v.trim_end_matches('/').to_string())
    } else {
        Err("expected an http://, https:// or file:/ URL of a Debian mirror".into())
    }
}

/// Requirement specifiers for pip (`pyarrow`, `polars==1.9.0`), separated by blanks or commas;
/// only the characters requirements use, so nothing reaches the recipe's shell but names.
pub fn parse_pip_packages(v: &str) -> Result<String, String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "._-=<>!~".contains(c);
    let specs: Vec<&str> = v
        .split([' ', ','])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let valid = !specs.is_empty()
        && v.len() <= 1024
        && specs
            .iter()
            .all(|s| s.chars().all(ok_char) && s.starts_with(|c: char| c.is_ascii_alphanumeric()));
    if valid {
        Ok(specs.join(" "))
    } else {
        Err(
            "expected PyPI package names (with optional versions), such as `pyarrow` or `polars`"
                .into(),
        )
    }
}

/// An image reference: no blanks, at most 256 characters.
pub fn parse_image_ref(v: &str) -> Result<String, String> {
    let v = v.trim();
    if v.is_empty() || v.len() > 256 || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err("expected an image reference such as docker.io/library/python:3.12-slim".into())
    } else {
        Ok(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use super::ImageBuildMode;
    use crate::config::settings::Settings;

    fn with(pairs: &[(&str, &str)]) -> Settings {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| map.get(k).cloned()).expect("valid settings")
    }

    #[test]
    fn image_settings_and_the_cache_dir_are_read_from_the_environment() {
        let home = with(&[("HOME", "/home/u")]);
        assert_eq!(
            home.cache_dir,
            PathBuf::from("/home/u/.cache/mcp-code-bridge")
        );
        let set = with(&[
            ("MCP_BRIDGE_IMAGE_BUILD", "Debian"),
            ("MCP_BRIDGE_IMAGE_ROOTFS", "/srv/rootfs.tar"),
            ("MCP_BRIDGE_IMAGE_MIRROR", "http://mirror.example/debian/"),
            ("MCP_BRIDGE_IMAGE_BUILD_WAIT", "0"),
            ("XDG_CACHE_HOME", "/var/cache/u"),
            ("MCP_BRIDGE_IMAGE_PIP", "pyarrow, polars==1.9.0"),
        ]);
        assert_eq!(set.image_pip.as_deref(), Some("pyarrow polars==1.9.0"));
        assert_eq!(set.image_build, ImageBuildMode::Debian);
        assert_eq!(set.image_rootfs, Some(PathBuf::from("/srv/rootfs.tar")));
        assert_eq!(
            set.image_mirror.as_deref(),
            Some("http://mirror.example/debian")
        );
        assert_eq!(set.image_build_wait, Duration::ZERO);
        assert_eq!(set.cache_dir, PathBuf::from("/var/cache/u/mcp-code-bridge"));
    }

    #[test]
    fn host_builds_need_a_setting_and_backups_are_counted_from_one_to_a_hundred() {
        let plain = with(&[]);
        assert!(!plain.image_host_build, "off unless asked for");
        assert_eq!(
            plain.setup_backups,
            crate::config::settings::rows::SETUP_BACKUPS.default as usize
        );
        let set = with(&[
            ("MCP_BRIDGE_IMAGE_HOST_BUILD", "1"),
            ("MCP_BRIDGE_SETUP_BACKUPS", "100"),
        ]);
        assert!(set.image_host_build);
        assert_eq!(set.setup_backups, 100);
        for (var, bad) in [
            ("MCP_BRIDGE_SETUP_BACKUPS", "0"),
            ("MCP_BRIDGE_SETUP_BACKUPS", "101"),
            ("MCP_BRIDGE_SETUP_BACKUPS", "five"),
            ("MCP_BRIDGE_IMAGE_HOST_BUILD", "please"),
        ] {
            let err = Settings::from_pairs(&[(var, bad)]).expect_err(bad);
            assert!(err.to_string().contains(var), "{err}");
        }
    }
}
