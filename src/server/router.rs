//! [`SandboxRouter`]: how the MCP face finds the sandbox a request runs in when the bridge
//! serves many clients (`serve --http`). The face knows who asked ([`Who`]: the token the HTTP
//! front admitted, and the MCP session when the client has one); the router (the hub in
//! `crate::http`) owns the sandboxes. Under stdio `run` there is no router: one sandbox.

use std::sync::{Arc, Mutex};

use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::calls::Caller;
use crate::outbox::Outbox;
use crate::sandbox::Sandbox;

/// What the HTTP front puts in a request's extensions once its bearer token checked out.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The token's name.
    pub token: Arc<str>,
    /// The token's upstream identity key; `None` for the loopback `local` caller (no tokens
    /// file), who is the operator.
    pub identity: Option<Arc<str>>,
}

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    /// The token's name.
    pub token: Arc<str>,
    /// The token's upstream identity key (`None`: the operator, on loopback).
    pub identity: Option<Arc<str>>,
    /// The MCP session (2025-11-25 clients); `None` for stateless (2026-07-28) requests.
    pub session: Option<String>,
}

/// The header carrying a 2025-11-25 client's session id.
const SESSION_HEADER: &str = "mcp-session-id";

impl Who {
    /// Who sent the request of `context`: `None` when it did not come through the HTTP front.
    pub fn of(context: &RequestContext<RoleServer>) -> Option<Who> {
        let parts = context.extensions.get::<http::request::Parts>()?;
        let auth = parts.extensions.get::<Authenticated>()?;
        let session = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Some(Who {
            token: auth.token.clone(),
            identity: auth.identity.clone(),
            session,
        })
    }

    /// What a 2026-07-28 approval round is bound to: the token's name and the session (a
    /// stateless client's sandbox handle is among the call's arguments, bound apart). Names
    /// hold no NUL, so the parts cannot run into each other.
    pub fn binding(&self) -> String {
        format!(
            "{}\0{}",
            self.token,
            self.session.as_deref().unwrap_or_default()
        )
    }
}

/// The sandbox a run goes to.
pub struct Routed {
    /// The sandbox.
    pub sandbox: Sandbox,
    /// Where its files are.
    pub outbox: Arc<Outbox>,
    /// Who the run is for (rate limits, audit, per-client servers).
    pub caller: Arc<Caller>,
    /// A handle minted by this call (a stateless client's first call): the result carries it.
    pub minted: Option<String>,
    /// Held while the run goes on (the router counts runs in flight; drain waits for them).
    pub lease: Box<dyn Send + Sync>,
}

/// Finds (or makes) the sandbox of a client.
#[async_trait::async_trait]
pub trait SandboxRouter: Send + Sync {
    /// The sandbox for a run from `who`, reached through `handle` (the `sandbox` argument of a
    /// stateless client) or `who`'s session.
    ///
    /// # Errors
    /// A JSON-RPC error the client sees: an unknown, foreign or forged handle, a limit reached,
    /// the bridge draining.
    async fn route(&self, who: &Who, handle: Option<&str>) -> Result<Routed, ErrorData>;

    /// The outboxes of `who`'s sandboxes (its session's, or every one its token holds), for
    /// `resources/list` and `resources/read`.
    fn outboxes(&self, who: &Who) -> Vec<Arc<Outbox>>;

    /// The MCP session `session` of `token` ended: its sandbox goes.
    fn session_ended(&self, token: &str, session: &str);

    /// The client `who` releases its sandbox (`handle`, or its session's): it goes now
    /// (container and snapshot removed; runs in it stopped; the handle no longer works).
    ///
    /// # Errors
    /// The same error as [`SandboxRouter::route`] gives an unknown handle, for one that is
    /// not `who`'s.
    fn release(&self, who: &Who, handle: Option<&str>) -> Result<(), ErrorData>;
}

/// Ties a 2025-11-25 session's handler to its sandbox: when rmcp drops the session's handler
/// (the client deleted the session, or it expired), the router is told.
pub struct SessionTie {
    router: Arc<dyn SandboxRouter>,
    seen: Mutex<Option<(Arc<str>, String)>>,
}

impl SessionTie {
    /// A tie for a new handler.
    pub fn new(router: Arc<dyn SandboxRouter>) -> Arc<Self> {
        Arc::new(SessionTie {
            router,
            seen: Mutex::new(None),
        })
    }

    /// The router.
    pub fn router(&self) -> &Arc<dyn SandboxRouter> {
        &self.router
    }

    /// Notes the session a request came from (the first one wins: rmcp gives a handler one
    /// session).
    pub fn note(&self, who: &Who) {
        if let Some(session) = &who.session {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.is_none() {
                *seen = Some((who.token.clone(), session.clone()));
            }
        }
    }
}

impl Drop for SessionTie {
    fn drop(&mut self) {
        let seen = self
            .seen
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((token, session)) = seen {
            self.router.session_ended(&token, &session);
        }
    }
}
