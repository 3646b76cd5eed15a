//! The container layer: a [`ContainerRuntime`] trait and its implementations.
//!
//! Only `docker.rs` names bollard. Nothing here knows about frames, MCP or Python: it creates,
//! attaches, starts, watches and removes hardened containers described by a [`SandboxSpec`].

mod connect;
mod docker;
mod error;
mod owner;
pub mod pod;
mod podman_service;
#[doc(hidden)]
pub mod process;
mod remote;
mod runtime;
mod shared;
mod spec;
mod workarounds;

pub use connect::{connect, private_dir, Connection, Connector};
pub use error::{RuntimeError, TransportError};
pub use owner::{
    list_own, remove_each, remove_leftovers, Owner, LABEL_HOST, LABEL_MANAGED, LABEL_PID,
    LABEL_STARTED,
};
pub use runtime::{
    ArchiveStream, Attached, Chunk, ContainerRuntime, ImageInfo, LineSink, ManagedContainer,
};
pub use shared::SharedEngine;
pub use spec::SandboxSpec;
