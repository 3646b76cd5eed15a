//! Configuration: the only module that reads environment variables and server config files
//! (the user's own and, opt-in, the MCP clients': see GUIDE.md, "Client configs").
//!
//! Everything here is data in, validated and typed out. Nothing here spawns, connects or logs
//! about runtime state; callers receive an immutable [`Settings`] and share it as `Arc`.

mod allow_list;
mod clients;
mod consent;
mod data;
mod entry;
mod error;
mod expand;
mod host_system;
mod image_values;
mod mounts;
mod own_file;
mod pending;
mod portable;
mod read;
mod servers;
mod settings;
mod spec;
mod special_files;
mod text_file;
mod values;

pub use allow_list::{AllowList, Approval};
pub use clients::{client_config_files, Client, ClientFile, Origin, Scope};
pub use consent::{entry_hash, Consent};
pub use data::{DataSettings, ImageBudget, OutboxLimits, DEFAULT_MAX_SERVER_MESSAGE};
pub use error::ConfigError;
pub use image_values::ImageBuildMode;
pub use mounts::{Mount, RESERVED_INSIDE};
pub use own_file::NotOwn;
pub use pending::{pick, project_definitions, PickError};
pub use portable::{launches_bridge, portability, Portability};
pub use servers::{discover, discover_with_env, Servers};
pub use settings::{
    ChannelMode, OutputMode, RuntimeChoice, Settings, DEFAULT_IMAGE_BASE, DEFAULT_IMAGE_BUILD_WAIT,
};
pub use spec::{ConfigIssue, ProjectEntry, ServerSpec, Sources, Transport};
pub use text_file::{read_text, MAX_CONFIG_BYTES};
