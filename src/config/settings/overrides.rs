//! The settings given a value other than their default: what `doctor` shows a user as the
//! settings in effect.

use super::rows::ROWS;
use super::table::Lookup;

/// A setting given a value other than its default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The variable.
    pub name: &'static str,
    /// Its value, as given.
    pub value: String,
    /// Its default, as GUIDE shows it.
    pub default: String,
}

/// The rows given a value other than their default, in the table's order (every value
/// already accepted).
pub(super) fn overrides(var: &Lookup) -> Vec<Override> {
    ROWS.iter()
        .filter_map(|row| {
            let value = var(row.name())?;
            row.differs(&value).then(|| Override {
                name: row.name(),
                value,
                default: row.default_text(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::error::ConfigError;
    use crate::config::settings::Settings;

    fn with(pairs: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        Settings::from_pairs(pairs)
    }

    #[test]
    fn the_settings_given_other_than_their_defaults_are_listed() {
        let s = with(&[
            ("MCP_BRIDGE_TIMEOUT", "60"),
            ("MCP_BRIDGE_MAX_TIMEOUT", "120"),
            ("MCP_BRIDGE_PREWARM", "on"),
            ("MCP_BRIDGE_OUTPUT_MODE", "toon"),
            ("MCP_BRIDGE_RUNTIME", "AUTO"),
            ("MCP_BRIDGE_MAX_FRAME", "65536k"),
            ("HOME", "/home/u"),
        ])
        .expect("valid");
        let listed: Vec<(&str, &str, &str)> = s
            .overrides
            .iter()
            .map(|o| (o.name, o.value.as_str(), o.default.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                ("MCP_BRIDGE_TIMEOUT", "60", "30"),
                ("MCP_BRIDGE_OUTPUT_MODE", "toon", "compact"),
            ]
        );
    }
}
