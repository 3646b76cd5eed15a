//! `mcp-code-bridge kube`: the Kubernetes shape of a sandbox (ARCHITECTURE.md, "Sandboxes on
//! Kubernetes"). `manifest` prints the Pod and its deny-all NetworkPolicy built from the
//! settings (`container/pod.rs`), optionally running doctor's self-check instead of the
//! entrypoint; `verdict` judges that self-check's output.

mod command;
mod self_check;
mod verdict;
mod yaml;

use std::collections::BTreeMap;

use crate::config::Settings;
use crate::container::pod::{deny_all, pod, PodOptions};
use crate::container::SandboxSpec;
use crate::sandbox::entrypoint;

pub use command::{run, KubeAction};
pub use verdict::{verdict, MAX_INPUT};

/// What `kube manifest` was asked for.
#[derive(Debug, Clone)]
pub struct ManifestArgs {
    /// The pod's name (a DNS label).
    pub name: String,
    /// Run doctor's self-check in the pod instead of the entrypoint.
    pub self_check: bool,
    /// `runtimeClassName` (e.g. `gvisor`).
    pub runtime_class: Option<String>,
}

/// Why no manifest was printed.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// `MCP_BRIDGE_MOUNTS` names folders of this machine; a pod runs on a node.
    #[error(
        "MCP_BRIDGE_MOUNTS shares folders of this machine, which a pod on a cluster node cannot \
         see (a hostPath would name the node's folders): unset it for kube manifest"
    )]
    Mounts,
    /// `MCP_BRIDGE_NETWORK_ALLOW`'s way out is a socket of this machine's bridge.
    #[error(
        "MCP_BRIDGE_NETWORK_ALLOW's way out is a socket the bridge on this machine serves, which \
         a pod on a cluster node cannot reach (the pod keeps its deny-all NetworkPolicy): unset it \
         for kube manifest"
    )]
    Network,
    /// The pod's name is no DNS label.
    #[error("the pod name must be 1-63 lower-case letters, digits or '-', starting and ending with a letter or digit")]
    Name,
}

/// Whether `name` is a DNS-1123 label (what Kubernetes accepts as a pod name here).
fn dns_label(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && edge(name.chars().next())
        && edge(name.chars().last())
}

/// The manifest: a comment naming what a pod spec cannot carry, the Pod, the NetworkPolicy.
///
/// # Errors
/// [`KubeError`] when the settings share folders or the name is no DNS label.
pub fn manifest(settings: &Settings, args: &ManifestArgs) -> Result<String, KubeError> {
    if !settings.data.mounts.is_empty() {
        return Err(KubeError::Mounts);
    }
    if settings.net.enabled() {
        return Err(KubeError::Network);
    }
    if !dns_label(&args.name) {
        return Err(KubeError::Name);
    }
    let spec = SandboxSpec::new(settings, args.name.clone(), Vec::new(), BTreeMap::new());
    let options = PodOptions {
        name: args.name.clone(),
        program: if args.self_check {
            self_check::program()
        } else {
            entrypoint::BOOT.to_string()
        },
        stdin: !args.self_check,
        runtime_class: args.runtime_class.clone(),
    };
    let mut out = format!(
        "# mcp-code-bridge kube manifest: one sandbox pod and its deny-all NetworkPolicy\n\
         # (ARCHITECTURE.md, \"Sandboxes on Kubernetes\"). Not expressible in a pod spec:\n\
         # - the pids limit (MCP_BRIDGE_PIDS={}): set the kubelet's podPidsLimit;\n\
         # - noexec on the scratch folders: emptyDir takes no mount options;\n\
         # - podman kube play ignores NetworkPolicy: run it with --network none.\n",
        settings.pids
    );
    if args.self_check {
        out.push_str(
            "# Self-check pod: read its output with `kubectl logs` (or `podman logs`) into\n\
             # `mcp-code-bridge kube verdict`.\n",
        );
    }
    for doc in [pod(&spec, &options), deny_all(&args.name)] {
        out.push_str("---\n");
        out.push_str(&yaml::document(&doc));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str) -> ManifestArgs {
        ManifestArgs {
            name: name.into(),
            self_check: false,
            runtime_class: None,
        }
    }

    #[test]
    fn two_documents_and_the_refusals() {
        let settings = Settings::from_pairs(&[]).expect("settings");
        let text = manifest(&settings, &args("sandbox-1")).expect("manifest");
        assert_eq!(text.matches("\n---\n").count(), 2, "{text}");
        assert!(text.contains("kind: \"Pod\"") && text.contains("kind: \"NetworkPolicy\""));
        assert!(text.contains("MCP_BRIDGE_PIDS=128"));
        for bad in ["", "Sandbox", "-x", "x-", "a_b", &"x".repeat(64)] {
            assert!(
                matches!(manifest(&settings, &args(bad)), Err(KubeError::Name)),
                "{bad}"
            );
        }
    }
}
