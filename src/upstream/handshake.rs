//! The bridge's side of every server's `initialize`: [`client_info`] and the [`Service`] the
//! handshake yields, shared by the starter and the remote connectors.

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};

/// rmcp's client service for one server connection, announcing the bridge ([`client_info`]).
pub(super) type Service = RunningService<RoleClient, ClientConfig>;

/// What the bridge says of itself in every server's `initialize`: its own name and version
/// (rmcp's default would name rmcp), with no client capabilities.
pub(super) fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")),
    )
}
