//! The legacy SSE transport's sign-in: rmcp's authorizing client as the [`Authorizer`] of its
//! requests' headers.
//!
//! [`Authorizer`]: crate::upstream::remote_headers::Authorizer

use rmcp::transport::auth::{AuthClient, AuthError};

/// The legacy SSE transport's `Authorization`, from the same authorizing client streamable
/// HTTP uses (refreshed ahead of expiry). Its errors say what failed, never a token.
#[async_trait::async_trait]
impl crate::upstream::remote_headers::Authorizer for AuthClient<reqwest::Client> {
    async fn authorization(
        &self,
    ) -> Result<Option<http::HeaderValue>, crate::upstream::remote_headers::AuthorizeError> {
        use crate::upstream::remote_headers::AuthorizeError;
        let token = self.get_access_token().await.map_err(|e| {
            AuthorizeError(match e {
                AuthError::AuthorizationRequired => "the server needs sign-in".into(),
                _ => "the stored sign-in could not be used or refreshed".into(),
            })
        })?;
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| AuthorizeError("the access token is no valid header value".into()))?;
        value.set_sensitive(true);
        Ok(Some(value))
    }
}
