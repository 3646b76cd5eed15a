//! `mcp-code-bridge run`: the bridge as one client's MCP server over stdio.

use std::process::ExitCode;
use std::sync::Arc;

use crate::app::App;
use crate::audit::AuditLog;
use crate::config::Settings;
use crate::server::{self, HandshakeError};
use crate::shutdown;

/// Serves MCP over stdin/stdout until the client closes stdin or a signal comes, then shuts
/// the bridge down in order.
///
/// # Errors
/// A failed MCP handshake (the client went away or spoke something else).
pub async fn run(
    settings: Arc<Settings>,
    audit: Option<AuditLog>,
) -> Result<ExitCode, HandshakeError> {
    let app = App::with_engine_audited(settings.clone(), audit);
    app.index_in_background();
    if settings.prewarm {
        app.sandbox.prewarm();
    }
    let handler = server::BridgeServer::new(app.sandbox.clone(), settings, app.outbox.clone());
    let (read, write) = rmcp::transport::stdio_pipes();
    let result = tokio::select! {
        r = server::serve_stream(handler, read, write, app.ct.clone()) => r,
        _ = shutdown::signalled() => Ok(()),
    };
    app.shutdown().await;
    result?;
    Ok(ExitCode::SUCCESS)
}
