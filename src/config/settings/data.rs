//! [`DataSettings`]: the settings of data work in the sandbox: host folders shared read-only
//! (`MCP_BRIDGE_MOUNTS`), the cap on one message from an MCP server, files copied out of the
//! sandbox's outbox, and pictures returned as image content. Each is an `MCP_BRIDGE_*`
//! variable with a safe default; a bad value is a startup error naming it.

use std::time::Duration;

use super::super::error::ConfigError;
use super::mounts::{parse_mounts, HostRules, Mount};
use super::rows;
use super::table::Lookup;

/// Bounds on the files one cell may send to the host, and on what is kept there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLimits {
    /// `MCP_BRIDGE_OUTBOX_MAX_FILE`: the largest file delivered, in bytes.
    pub max_file: u64,
    /// `MCP_BRIDGE_OUTBOX_MAX_CELL`: bytes of files delivered per cell.
    pub max_cell: u64,
    /// `MCP_BRIDGE_OUTBOX_MAX_FILES`: files delivered per cell.
    pub max_files: usize,
    /// `MCP_BRIDGE_OUTBOX_KEEP_DAYS`: earlier sessions' folders older than this are removed
    /// when a bridge starts.
    pub keep: Duration,
    /// `MCP_BRIDGE_OUTBOX_MAX_TOTAL`: bytes kept in all sessions' folders together; the
    /// oldest sessions go first, and a cell's file that would not fit is refused.
    pub max_total: u64,
}

/// How pictures (matplotlib figures, `display(image)`) come back as MCP image content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBudget {
    /// `MCP_BRIDGE_IMAGES`: return image content (the files are saved and linked either way).
    pub enabled: bool,
    /// `MCP_BRIDGE_IMAGES_MAX_SIDE`: the longest side of a returned picture, in pixels.
    pub max_side: u32,
    /// `MCP_BRIDGE_IMAGES_MAX_BYTES`: the largest returned PNG, in bytes.
    pub max_bytes: u64,
}

/// The data settings, read once at startup.
#[derive(Debug, Clone)]
pub struct DataSettings {
    /// `MCP_BRIDGE_MOUNTS`: host folders mounted read-only into the sandbox.
    pub mounts: Vec<Mount>,
    /// `MCP_BRIDGE_MAX_SERVER_MESSAGE`: the largest JSON-RPC message accepted from a stdio or
    /// legacy SSE MCP server, in bytes.
    pub max_server_message: usize,
    /// The outbox: files copied out of the sandbox.
    pub outbox: OutboxLimits,
    /// Pictures returned as image content.
    pub images: ImageBudget,
}

/// Default `MCP_BRIDGE_MAX_SERVER_MESSAGE`.
pub const DEFAULT_MAX_SERVER_MESSAGE: usize = rows::MAX_SERVER_MESSAGE.default as usize;

impl DataSettings {
    /// Reads the data settings through `var` (an environment lookup returning non-blank
    /// values), each through its row of the settings table; `rules` are what a mounted host
    /// folder is checked against.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_lookup(var: &Lookup, rules: &HostRules) -> Result<Self, ConfigError> {
        Ok(DataSettings {
            mounts: rows::MOUNTS.parse(var, Vec::new(), |v| parse_mounts(v, rules))?,
            max_server_message: rows::MAX_SERVER_MESSAGE.get(var)? as usize,
            outbox: OutboxLimits {
                max_file: rows::OUTBOX_MAX_FILE.get(var)?,
                max_cell: rows::OUTBOX_MAX_CELL.get(var)?,
                max_files: rows::OUTBOX_MAX_FILES.get(var)? as usize,
                keep: rows::OUTBOX_KEEP_DAYS.duration(var)?,
                max_total: rows::OUTBOX_MAX_TOTAL.get(var)?,
            },
            images: ImageBudget {
                enabled: rows::IMAGES.get(var)?,
                max_side: rows::IMAGES_MAX_SIDE.get(var)? as u32,
                max_bytes: rows::IMAGES_MAX_BYTES.get(var)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> Result<DataSettings, ConfigError> {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        DataSettings::from_lookup(
            &|k| map.get(k).map(|v| v.to_string()),
            &HostRules::default(),
        )
    }

    #[test]
    fn defaults_are_safe() {
        let d = with(&[]).expect("defaults");
        assert!(d.mounts.is_empty());
        assert_eq!(d.max_server_message, 64 << 20);
        assert_eq!(d.outbox.max_file, 25 << 20);
        assert_eq!(d.outbox.max_cell, 100 << 20);
        assert_eq!(d.outbox.max_files, 50);
        assert_eq!(d.outbox.keep, Duration::from_secs(7 * 86_400));
        assert_eq!(d.outbox.max_total, 1 << 30);
        assert!(d.images.enabled);
        assert_eq!(d.images.max_side, 1568);
        assert_eq!(d.images.max_bytes, 1 << 20);
    }

    #[test]
    fn values_are_read() {
        let d = with(&[
            ("MCP_BRIDGE_MAX_SERVER_MESSAGE", "256m"),
            ("MCP_BRIDGE_OUTBOX_MAX_FILE", "1m"),
            ("MCP_BRIDGE_OUTBOX_MAX_FILES", "3"),
            ("MCP_BRIDGE_OUTBOX_KEEP_DAYS", "0"),
            ("MCP_BRIDGE_IMAGES", "0"),
            ("MCP_BRIDGE_IMAGES_MAX_SIDE", "800"),
        ])
        .expect("valid");
        assert_eq!(d.max_server_message, 256 << 20);
        assert_eq!(d.outbox.max_file, 1 << 20);
        assert_eq!(d.outbox.max_files, 3);
        assert_eq!(d.outbox.keep, Duration::ZERO);
        assert!(!d.images.enabled);
        assert_eq!(d.images.max_side, 800);
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (k, v) in [
            ("MCP_BRIDGE_MOUNTS", "/nonexistent-mcp-dir:/data"),
            ("MCP_BRIDGE_MOUNTS", "/tmp"),
            ("MCP_BRIDGE_MAX_SERVER_MESSAGE", "huge"),
            ("MCP_BRIDGE_MAX_SERVER_MESSAGE", "1k"),
            ("MCP_BRIDGE_MAX_SERVER_MESSAGE", "5g"),
            ("MCP_BRIDGE_OUTBOX_MAX_FILE", "0"),
            ("MCP_BRIDGE_OUTBOX_MAX_CELL", "lots"),
            ("MCP_BRIDGE_OUTBOX_MAX_FILES", "0"),
            ("MCP_BRIDGE_OUTBOX_MAX_FILES", "100000"),
            ("MCP_BRIDGE_OUTBOX_KEEP_DAYS", "-1"),
            ("MCP_BRIDGE_OUTBOX_KEEP_DAYS", "week"),
            ("MCP_BRIDGE_OUTBOX_MAX_TOTAL", "10k"),
            ("MCP_BRIDGE_IMAGES", "sometimes"),
            ("MCP_BRIDGE_IMAGES_MAX_SIDE", "10"),
            ("MCP_BRIDGE_IMAGES_MAX_BYTES", "1g"),
        ] {
            let err = with(&[(k, v)]).expect_err(k).to_string();
            assert!(err.contains(k), "{err}");
        }
        let err = with(&[("MCP_BRIDGE_MAX_SERVER_MESSAGE", "5g")])
            .expect_err("range")
            .to_string();
        assert!(err.contains("from 1m to 4g"), "{err}");
    }
}
