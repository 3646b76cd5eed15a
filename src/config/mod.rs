//! Configuration: the only module that reads environment variables (and, later, config files).
//!
//! Everything here is data in, validated and typed out. Nothing here spawns, connects or logs
//! about runtime state; callers receive an immutable [`Settings`] and share it as `Arc`.

mod error;
mod settings;
mod values;

pub use error::ConfigError;
pub use settings::{OutputMode, RuntimeChoice, Settings};
