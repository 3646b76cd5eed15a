//! What `image status` and `doctor` say about an image: present or not, its recipe against
//! this binary's, where it came from, size and age; and for a missing one, how it will be made.
//! Pure: the callers ask the engine.

use super::debian;
use super::recipe::{LABEL_NODE, LABEL_RECIPE, LABEL_SOURCE, RECIPE_VERSION};
use crate::config::{ImageBuildMode, Settings};
use crate::container::ImageInfo;

/// How an image's recipe compares with this binary's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipe {
    /// Built by this binary's recipe version.
    Current,
    /// Built by another version (older, or newer than this binary).
    Other(String),
    /// Not one of ours (no label), or a user's tarball.
    Unknown,
}

/// The recipe check of `info`.
pub fn recipe_of(info: &ImageInfo) -> Recipe {
    match info.labels.get(LABEL_RECIPE) {
        Some(v) if v.trim() == RECIPE_VERSION.to_string() => Recipe::Current,
        Some(v) => Recipe::Other(v.trim().chars().take(20).collect()),
        None => Recipe::Unknown,
    }
}

/// One line about the recipe: "4 (current)" or "3, stale: this binary builds 4 ...".
pub fn recipe_line(info: &ImageInfo) -> String {
    match recipe_of(info) {
        Recipe::Current => format!("{RECIPE_VERSION} (this binary's)"),
        Recipe::Other(v) => format!(
            "{v}, stale: this binary builds recipe {RECIPE_VERSION}; rebuild with `mcp-code-bridge image build`"
        ),
        Recipe::Unknown => {
            "unknown (not built by a recipe of this bridge: not checked)".to_string()
        }
    }
}

/// The image's JavaScript runtime (`run_typescript`) as its [`LABEL_NODE`] says: the Node
/// version, or `None` when the image has none (built before recipe 5, or not by a recipe).
pub fn node_of(info: &ImageInfo) -> Option<String> {
    let v = info.labels.get(LABEL_NODE)?.trim();
    let ok =
        !v.is_empty() && v.len() <= 20 && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    ok.then(|| v.to_string())
}

/// The image's JavaScript runtime, in words (`image status`, `doctor`).
pub fn node_line(info: &ImageInfo) -> String {
    match node_of(info) {
        Some(v) => format!("node {v} (run_typescript can run)"),
        None => "none (run_typescript needs node: rebuild with `mcp-code-bridge image build`)"
            .to_string(),
    }
}

/// How a missing image will be made, for `image status` and `doctor`.
pub fn when_missing(settings: &Settings) -> String {
    let by_hand = "or build it now: `mcp-code-bridge image build`";
    if settings.image_build == ImageBuildMode::Off {
        return "MCP_BRIDGE_IMAGE_BUILD=off: the bridge will not build it; build it with `mcp-code-bridge image build`".into();
    }
    if let Some(path) = &settings.image_rootfs {
        return format!(
            "the bridge makes it on first use from MCP_BRIDGE_IMAGE_ROOTFS={} ({by_hand})",
            path.display()
        );
    }
    let offline = match (debian::available(), settings.image_host_build) {
        (Ok(()), true) => {
            "offline from Debian packages on this host (MCP_BRIDGE_IMAGE_HOST_BUILD=1)".to_string()
        }
        (Ok(()), false) => "offline from Debian packages on this host only with your go-ahead \
            (MCP_BRIDGE_IMAGE_HOST_BUILD=1, or by hand: `sudo mcp-code-bridge image build`)"
            .to_string(),
        (Err(why), _) => format!("offline from Debian packages: not possible here, {why}"),
    };
    let how = match settings.image_build {
        ImageBuildMode::Registry => format!("from the registry image {}", settings.image_base),
        ImageBuildMode::Debian => offline,
        _ => format!(
            "from the registry image {}, else {offline}",
            settings.image_base
        ),
    };
    format!("the bridge builds it on first use, {how} ({by_hand})")
}

/// The `image status` report.
pub fn report(image: &str, engine: &str, info: Option<&ImageInfo>, settings: &Settings) -> String {
    let mut out = format!("image:    {image}\nengine:   {engine}\n");
    let Some(info) = info else {
        out.push_str(&format!("present:  no; {}\n", when_missing(settings)));
        return out;
    };
    let source = info
        .labels
        .get(LABEL_SOURCE)
        .map(|s| s.chars().take(20).collect::<String>())
        .unwrap_or_else(|| "unknown".into());
    let id = info.id.trim_start_matches("sha256:");
    out.push_str(&format!(
        "present:  yes\nrecipe:   {}\nsource:   {source}\njs:       {}\nsize:     {} MB\ncreated:  {}\nid:       {}\n",
        recipe_line(info),
        node_line(info),
        info.size / 1_000_000,
        if info.created.is_empty() { "unknown" } else { &info.created },
        &id[..id.len().min(12)],
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| map.get(k).cloned()).expect("valid settings")
    }

    fn info(recipe: Option<&str>, source: &str) -> ImageInfo {
        let mut labels = HashMap::from([(LABEL_SOURCE.to_string(), source.to_string())]);
        if let Some(r) = recipe {
            labels.insert(LABEL_RECIPE.to_string(), r.to_string());
        }
        ImageInfo {
            id: "sha256:0123456789abcdef0123".into(),
            size: 612_400_000,
            created: "2026-11-24T03:00:00Z".into(),
            labels,
        }
    }

    #[test]
    fn a_current_image_shows_recipe_source_size_and_id() {
        let text = report(
            "x:1",
            "podman at unix:///run/p.sock",
            Some(&info(Some(&RECIPE_VERSION.to_string()), "debian")),
            &settings(&[]),
        );
        assert_eq!(
            text,
            format!(
                "image:    x:1\nengine:   podman at unix:///run/p.sock\npresent:  yes\n\
                 recipe:   {RECIPE_VERSION} (this binary's)\nsource:   debian\n\
                 js:       none (run_typescript needs node: rebuild with `mcp-code-bridge image build`)\n\
                 size:     612 MB\n\
                 created:  2026-11-24T03:00:00Z\nid:       0123456789ab\n"
            )
        );
    }

    #[test]
    fn the_node_label_is_shown_and_checked() {
        let mut with_node = info(Some(&RECIPE_VERSION.to_string()), "debian");
        with_node
            .labels
            .insert(LABEL_NODE.into(), super::super::recipe::NODE_VERSION.into());
        assert_eq!(
            node_of(&with_node).as_deref(),
            Some(super::super::recipe::NODE_VERSION)
        );
        assert!(report("x", "e", Some(&with_node), &settings(&[])).contains("js:       node 22."));
        with_node
            .labels
            .insert(LABEL_NODE.into(), "22\n; rm -rf".into());
        assert_eq!(
            node_of(&with_node),
            None,
            "a label that is no version is not shown"
        );
    }

    #[test]
    fn an_older_recipe_is_stale_and_a_tarball_is_not_checked() {
        let stale = info(Some("3"), "debian");
        assert_eq!(recipe_of(&stale), Recipe::Other("3".into()));
        assert!(recipe_line(&stale).contains("stale: this binary builds recipe"));
        let tarball = info(None, "rootfs");
        assert_eq!(recipe_of(&tarball), Recipe::Unknown);
        assert!(recipe_line(&tarball).starts_with("unknown"));
    }

    #[test]
    fn a_missing_image_says_how_it_will_be_made() {
        let text = report("x:1", "docker", None, &settings(&[]));
        assert!(text.contains("present:  no; the bridge builds it on first use, from the registry image docker.io/library/python:3.12-slim, else offline"), "{text}");
        assert!(text.contains("`mcp-code-bridge image build`"), "{text}");
        let off = when_missing(&settings(&[("MCP_BRIDGE_IMAGE_BUILD", "off")]));
        assert!(off.contains("will not build it"), "{off}");
        let rootfs = when_missing(&settings(&[("MCP_BRIDGE_IMAGE_ROOTFS", "/srv/r.tar")]));
        assert!(
            rootfs.contains("MCP_BRIDGE_IMAGE_ROOTFS=/srv/r.tar"),
            "{rootfs}"
        );
    }
}
