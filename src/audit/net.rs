//! [`NetRecord`]: one line per connection the sandbox made through the egress proxy
//! (`MCP_BRIDGE_NETWORK_ALLOW`): where it went, the bytes each way and how it ended.

use serde::{Deserialize, Serialize};

/// One connection through the egress proxy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetRecord {
    /// When the connection ended (RFC 3339, UTC).
    pub time: String,
    /// The run's id (empty before the first run).
    pub run: String,
    /// The host asked for, as the sandbox wrote it (cut to 256 bytes).
    pub host: String,
    /// The port.
    pub port: u16,
    /// `CONNECT`, or the plain HTTP request's method.
    pub method: String,
    /// The address connected to, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// Bytes from the sandbox to the destination.
    pub bytes_up: u64,
    /// Bytes from the destination to the sandbox.
    pub bytes_down: u64,
    /// Milliseconds the connection lasted.
    pub duration_ms: f64,
    /// `ok`, `refused`, `failed` (no connection), `cut` (the run's bytes were used up), `idle`
    /// or `bad_request`.
    pub outcome: String,
    /// Why, when not `ok` (cut to 512 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl NetRecord {
    /// The record with its sandbox-given text cut to size.
    pub fn bounded(mut self) -> NetRecord {
        self.host = self.host.chars().take(256).collect();
        self.method = self.method.chars().take(32).collect();
        self.run = self.run.chars().take(128).collect();
        if let Some(r) = &mut self.reason {
            *r = r.chars().take(512).collect();
        }
        self
    }
}
