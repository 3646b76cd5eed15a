//! mcp-code-bridge: one MCP tool, `run_python`, that runs model-written Python in a persistent,
//! locked-down container and lets it reach the user's other MCP servers.
//!
//! # Layout, top to bottom (a layer uses only those below it; `tests/module_tree/` fails on a cycle)
//! - [`cli`]: the commands: `run` (one client over stdio) and those that speak to a person
//!   (`servers`, `servers --allow`, `doctor`, `image`, `setup`, `exec`, `audit`, `kube`), and
//!   the last escape before a terminal (`cli::safe_line`, also the log writer).
//! - [`http`]: `serve --http`, one bridge for many agents: the HTTP front (tokens, origins,
//!   limits), the hub of client sandboxes and the warm pool; drains on SIGTERM.
//! - [`app`]: wiring and ordered shutdown, shared by `run`, `exec` and `serve`; [`shutdown`]:
//!   signals.
//! - [`server`]: the MCP face (rmcp); decides whose error an error is.
//!   [`format`](mod@format): a [`report::RunReport`] rendered as compact text or TOON. Pure.
//! - [`policy`]: the operator's policy on every proxied call (allow lists, the run's
//!   `allowed_tools`, limits and budgets, approval of destructive calls), as the dispatcher's
//!   `calls::CallHook`; [`audit`]: the audit log it writes.
//! - [`upstream`]: the user's MCP servers: one owner task per server, the tool cache and search,
//!   argument checks, and the host methods sandbox code calls (implements `calls::HostCalls`).
//! - [`sandbox`]: the sandbox actor, one container session, the frame protocol, the namespace
//!   kept across an idle stop; each request of sandbox code goes to [`calls`].
//! - [`egress`]: the sandbox's way out with `MCP_BRIDGE_NETWORK_ALLOW`: the allow-list proxy each
//!   sandbox's relay reaches over one unix connection (`egress::mux::run`).
//! - [`calls`]: the host-call contract between `sandbox`, `policy` and `upstream`: the
//!   dispatcher every sandbox→host request passes (typed, with the policy seam), the backend
//!   trait, a run's scope and how to ask the user. Names none of the three.
//! - [`outbox`]: files copied out of the sandbox into this session's folder on the host, and
//!   the index `resources/read` serves (`outbox::Outbox`, `outbox::CellFiles`).
//! - [`image`]: the sandbox image's recipes (compiled in), its build on the engine in use, and
//!   the background build a bridge starts when the image is missing (`image::Provisioner`).
//! - [`container`]: the [`container::ContainerRuntime`] trait; bollard for podman and docker,
//!   local or remote (TLS); the sandbox as a Kubernetes pod (`container::pod`).
//! - [`config`]: environment and server config files (the user's and the MCP clients') →
//!   validated, immutable settings (`config/settings/`: one table of rows) and server
//!   definitions with provenance and consent (`config/servers/`).
//! - Leaves: [`report`] (the outcome of one call as data), [`shown`] (untrusted text escaped for
//!   terminals and logs), [`checked_dir`] (folders and files no other local user can read or
//!   swap), [`lines`] (newline reassembly of chunked streams, bounded tails), [`log_limit`]
//!   (rate-limited log lines), [`ids`] (random ids, SHA-256), [`heap`] (the allocator's
//!   arenas, and freed memory handed back after large messages).
//!
//! See ARCHITECTURE.md for the module map and the data flow of one call.
#![warn(missing_docs, clippy::unwrap_used)]

pub mod app;
pub mod audit;
pub mod calls;
pub mod checked_dir;
pub mod cli;
pub mod config;
pub mod container;
pub mod egress;
pub mod format;
pub mod heap;
pub mod http;
pub mod ids;
pub mod image;
pub mod lines;
pub mod log_limit;
pub mod log_secrets;
pub mod outbox;
pub mod policy;
pub mod report;
pub mod sandbox;
pub mod server;
pub mod shown;
pub mod shutdown;
pub mod skills;
#[cfg(test)]
mod test_support;
pub mod upstream;
