//! mcp-code-bridge: one MCP tool, `run_python`, that runs model-written Python in a persistent,
//! locked-down container and lets it reach the user's other MCP servers.
//!
//! # Layout
//! - [`config`]: environment and server config files (the user's and the MCP clients') →
//!   validated, immutable settings and server definitions with provenance and consent. Leaf.
//! - [`container`]: the [`container::ContainerRuntime`] trait; bollard for podman and docker.
//! - [`bridge`]: the sandbox actor, one container session, the frame protocol, and the
//!   dispatcher every sandbox→host request passes.
//! - [`lines`]: newline reassembly of chunked streams and bounded tails of their last lines.
//!   Leaf.
//! - [`upstream`]: the user's MCP servers: one owner task per server, the tool cache and search,
//!   argument checks, and the host methods sandbox code calls (implements `bridge::HostCalls`).
//! - [`format`](mod@format): a [`report::RunReport`] rendered as compact text or TOON. Pure.
//! - [`report`]: the outcome of one call as data. Leaf.
//! - [`shown`]: untrusted text escaped for terminals and logs (control and bidi characters). Leaf.
//! - [`private_dir`]: folders the bridge keeps things in, opened or made so that no other local
//!   user can read or swap them (`private_dir::CheckedDir::open`). Leaf.
//! - [`outbox`]: files copied out of the sandbox into this session's folder on the host, and
//!   the index `resources/read` serves (`outbox::Outbox`, `outbox::CellFiles`).
//! - [`server`]: the MCP face (rmcp); decides whose error an error is.
//! - [`app`]: wiring and ordered shutdown, shared by `run` and `exec`; [`shutdown`]: signals.
//! - [`image`]: the sandbox image's recipes (compiled in), its build on the engine in use, and
//!   the background build a bridge starts when the image is missing (`image::Provisioner`).
//! - [`cli`]: the commands that speak to a person (`servers`, `servers --allow`, `doctor`,
//!   `image`, `setup`, `exec`) and the last escape before a terminal (`cli::safe_line`, also the
//!   log writer).
//!
//! Dependencies point one way: `server → {bridge, format} → image → container` and
//! `app → upstream → bridge` (the `HostCalls` trait); `config`, `report`, `shutdown`, `lines`,
//! `shown` and `private_dir` are leaves. See ARCHITECTURE.md for the data flow of one call.
#![warn(missing_docs, clippy::unwrap_used)]

pub mod app;
pub mod bridge;
pub mod cli;
pub mod config;
pub mod container;
pub mod format;
pub mod image;
pub mod lines;
pub mod outbox;
pub mod private_dir;
pub mod report;
pub mod server;
pub mod shown;
pub mod shutdown;
pub mod upstream;
