//! Requests from sandbox code to the host: the single place every `call` frame passes.
//!
//! [`Dispatcher::handle`] is the policy hook: it sees the exec's loaded servers, the method and
//! its parameters before anything is routed, and is where allowlists, argument validation and
//! audit belong. Built-in methods are answered here; the rest go to a [`HostCalls`] backend.

use std::sync::Arc;

use serde_json::Value;

/// What the host knows about the exec a request came from.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The exec id.
    pub exec_id: u64,
    /// Servers the run loaded (`servers` argument of `run_python`).
    pub servers: Arc<[String]>,
}

/// A backend answering host methods (MCP servers, discovery helpers).
#[async_trait::async_trait]
pub trait HostCalls: Send + Sync + 'static {
    /// Answers `method` with `params`, or returns a message raised in the sandbox.
    async fn call(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Value, String>;
}

/// A backend with no methods beyond the built-ins.
pub struct NoHostCalls;

#[async_trait::async_trait]
impl HostCalls for NoHostCalls {
    async fn call(
        &self,
        _ctx: &CallContext,
        method: &str,
        _params: Value,
    ) -> Result<Value, String> {
        Err(format!("unknown host method '{method}'"))
    }
}

/// Routes sandbox requests; cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    backend: Arc<dyn HostCalls>,
}

impl Dispatcher {
    /// A dispatcher sending non-built-in methods to `backend`.
    pub fn new(backend: Arc<dyn HostCalls>) -> Self {
        Dispatcher { backend }
    }

    /// Handles one request from sandbox code.
    ///
    /// # Errors
    /// A message for the sandbox, raised there as an exception.
    pub async fn handle(
        &self,
        ctx: &CallContext,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        match method {
            "ping" => Ok(params),
            _ => self.backend.call(ctx, method, params).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn builtins_and_unknown_methods() {
        let d = Dispatcher::new(Arc::new(NoHostCalls));
        let ctx = CallContext {
            exec_id: 1,
            servers: Arc::from(Vec::new()),
        };
        assert_eq!(
            d.handle(&ctx, "ping", serde_json::json!({"x": 1})).await,
            Ok(serde_json::json!({"x": 1}))
        );
        let err = d
            .handle(&ctx, "rm_rf", Value::Null)
            .await
            .expect_err("unknown");
        assert!(err.contains("rm_rf"));
    }
}
