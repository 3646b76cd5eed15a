//! The Python entrypoint, compiled into the binary and shipped to the sandbox over stdin.
//!
//! No host mounts are needed: the container runs `python3 -I -B -c <boot.py>`, which reads the
//! boot frame carrying these sources (see ARCHITECTURE.md).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::protocol::{ChannelOffer, Outbound, PROTOCOL_VERSION};

/// Package name the entrypoint is installed under inside the sandbox.
pub const PACKAGE: &str = "_mcp_bridge";

/// The bootstrap program passed to `python3 -c`.
pub const BOOT: &str = include_str!("../../entrypoint/boot.py");

/// Entrypoint sources shipped in the boot frame: every `.py` in `entrypoint/` but `boot.py`,
/// and every `js/*.js` (node's side of `run_typescript`) under its `js/` name.
pub const FILES: &[(&str, &str)] = &[
    ("__init__.py", include_str!("../../entrypoint/__init__.py")),
    ("ack.py", include_str!("../../entrypoint/ack.py")),
    ("__main__.py", include_str!("../../entrypoint/__main__.py")),
    ("capture.py", include_str!("../../entrypoint/capture.py")),
    (
        "cellprocs.py",
        include_str!("../../entrypoint/cellprocs.py"),
    ),
    ("channel.py", include_str!("../../entrypoint/channel.py")),
    ("confine.py", include_str!("../../entrypoint/confine.py")),
    ("egress.py", include_str!("../../entrypoint/egress.py")),
    ("errors.py", include_str!("../../entrypoint/errors.py")),
    ("inbox.py", include_str!("../../entrypoint/inbox.py")),
    ("jscells.py", include_str!("../../entrypoint/jscells.py")),
    // Not modules: jscells.py bundles them into the program node runs (`run_typescript`).
    (
        "js/harness.js",
        include_str!("../../entrypoint/js/harness.js"),
    ),
    ("js/names.js", include_str!("../../entrypoint/js/names.js")),
    (
        "js/rewrite.js",
        include_str!("../../entrypoint/js/rewrite.js"),
    ),
    ("js/state.js", include_str!("../../entrypoint/js/state.js")),
    ("keeper.py", include_str!("../../entrypoint/keeper.py")),
    ("outbox.py", include_str!("../../entrypoint/outbox.py")),
    ("pictures.py", include_str!("../../entrypoint/pictures.py")),
    ("preload.py", include_str!("../../entrypoint/preload.py")),
    ("protocol.py", include_str!("../../entrypoint/protocol.py")),
    ("proxies.py", include_str!("../../entrypoint/proxies.py")),
    ("precheck.py", include_str!("../../entrypoint/precheck.py")),
    ("runner.py", include_str!("../../entrypoint/runner.py")),
    ("runtime.py", include_str!("../../entrypoint/runtime.py")),
    ("skills.py", include_str!("../../entrypoint/skills.py")),
    ("snapshot.py", include_str!("../../entrypoint/snapshot.py")),
    ("values.py", include_str!("../../entrypoint/values.py")),
    ("cell.py", include_str!("../../entrypoint/cell.py")),
    (
        "selfcheck.py",
        include_str!("../../entrypoint/selfcheck.py"),
    ),
    (
        "sandbox_api.py",
        include_str!("../../entrypoint/sandbox_api.py"),
    ),
];

/// The command line that boots the entrypoint in a container.
pub fn command() -> Vec<String> {
    ["python3", "-I", "-B", "-c", BOOT]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The boot frame, offering the socket channel `channel` when given.
pub fn boot_frame(channel: Option<ChannelOffer<'_>>) -> Vec<u8> {
    static FILES_MAP: OnceLock<BTreeMap<&'static str, &'static str>> = OnceLock::new();
    let files = FILES_MAP.get_or_init(|| FILES.iter().copied().collect());
    Outbound::Boot {
        v: PROTOCOL_VERSION,
        package: PACKAGE,
        files,
        channel,
    }
    .to_line()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entrypoint_module_is_shipped() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("entrypoint");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("entrypoint dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".py") && n != "boot.py")
            .collect();
        on_disk.extend(
            std::fs::read_dir(dir.join("js"))
                .expect("entrypoint/js dir")
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".js"))
                .map(|n| format!("js/{n}")),
        );
        on_disk.sort();
        let mut shipped: Vec<String> = FILES.iter().map(|(n, _)| n.to_string()).collect();
        shipped.sort();
        assert_eq!(on_disk, shipped, "add new entrypoint files to FILES");
    }
}
