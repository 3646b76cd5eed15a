//! Our MCP face: serves [`BridgeServer`] over any byte stream (stdio in production, duplex
//! pipes in tests).

mod approve;
mod files;
mod handler;
mod progress;
mod resources;
mod router;
mod skills;
mod tool;

pub use handler::{BridgeServer, SANDBOX_META};
pub use resources::{CAPABILITIES, CAPABILITIES_URI};
pub use router::{Authenticated, Routed, SandboxRouter, Who};
pub use tool::{definition as tool_definition, definition_for_many, DESCRIPTION, TOOL_NAME};

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

/// Why serving MCP on a stream stopped before a session began.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The client's `initialize` exchange failed (it went away, or sent something else).
    #[error("MCP handshake failed")]
    Handshake(#[source] rmcp::service::ServerInitializeError),
}

/// Serves MCP on `read`/`write` until the client disconnects or `ct` is cancelled. When the
/// client's input ends, `ct` is cancelled at once: calls still running are stopped (their
/// client is gone) instead of keeping the bridge alive until they finish.
///
/// # Errors
/// Only a failed MCP handshake; everything after it is reported to the client.
pub async fn serve_stream<R, W>(
    server: BridgeServer,
    read: R,
    write: W,
    ct: CancellationToken,
) -> Result<(), HandshakeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let transport = EofCancels {
        inner: AsyncRwTransport::new(read, write),
        on_eof: ct.clone(),
    };
    let running = server
        .serve_with_ct(transport, ct.child_token())
        .await
        .map_err(HandshakeError::Handshake)?;
    let reason = running.waiting().await;
    tracing::info!(?reason, "MCP session ended");
    Ok(())
}

/// A transport that cancels a token when the peer's input ends.
struct EofCancels<R: tokio::io::AsyncRead, W: tokio::io::AsyncWrite> {
    inner: AsyncRwTransport<RoleServer, R, W>,
    on_eof: CancellationToken,
}

impl<R, W> Transport<RoleServer> for EofCancels<R, W>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let msg = self.inner.receive().await;
        if msg.is_none() {
            tracing::info!("the MCP client closed its side; stopping");
            self.on_eof.cancel();
        }
        msg
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleServer;
