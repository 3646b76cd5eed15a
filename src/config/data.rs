//! [`DataSettings`]: the settings of data work in the sandbox: host folders shared read-only
//! (`MCP_BRIDGE_MOUNTS`), the cap on one message from an MCP server, files copied out of the
//! sandbox's outbox, and pictures returned as image content. Each is an `MCP_BRIDGE_*`
//! variable with a safe default; a bad value is a startup error naming it.

use std::time::Duration;

use super::error::ConfigError;
use super::mounts::{parse_mounts, HostRules, Mount};
use super::values::{parse_count, parse_size};

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
    /// `MCP_BRIDGE_MAX_SERVER_MESSAGE`: the largest JSON-RPC message accepted from a stdio
    /// MCP server, in bytes.
    pub max_server_message: usize,
    /// The outbox: files copied out of the sandbox.
    pub outbox: OutboxLimits,
    /// Pictures returned as image content.
    pub images: ImageBudget,
}

/// Default `MCP_BRIDGE_MAX_SERVER_MESSAGE`.
pub const DEFAULT_MAX_SERVER_MESSAGE: usize = 64 << 20;

impl DataSettings {
    /// Reads the data settings through `var` (an environment lookup returning non-blank
    /// values); `rules` are what a mounted host folder is checked against.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_lookup(
        var: &dyn Fn(&str) -> Option<String>,
        rules: &HostRules,
    ) -> Result<Self, ConfigError> {
        let parsed =
            |name: &'static str, parse: &dyn Fn(&str) -> Result<u64, String>, default| match var(
                name,
            ) {
                None => Ok(default),
                Some(v) => parse(&v).map_err(|reason| ConfigError::BadEnv {
                    var: name,
                    value: v,
                    reason,
                }),
            };
        let size =
            |name, default, min, max| parsed(name, &|v| in_range(parse_size(v), min, max), default);
        let count = |name, default, min, max| {
            parsed(name, &|v| in_range(parse_count(v), min, max), default)
        };
        let mounts = match var("MCP_BRIDGE_MOUNTS") {
            None => Vec::new(),
            Some(v) => parse_mounts(&v, rules).map_err(|reason| ConfigError::BadEnv {
                var: "MCP_BRIDGE_MOUNTS",
                value: v,
                reason,
            })?,
        };
        let keep_days = parsed(
            "MCP_BRIDGE_OUTBOX_KEEP_DAYS",
            &|v| match v.trim().parse::<u64>() {
                Ok(d) if d <= 3650 => Ok(d),
                _ => Err("expected a whole number of days from 0 to 3650".into()),
            },
            7,
        )?;
        let images = parsed(
            "MCP_BRIDGE_IMAGES",
            &|v| super::values::parse_flag(v).map(u64::from),
            1,
        )? == 1;
        Ok(DataSettings {
            mounts,
            max_server_message: size(
                "MCP_BRIDGE_MAX_SERVER_MESSAGE",
                DEFAULT_MAX_SERVER_MESSAGE as u64,
                1 << 20,
                4 << 30,
            )? as usize,
            outbox: OutboxLimits {
                max_file: size("MCP_BRIDGE_OUTBOX_MAX_FILE", 25 << 20, 1 << 10, 4 << 30)?,
                max_cell: size("MCP_BRIDGE_OUTBOX_MAX_CELL", 100 << 20, 1 << 10, 16 << 30)?,
                max_files: count("MCP_BRIDGE_OUTBOX_MAX_FILES", 50, 1, 10_000)? as usize,
                keep: Duration::from_secs(keep_days * 86_400),
                max_total: size("MCP_BRIDGE_OUTBOX_MAX_TOTAL", 1 << 30, 1 << 20, 1 << 40)?,
            },
            images: ImageBudget {
                enabled: images,
                max_side: count("MCP_BRIDGE_IMAGES_MAX_SIDE", 1568, 64, 8192)? as u32,
                max_bytes: size("MCP_BRIDGE_IMAGES_MAX_BYTES", 1 << 20, 16 << 10, 32 << 20)?,
            },
        })
    }
}

/// `parsed` when it lies in `[min, max]`, else why not (sizes shown as given to `parse_size`).
fn in_range(parsed: Result<u64, String>, min: u64, max: u64) -> Result<u64, String> {
    let n = parsed?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("must be from {} to {}", human(min), human(max)))
    }
}

/// `n` in the units `parse_size` reads (`64k`, `25m`, `4g`) when it is a whole number of
/// them, else plain.
fn human(n: u64) -> String {
    for (unit, shift) in [("t", 40), ("g", 30), ("m", 20), ("k", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
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
