//! The sandbox's way out (`MCP_BRIDGE_NETWORK_ALLOW`): a small HTTP/1.1 forward proxy the
//! bridge runs for each sandbox. The container keeps no network interface; the entrypoint's
//! relay (`entrypoint/egress.py`) carries each TCP connection made to its loopback port over
//! one unix connection to the bridge, multiplexed (`mux.rs`), and every connection is served by
//! [`proxy::serve`]: the destination checked against the list (`decide.rs`, `address.rs`),
//! resolved here (`resolve.rs`), bounded per run (`budget.rs`) and audited.
//!
//! Entry points: [`EgressPolicy::new`] at startup, [`EgressListener::bind`] per sandbox,
//! [`mux::run`] once the relay connected.

pub mod address;
pub mod budget;
pub mod decide;
pub mod head;
pub mod listener;
pub mod mux;
pub mod proxy;
pub mod resolve;

#[cfg(test)]
mod tests;

pub use budget::RunBudget;
pub use listener::EgressListener;

use crate::audit::AuditLog;
use crate::config::{AllowEntry, NetSettings};

/// What every sandbox's proxy applies: the list, the resolver, the audit log and the bounds.
pub struct EgressPolicy {
    /// `MCP_BRIDGE_NETWORK_ALLOW`.
    pub allow: Vec<AllowEntry>,
    /// Where names are resolved.
    pub resolver: resolve::Resolver,
    /// Where each connection's line goes.
    pub audit: Option<AuditLog>,
    /// `MCP_BRIDGE_NETWORK_MAX_CONNECTIONS`.
    pub max_connections: u64,
    /// `MCP_BRIDGE_NETWORK_MAX_BYTES`.
    pub max_bytes: u64,
}

impl EgressPolicy {
    /// The policy of `settings`, or `None` when the list is empty (no network).
    pub fn new(settings: &NetSettings, audit: Option<AuditLog>) -> Option<EgressPolicy> {
        settings.enabled().then(|| EgressPolicy {
            allow: settings.allow.clone(),
            resolver: resolve::Resolver::new(settings.hosts_file.as_deref()),
            audit,
            max_connections: settings.max_connections,
            max_bytes: settings.max_bytes,
        })
    }

    /// A fresh budget for one sandbox.
    pub fn budget(&self) -> RunBudget {
        RunBudget::new(self.max_connections, self.max_bytes)
    }
}
