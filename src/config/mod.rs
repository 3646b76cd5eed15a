//! Configuration: the only module that reads environment variables (and, later, config files).
//!
//! Everything here is data in, validated and typed out. Nothing here spawns, connects or logs
//! about runtime state; callers receive an immutable [`Settings`] and share it as `Arc`.

mod error;
mod servers;
mod settings;
mod values;

pub use error::ConfigError;
pub use servers::{
    client_config_files, discover, parse_file, ConfigIssue, ServerSpec, Servers, Sources, Transport,
};
pub use settings::{OutputMode, RuntimeChoice, Settings};
