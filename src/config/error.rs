//! Errors raised while reading and validating configuration.

/// A configuration value that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// An environment variable held a value of the wrong shape.
    #[error("{var}={value:?} is not valid: {reason}")]
    BadEnv {
        /// The variable's name.
        var: &'static str,
        /// The value found.
        value: String,
        /// What a valid value looks like.
        reason: String,
    },
    /// Two settings contradict each other.
    #[error("{0}")]
    Conflict(String),
}
