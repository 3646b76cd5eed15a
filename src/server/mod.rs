//! Our MCP face: serves [`BridgeServer`] over any byte stream (stdio in production, duplex
//! pipes in tests).

mod handler;
mod resources;
mod tool;

pub use handler::BridgeServer;
pub use resources::{CAPABILITIES, CAPABILITIES_URI};
pub use tool::{definition as tool_definition, DESCRIPTION, TOOL_NAME};

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

/// Serves MCP on `transport` until the client disconnects or `ct` is cancelled.
///
/// # Errors
/// Only a failed MCP handshake; everything after it is reported to the client.
pub async fn serve<T, E, A>(
    server: BridgeServer,
    transport: T,
    ct: CancellationToken,
) -> Result<(), String>
where
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = server
        .serve_with_ct(transport, ct.child_token())
        .await
        .map_err(|e| format!("MCP handshake failed: {e}"))?;
    let reason = running.waiting().await;
    tracing::info!(?reason, "MCP session ended");
    Ok(())
}

use rmcp::RoleServer;
