//! OAuth 2.1 to remote servers, built on rmcp's `auth` feature (discovery, the issuer check,
//! client registration in the spec's order, PKCE S256 with `resource`, refresh): the bridge's
//! own token store (`store.rs`, the operator's records and each `serve` caller's), the loopback
//! callback (`callback.rs`) and the gateway's public one (`public.rs`), opening the link
//! (`browser.rs`), signing in and out (`login.rs`), forgetting departed callers (`departed.rs`). [`authorized`] is what a connection start
//! uses: rmcp's `AuthClient` over the server's stored credentials, or nothing when there are
//! none (the server's 401 then says the server needs sign-in: [`needs_sign_in`]).
//!
//! Secrets (tokens, codes, client secrets) never reach a message of this module: rmcp's
//! errors are cut and shown without them, and its `auth` module logs at `info` at most
//! (`main.rs` holds its debug lines, which carry the code, off).

mod authorizer;
pub mod browser;
pub mod callback;
mod challenge;
pub mod departed;
pub mod login;
pub mod logout;
pub mod public;
pub mod server_tokens;
pub mod store;

use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationMetadata, OAuthClientConfig,
};

use crate::config::ServerSpec;
pub use challenge::{needs_sign_in, sign_in_challenge};
use server_tokens::ServerTokens;
use store::{canonical_resource, StoreError, TokenFile};

/// How long one OAuth HTTP exchange of the bridge's own (the probe, metadata named by the
/// entry, revocation) may take.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest body the bridge reads from an OAuth endpoint itself.
pub const MAX_BODY: usize = 256 * 1024;
/// The longest text of an authorization server's kept in an error.
const MAX_SHOWN: usize = 300;

/// Why signing in, out or connecting with OAuth failed. Holds no secret.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The entry is not a remote server.
    #[error("MCP server '{0}' is not a remote (http) server; only remote servers sign in")]
    NotRemote(String),
    /// The entry's URL does not parse.
    #[error("the server's URL is not valid: {0}")]
    Url(#[from] url::ParseError),
    /// The server could not be reached.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why (no secret: a connection error).
        reason: String,
    },
    /// The server does not ask for sign-in.
    #[error("MCP server '{0}' does not ask for sign-in (it answered without a 401 and publishes no OAuth metadata)")]
    NoAuth(String),
    /// rmcp's OAuth client failed (discovery, registration, the token exchange, a refresh).
    #[error("{0}")]
    Auth(String),
    /// The entry's `authServerMetadataUrl` is unusable.
    #[error("oauth.authServerMetadataUrl: {0}")]
    Metadata(String),
    /// The callback did not bring a code.
    #[error(transparent)]
    Callback(#[from] callback::CallbackError),
    /// The token store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The entry's `headersHelper` gave no headers (the text names no value and no output).
    #[error("{0}")]
    HeadersHelper(String),
}

impl From<AuthError> for OAuthError {
    fn from(e: AuthError) -> Self {
        OAuthError::Auth(shown_auth_error(&e))
    }
}

/// rmcp's auth error as the user sees it: its words, cut, on one line.
fn shown_auth_error(e: &AuthError) -> String {
    let text = e.to_string();
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_SHOWN)
        .collect();
    if text.chars().count() > MAX_SHOWN {
        out.push_str(" [...]");
    }
    out
}

/// The remote URL of `spec`.
///
/// # Errors
/// [`OAuthError::NotRemote`] for a stdio server.
pub fn remote_url(spec: &ServerSpec) -> Result<&str, OAuthError> {
    match &spec.transport {
        crate::config::Transport::Http { url, .. } | crate::config::Transport::Sse { url, .. } => {
            Ok(url)
        }
        crate::config::Transport::Stdio { .. } => Err(OAuthError::NotRemote(spec.name.clone())),
    }
}

/// A fresh rmcp manager for `url` with `spec`'s metadata: the entry's
/// `authServerMetadataUrl` when it names one, else rmcp's discovery (protected resource
/// metadata from the challenge `www_authenticate` or the well-known paths, then RFC 8414 and
/// OpenID discovery, the issuer checked).
pub(crate) async fn manager(
    spec: &ServerSpec,
    url: &str,
    www_authenticate: Option<&str>,
) -> Result<(AuthorizationManager, bool, AuthorizationMetadata), OAuthError> {
    let mut m = AuthorizationManager::new(url).await?;
    let named = spec
        .oauth
        .as_ref()
        .and_then(|o| o.auth_server_metadata_url.clone());
    let (meta, discovered) = match named {
        Some(u) => (named_metadata(&u).await?, true),
        None => {
            let r = m.resolve_metadata_from_challenge(www_authenticate).await?;
            let discovered = r.source.is_discovered();
            (r.metadata, discovered)
        }
    };
    check_endpoints(&meta)?;
    m.set_metadata(meta.clone());
    Ok((m, discovered, meta))
}

/// The authorization server metadata at `url` (an entry's `authServerMetadataUrl`): bounded,
/// its `issuer` present and of the same origin, its endpoints https (or http on loopback).
async fn named_metadata(url: &str) -> Result<AuthorizationMetadata, OAuthError> {
    let parsed = url::Url::parse(url).map_err(|e| OAuthError::Metadata(e.to_string()))?;
    let body = get_bounded(url).await.map_err(OAuthError::Metadata)?;
    let meta: AuthorizationMetadata = serde_json::from_slice(&body).map_err(|e| {
        OAuthError::Metadata(format!(
            "not authorization server metadata (line {} column {})",
            e.line(),
            e.column()
        ))
    })?;
    let issuer = meta
        .issuer
        .as_deref()
        .ok_or_else(|| OAuthError::Metadata("the metadata names no issuer".into()))?;
    let same_origin = url::Url::parse(issuer).is_ok_and(|i| i.origin() == parsed.origin());
    if !same_origin {
        return Err(OAuthError::Metadata(format!(
            "the metadata's issuer {:?} is not of {}'s origin",
            crate::shown::Shown(issuer).to_string(),
            parsed.origin().ascii_serialization()
        )));
    }
    Ok(meta)
}

/// The endpoints a sign-in sends the person or a secret to must be https (or http on
/// loopback): a code, a PKCE verifier or a client secret never travels in the clear, and the
/// browser is never handed another scheme.
fn check_endpoints(meta: &AuthorizationMetadata) -> Result<(), OAuthError> {
    let named = [
        Some(&meta.authorization_endpoint),
        Some(&meta.token_endpoint),
        meta.registration_endpoint.as_ref(),
    ];
    for endpoint in named.into_iter().flatten() {
        if !vouched(endpoint) {
            return Err(OAuthError::Auth(format!(
                "the authorization server's metadata names the endpoint {:?}, neither https nor loopback http; nothing was sent to it",
                crate::shown::Shown(&endpoint.chars().take(200).collect::<String>()).to_string()
            )));
        }
    }
    Ok(())
}

/// An endpoint the bridge sends a secret to: https, or plain http on a loopback address.
pub(crate) fn vouched(endpoint: &str) -> bool {
    let Ok(u) = url::Url::parse(endpoint) else {
        return false;
    };
    match u.scheme() {
        "https" => true,
        "http" => match u.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// GET `url`, at most [`MAX_BODY`] bytes within [`HTTP_TIMEOUT`], no redirects.
pub(crate) async fn get_bounded(url: &str) -> Result<Vec<u8>, String> {
    let client = http_client()?;
    let mut resp = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("cannot fetch it: {}", plain(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("it answered HTTP {}", resp.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| plain(&e))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY {
            return Err(format!("its answer is larger than {MAX_BODY} bytes"));
        }
    }
    Ok(body)
}

/// The bridge's own HTTP client for OAuth exchanges: a timeout, no redirects.
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| plain(&e))
}

/// A reqwest error without its URL (which may carry a query the bridge did not write).
pub(crate) fn plain(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "the answer could not be read"
    } else {
        "request failed"
    };
    kind.to_string()
}

/// rmcp's authorizing HTTP client for `spec`'s connection, when the store holds credentials
/// for its URL; `None` otherwise (the connection goes without, and a 401 means sign-in).
///
/// # Errors
/// The store cannot be read, or the authorization server cannot be discovered.
pub(crate) async fn authorized(
    spec: &ServerSpec,
    url: &str,
    tokens: &TokenFile,
) -> Result<Option<AuthClient<reqwest::Client>>, OAuthError> {
    let resource = canonical_resource(url)?;
    let file = tokens.clone();
    let (name, res) = (spec.name.clone(), resource.clone());
    let record = tokio::task::spawn_blocking(move || file.get(&name, &res))
        .await
        .map_err(|e| OAuthError::Auth(e.to_string()))??;
    let Some(record) = record.filter(|r| r.credentials.is_some()) else {
        return Ok(None);
    };
    let (mut m, _, _) = manager(spec, url, None).await?;
    let credentials = record.credentials.clone();
    m.set_credential_store(ServerTokens::new(
        tokens.clone(),
        &spec.name,
        &resource,
        credentials,
    ));
    if !m.initialize_from_store().await? {
        return Ok(None);
    }
    // Refresh needs the client's secret and redirect URI: the entry's pre-registered client,
    // else what registration gave.
    let client_id = record
        .credentials
        .as_ref()
        .map(|c| c.client_id.clone())
        .unwrap_or_default();
    let pre = spec
        .oauth
        .as_ref()
        .filter(|o| o.client_id.as_deref() == Some(&client_id));
    let secret = pre
        .and_then(|o| o.client_secret.clone())
        .or(record.client_secret.clone());
    let redirect = record
        .redirect_uri
        .clone()
        .unwrap_or_else(|| "http://127.0.0.1/callback".into());
    let mut config = OAuthClientConfig::new(client_id, redirect);
    if let Some(s) = secret {
        config = config.with_client_secret(s);
    }
    m.configure_client(config)?;
    Ok(Some(AuthClient::new(transport_client(), m)))
}

/// The HTTP client under rmcp's `AuthClient`, made as rmcp makes its own transport's: no idle
/// connections kept (a reused one stalls ~40 ms on delayed ACKs: measured, 48 ms a call
/// instead of 3), and redirects followed only within the origin, at most 5.
pub(crate) fn transport_client() -> reqwest::Client {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(|u| u.origin());
        if attempt.previous().len() > 5 || first != Some(attempt.url().origin()) {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(policy)
        .build()
        .unwrap_or_default()
}

/// Notes in the store that `spec`'s server asked for sign-in: tokens it refused are dropped,
/// and `servers` says which command signs in. Best effort (a store that cannot be written only
/// loses the note).
pub(crate) async fn mark_needs_sign_in(
    spec: &ServerSpec,
    url: &str,
    tokens: &TokenFile,
    step_up: Option<String>,
) {
    mark(spec, url, tokens, step_up, false).await;
}

/// Notes in the store the scope a live connection's call was refused for (403
/// `insufficient_scope`): the next sign-in asks for it with those granted. The tokens are kept:
/// they still serve the calls that need no more (the MCP spec's step-up keeps them until the
/// new grant replaces them). Best effort, as [`mark_needs_sign_in`].
pub(crate) async fn note_step_up(spec: &ServerSpec, url: &str, tokens: &TokenFile, scope: String) {
    mark(spec, url, tokens, Some(scope), true).await;
}

async fn mark(
    spec: &ServerSpec,
    url: &str,
    tokens: &TokenFile,
    step_up: Option<String>,
    keep_tokens: bool,
) {
    let Ok(resource) = canonical_resource(url) else {
        return;
    };
    let (file, name) = (tokens.clone(), spec.name.clone());
    let marked = tokio::task::spawn_blocking(move || {
        file.update(&name, &resource.clone(), |old| {
            let mut r = old.unwrap_or(store::Record {
                resource,
                credentials: None,
                client_secret: None,
                redirect_uri: None,
                step_up: None,
            });
            // The scopes granted so far stay wanted: a step-up asks for them and the new ones.
            if let Some(scope) = step_up {
                let granted = r
                    .credentials
                    .as_ref()
                    .map(|c| c.granted_scopes.join(" "))
                    .unwrap_or_default();
                r.step_up = Some(format!("{granted} {scope}").trim().to_string());
            }
            if !keep_tokens {
                r.credentials = None;
            }
            Some(r)
        })
    })
    .await;
    if let Ok(Err(e)) = marked {
        tracing::warn!(error = %e, "could not note in the token store that the server needs sign-in");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_up_keeps_the_tokens_and_a_refusal_drops_them() {
        let state = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::new(state.path());
        let url = "https://a.example/mcp";
        let http = crate::config::Transport::Http {
            url: url.into(),
            headers: Default::default(),
        };
        let spec = ServerSpec::new("s", http, std::path::Path::new("/x.json"));
        let mut granted = store::test_credentials("tok");
        granted.granted_scopes = vec!["mcp:read".into()];
        file.update("s", url, |_| {
            Some(store::Record {
                resource: url.into(),
                credentials: Some(granted),
                client_secret: None,
                redirect_uri: None,
                step_up: None,
            })
        })
        .expect("written");
        note_step_up(&spec, url, &file, "mcp:write".into()).await;
        let r = file.get("s", url).expect("read").expect("kept");
        assert!(r.credentials.is_some(), "a step-up keeps the tokens");
        assert_eq!(r.step_up.as_deref(), Some("mcp:read mcp:write"));
        mark_needs_sign_in(&spec, url, &file, None).await;
        let r = file.get("s", url).expect("read").expect("kept");
        assert!(r.credentials.is_none(), "a refused token is dropped");
        assert_eq!(r.step_up.as_deref(), Some("mcp:read mcp:write"));
    }

    #[test]
    fn secrets_go_only_to_https_or_loopback_endpoints() {
        for good in [
            "https://as.example/token",
            "http://127.0.0.1:8080/token",
            "http://localhost/t",
            "http://[::1]/t",
        ] {
            assert!(vouched(good), "{good}");
        }
        for bad in [
            "http://as.example/token",
            "ftp://x/t",
            "javascript:alert(1)",
            "nonsense",
        ] {
            assert!(!vouched(bad), "{bad}");
        }
    }

    #[test]
    fn an_auth_error_is_shown_on_one_line_and_cut() {
        let long = AuthError::TokenExchangeFailed(format!("a\nb{}", "x".repeat(1000)));
        let shown = shown_auth_error(&long);
        assert!(!shown.contains('\n'));
        assert!(
            shown.ends_with(" [...]") && shown.len() < MAX_SHOWN + 20,
            "{shown}"
        );
    }
}
