//! Signing out of a remote server (`logout`): its tokens forgotten, first revoked (RFC 7009)
//! where the authorization server's metadata names a `revocation_endpoint`.

use oauth2::TokenResponse;
use rmcp::transport::auth::StoredCredentials;

use super::store::{Record, TokenFile};
use super::{http_client, manager, plain, vouched, OAuthError};
use crate::config::ServerSpec;

/// What `logout` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoggedOut {
    /// There were no tokens for the server.
    NotSignedIn,
    /// The tokens were forgotten; `revoked` says what the server was told.
    Forgot {
        /// The revocation's outcome.
        revoked: Revoked,
    },
}

/// Whether the tokens were revoked at the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revoked {
    /// The server's revocation endpoint accepted them.
    Yes,
    /// The server's metadata names no revocation endpoint.
    NotOffered,
    /// Revocation failed (the reason, no secret).
    Failed(String),
}

/// Forgets `spec`'s tokens, first revoking them (RFC 7009) where the authorization server's
/// metadata names a `revocation_endpoint`. The tokens are forgotten whatever the revocation's
/// outcome.
///
/// # Errors
/// The store cannot be read or written.
pub async fn logout(spec: &ServerSpec, tokens: &TokenFile) -> Result<LoggedOut, OAuthError> {
    let file = tokens.clone();
    let all = tokio::task::spawn_blocking(move || file.all())
        .await
        .map_err(|e| OAuthError::Auth(e.to_string()))??;
    let Some(record) = all.get(&spec.name).cloned() else {
        return Ok(LoggedOut::NotSignedIn);
    };
    let revoked = match &record.credentials {
        Some(c) if c.token_response.is_some() => revoke(spec, &record, c).await,
        _ => Revoked::NotOffered,
    };
    let file = tokens.clone();
    let (name, res) = (spec.name.clone(), record.resource.clone());
    tokio::task::spawn_blocking(move || file.update(&name, &res, |_| None))
        .await
        .map_err(|e| OAuthError::Auth(e.to_string()))??;
    Ok(LoggedOut::Forgot { revoked })
}

/// Revokes `record`'s tokens (RFC 7009) where `spec`'s authorization server names a
/// revocation endpoint, as `logout` does.
pub(crate) async fn revoke_record(spec: &ServerSpec, record: &Record) -> Revoked {
    match &record.credentials {
        Some(c) if c.token_response.is_some() => revoke(spec, record, c).await,
        _ => Revoked::NotOffered,
    }
}

async fn revoke(spec: &ServerSpec, record: &Record, creds: &StoredCredentials) -> Revoked {
    let meta = match manager(spec, &record.resource, None).await {
        Ok((_, _, meta)) => meta,
        Err(e) => return Revoked::Failed(e.to_string()),
    };
    let Some(endpoint) = meta
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str())
        .map(str::to_string)
    else {
        return Revoked::NotOffered;
    };
    if !vouched(&endpoint) {
        return Revoked::Failed(
            "the revocation endpoint is neither https nor loopback http".into(),
        );
    }
    let Some(response) = &creds.token_response else {
        return Revoked::NotOffered;
    };
    let client = match http_client() {
        Ok(c) => c,
        Err(e) => return Revoked::Failed(e),
    };
    let secret = spec
        .oauth
        .as_ref()
        .filter(|o| o.client_id.as_deref() == Some(creds.client_id.as_str()))
        .and_then(|o| o.client_secret.clone())
        .or(record.client_secret.clone());
    let mut tokens = Vec::new();
    if let Some(r) = response.refresh_token() {
        tokens.push((r.secret().to_string(), "refresh_token"));
    }
    tokens.push((response.access_token().secret().to_string(), "access_token"));
    // The client authenticates as at the token endpoint: basic unless only post is offered.
    let methods = meta
        .additional_fields
        .get("revocation_endpoint_auth_methods_supported")
        .or(meta
            .additional_fields
            .get("token_endpoint_auth_methods_supported"))
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|m| m.as_str()).collect::<Vec<_>>())
        .unwrap_or_default();
    let post = methods.contains(&"client_secret_post") && !methods.contains(&"client_secret_basic");
    for (token, hint) in tokens {
        // `client_id` always (RFC 7009 2.1 for a public client); an empty `client_secret` is the
        // same as none (RFC 6749 3.1) and is what some servers' form parsers require.
        let mut form = vec![
            ("token", token.as_str()),
            ("token_type_hint", hint),
            ("client_id", creds.client_id.as_str()),
        ];
        let mut req = client.post(&endpoint);
        match &secret {
            Some(s) if post => form.push(("client_secret", s.as_str())),
            Some(s) => req = req.basic_auth(&creds.client_id, Some(s)),
            None => form.push(("client_secret", "")),
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&form)
            .finish();
        let req = req
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        match req.send().await {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => {
                return Revoked::Failed(format!("the server answered HTTP {}", r.status().as_u16()))
            }
            Err(e) => return Revoked::Failed(plain(&e)),
        }
    }
    Revoked::Yes
}
