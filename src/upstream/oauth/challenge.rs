//! What a connection's error says of sign-in: a 401, a 403 `insufficient_scope` (a step-up,
//! with the scope it asks for), or credentials that can no longer be refreshed, found however
//! deep rmcp's layers wrap them.

use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// Longest step-up scope text kept from a 403 challenge.
const MAX_STEP_UP: usize = 1024;

/// What a connection's error says of sign-in: `None` when it is not about sign-in; else
/// `Some(scope)`, with the scope a 403 `insufficient_scope` challenge asked for (a step-up).
pub fn sign_in_challenge(err: &(dyn std::error::Error + 'static)) -> Option<Option<String>> {
    type Http = StreamableHttpError<reqwest::Error>;
    type Quit = rmcp::transport::worker::WorkerQuitReason<Http>;
    let asks = |h: &Http| match h {
        StreamableHttpError::AuthRequired(_)
        | StreamableHttpError::Auth(AuthError::AuthorizationRequired) => Some(None),
        StreamableHttpError::InsufficientScope(e) => {
            let base = url::Url::parse("http://localhost/").expect("a URL");
            let params = rmcp::transport::auth::WWWAuthenticateParams::parse(
                &e.www_authenticate_header,
                &base,
            );
            Some(
                params
                    .scope
                    .filter(|s| s.len() <= MAX_STEP_UP && !s.chars().any(char::is_control)),
            )
        }
        _ => None,
    };
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    for _ in 0..16 {
        let e = cur?;
        if let Some(h) = e.downcast_ref::<Http>() {
            return asks(h);
        }
        if let Some(q) = e.downcast_ref::<Quit>() {
            return match q {
                rmcp::transport::worker::WorkerQuitReason::Fatal { error, .. } => asks(error),
                _ => None,
            };
        }
        // Fields rmcp does not mark as sources.
        if let Some(rmcp::service::ClientInitializeError::TransportError { error, .. }) =
            e.downcast_ref::<rmcp::service::ClientInitializeError>()
        {
            cur = Some(error.error.as_ref());
            continue;
        }
        if let Some(rmcp::ServiceError::TransportSend(t)) = e.downcast_ref::<rmcp::ServiceError>() {
            cur = Some(t.error.as_ref());
            continue;
        }
        if let Some(t) = e.downcast_ref::<rmcp::transport::DynamicTransportError>() {
            cur = Some(t.error.as_ref());
            continue;
        }
        cur = e.source();
    }
    None
}

/// Whether a connection's error is the server asking for sign-in (401, 403
/// `insufficient_scope`, or credentials that can no longer be refreshed).
pub fn needs_sign_in(err: &(dyn std::error::Error + 'static)) -> bool {
    sign_in_challenge(err).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};

    type Http = StreamableHttpError<reqwest::Error>;

    /// As a call's error arrives: rmcp's service error around the transport's.
    fn as_call_error(h: Http) -> rmcp::ServiceError {
        rmcp::ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
            "test",
            std::any::TypeId::of::<()>(),
            Box::new(h),
        ))
    }

    #[test]
    fn a_401_or_a_403_insufficient_scope_asks_for_sign_in_and_nothing_else_does() {
        let unauthorized = as_call_error(Http::AuthRequired(AuthRequiredError::new(
            "Bearer resource_metadata=\"https://a/.well-known/oauth-protected-resource\"".into(),
        )));
        assert_eq!(sign_in_challenge(&unauthorized), Some(None));
        let step_up = as_call_error(Http::InsufficientScope(InsufficientScopeError::new(
            "Bearer error=\"insufficient_scope\", scope=\"mcp:basic mcp:write\"".into(),
            None,
        )));
        assert_eq!(
            sign_in_challenge(&step_up),
            Some(Some("mcp:basic mcp:write".into()))
        );
        let huge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\"",
            "s ".repeat(2000)
        );
        let huge = as_call_error(Http::InsufficientScope(InsufficientScopeError::new(
            huge, None,
        )));
        assert_eq!(
            sign_in_challenge(&huge),
            Some(None),
            "an endless scope is not kept"
        );
        assert_eq!(
            sign_in_challenge(&as_call_error(Http::SessionExpired)),
            None
        );
        assert!(!needs_sign_in(&rmcp::ServiceError::TransportClosed));
    }
}
