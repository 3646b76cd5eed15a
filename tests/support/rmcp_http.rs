//! rmcp's own streamable HTTP server in this process, on a loopback port: the remote server of
//! the HTTP tests (`tests/upstream_http.rs`) and of the remote-call bench (`benches/bridge`,
//! which includes this file by path).

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// Serves a fresh `handler()` per session on `127.0.0.1`, sessions kept by `sessions`; each
/// connection with `TCP_NODELAY` (as a direct client's would be). Returns the endpoint's URL.
pub async fn serve_rmcp<S>(
    handler: impl Fn() -> S + Send + Sync + 'static,
    sessions: Arc<LocalSessionManager>,
) -> String
where
    S: rmcp::ServerHandler + Send + 'static,
{
    let mcp = Arc::new(StreamableHttpService::new(
        move || Ok(handler()),
        sessions,
        StreamableHttpServerConfig::default(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let mcp = mcp.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let mcp = mcp.clone();
                    async move { Ok::<_, std::convert::Infallible>(mcp.handle(req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://127.0.0.1:{port}/mcp")
}
