//! `kube`'s command line: the actions (clap) and where their text and exit code go.

use std::io::Read;
use std::process::ExitCode;

use clap::Subcommand;

use super::verdict::{verdict, MAX_INPUT};
use super::{manifest, ManifestArgs};
use crate::cli::exec::EXIT_USAGE;
use crate::config::Settings;

/// What `kube` is asked to do.
#[derive(Subcommand)]
pub enum KubeAction {
    /// Print a sandbox Pod and its deny-all NetworkPolicy (YAML, two documents) from the
    /// settings: MCP_BRIDGE_IMAGE, MCP_BRIDGE_MEMORY, MCP_BRIDGE_CPUS, MCP_BRIDGE_CONTAINER_USER
    /// (MCP_BRIDGE_PIDS has no pod field: set the kubelet's podPidsLimit). Apply it with
    /// `kubectl apply -f -`, or try it with `podman kube play --network none -`.
    Manifest {
        /// The pod's name (the policy is NAME-deny-all).
        #[arg(long, default_value = "mcp-code-bridge-sandbox")]
        name: String,
        /// Run the isolation self-check `doctor` runs inside a sandbox instead of the
        /// entrypoint; the pod prints one DOCTOR line and exits. Judge it with `kube verdict`.
        #[arg(long)]
        self_check: bool,
        /// Ask for a RuntimeClass by name (e.g. gvisor).
        #[arg(long, value_name = "NAME")]
        runtime_class: Option<String>,
    },
    /// Judge a self-check pod's output (`kubectl logs POD | mcp-code-bridge kube verdict`)
    /// against the settings, as `doctor` does; what a pod spec cannot express is WARN. Exit 0
    /// when nothing FAILs, 1 otherwise.
    Verdict,
}

/// Runs `kube ACTION`; the exit code says whether it succeeded (`verdict`: nothing FAILed).
pub fn run(settings: &Settings, action: KubeAction) -> ExitCode {
    let text = match action {
        KubeAction::Manifest {
            name,
            self_check,
            runtime_class,
        } => {
            let args = ManifestArgs {
                name,
                self_check,
                runtime_class,
            };
            match manifest(settings, &args) {
                Ok(text) => Ok(text),
                Err(e) => {
                    eprintln!("mcp-code-bridge: {e}");
                    return ExitCode::from(EXIT_USAGE);
                }
            }
        }
        KubeAction::Verdict => {
            let mut input = Vec::new();
            let limit = (MAX_INPUT as u64) + 1;
            if let Err(e) = std::io::stdin().take(limit).read_to_end(&mut input) {
                eprintln!("mcp-code-bridge: reading the pod's output: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
            let (report, ok) = verdict(settings, &String::from_utf8_lossy(&input));
            if ok {
                Ok(report)
            } else {
                Err(report)
            }
        }
    };
    let (text, code) = match text {
        Ok(t) => (t, ExitCode::SUCCESS),
        Err(t) => (t, ExitCode::FAILURE),
    };
    // A closed stdout (`kube manifest | head`) ends quietly, never with a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    code
}
