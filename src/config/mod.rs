//! Configuration: the only module that reads environment variables (and, later, config files).
//!
//! Everything here is data in, validated and typed out. Nothing here spawns, connects or logs
//! about runtime state; callers receive an immutable [`Settings`] and share it as `Arc`.

mod clients;
mod error;
mod servers;
mod settings;
mod values;

pub use clients::client_config_files;
pub use error::ConfigError;
pub use servers::{discover, parse_file, ConfigIssue, ServerSpec, Servers, Sources, Transport};
pub use settings::{ChannelMode, OutputMode, RuntimeChoice, Settings};
