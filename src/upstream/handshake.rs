//! The [`Service`] a server's `initialize` yields: rmcp's client service run by the bridge's
//! own client (`elicit::BridgeClient`: its name and version, questions relayed), shared by the
//! starter, the remote connectors and the owner.

use rmcp::service::{RoleClient, RunningService};

use super::elicit::BridgeClient;

/// rmcp's client service for one server connection.
pub(super) type Service = RunningService<RoleClient, BridgeClient>;
