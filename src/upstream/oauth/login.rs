//! Signing in to a remote server (`login`), and what `servers` shows of it ([`status`]);
//! signing out is `logout.rs`.
//!
//! Sign-in: an unauthenticated `initialize` gets the server's 401 challenge; rmcp discovers the
//! authorization server from it; the client identity is chosen in the spec's order (the
//! entry's pre-registered `oauth.clientId`, else the Client ID Metadata Document URL setting
//! where the server supports it, else Dynamic Client Registration); rmcp builds the
//! authorization URL (PKCE S256, `state`, `resource`, scopes from the challenge, else the
//! resource's `scopes_supported`, else the entry's); the link is opened (`browser.rs`) and the
//! loopback callback (`callback.rs`) awaited until the deadline; rmcp exchanges the code and
//! the tokens land in the store. Nothing is stored unless the exchange succeeded.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse;
use rmcp::transport::auth::{AuthorizationRequest, AuthorizationSession};

use super::browser::{self, Opened};
use super::callback::Listener;
use super::server_tokens::ServerTokens;
use super::store::{canonical_resource, TokenFile};
use super::{http_client, manager, plain, remote_url, OAuthError};
use crate::config::ServerSpec;

/// The client name the bridge registers with.
const CLIENT_NAME: &str = "mcp-code-bridge";
/// The longest `WWW-Authenticate` header looked at.
const MAX_CHALLENGE: usize = 8 * 1024;

/// What signing in needs besides the server.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// How long to wait for the person (`MCP_BRIDGE_LOGIN_TIMEOUT`).
    pub timeout: Duration,
    /// The Client ID Metadata Document URL (`MCP_BRIDGE_OAUTH_CLIENT_METADATA_URL`).
    pub client_metadata_url: Option<String>,
    /// The gateway's public callback (`MCP_BRIDGE_PUBLIC_URL`, a `serve` caller's sign-in):
    /// the redirect comes back there instead of to a loopback listener, unless the entry
    /// fixes a `callbackPort`.
    pub public: Option<super::public::PublicCallback>,
}

impl Default for LoginOptions {
    /// `MCP_BRIDGE_LOGIN_TIMEOUT`'s default, no metadata document.
    fn default() -> Self {
        LoginOptions {
            timeout: Duration::from_secs(300),
            client_metadata_url: None,
            public: None,
        }
    }
}

/// The outcome of a sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// When the access token expires (seconds since the epoch), when the server said.
    pub expires_at: Option<u64>,
    /// Whether a refresh token came with it.
    pub refreshable: bool,
}

/// Signs in to `spec`'s server; `tell` gets the lines meant for the person (the link).
///
/// # Errors
/// [`OAuthError`]: not a remote server, unreachable, no sign-in asked, discovery or
/// registration refused, the callback (timeout, forged state, refusal), the exchange.
pub async fn login(
    spec: &ServerSpec,
    tokens: &TokenFile,
    opts: &LoginOptions,
    tell: &mut (dyn FnMut(&str) + Send),
) -> Result<SignedIn, OAuthError> {
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let pending = begin(spec, tokens, opts).await?;
    let auth_url = pending.url.clone();
    match browser::open(&auth_url) {
        Opened::With(program) => {
            tell(&format!(
                "Opened the sign-in page for '{}' with {program}; if it did not open, visit:",
                spec.name
            ));
        }
        Opened::No(why) => {
            if let Some(why) = why {
                tell(&format!("Could not open a browser ({why})."));
            }
            tell(&format!("Open this link to sign in to '{}':", spec.name));
        }
    }
    tell(&auth_url);
    tell(&format!(
        "Waiting for the sign-in (up to {} s)...",
        opts.timeout.as_secs()
    ));
    pending.finish(deadline, opts.timeout.as_secs()).await
}

/// A sign-in begun: its link, and the loopback listener its callback comes back to.
pub struct Pending {
    /// The authorization URL to open (no secret: the state and the PKCE challenge only).
    pub url: String,
    state: String,
    back: Back,
    session: AuthorizationSession,
    tokens: TokenFile,
    name: String,
    resource: String,
    redirect: String,
    registered_secret: Option<String>,
}

/// Where a sign-in's redirect comes back to.
enum Back {
    /// A loopback listener of the bridge's own.
    Loopback(Listener),
    /// The gateway's public callback, the sign-in registered at it by its state.
    Public(super::public::Awaited),
}

/// Begins signing in to `spec`'s server: discovery, the client identity, the link, the
/// listener. Nothing is stored until [`Pending::finish`]'s exchange succeeds.
///
/// # Errors
/// As [`login`], before the callback.
pub async fn begin(
    spec: &ServerSpec,
    tokens: &TokenFile,
    opts: &LoginOptions,
) -> Result<Pending, OAuthError> {
    let url = remote_url(spec)?;
    let resource = canonical_resource(url)?;
    let challenge = challenge(spec, url).await?;
    let (mut m, discovered, meta) = manager(spec, url, challenge.as_deref()).await?;
    if !discovered && challenge.is_none() {
        return Err(OAuthError::NoAuth(spec.name.clone()));
    }
    // The exchange saves through this store: nothing is written before it succeeded.
    m.set_credential_store(ServerTokens::new(
        tokens.clone(),
        &spec.name,
        &resource,
        None,
    ));
    let oauth = spec.oauth.clone().unwrap_or_default();
    // A step-up a call met (403 `insufficient_scope`) asks for its scopes, with those the
    // entry names.
    let step_up = {
        let (file, name, res) = (tokens.clone(), spec.name.clone(), resource.clone());
        tokio::task::spawn_blocking(move || file.get(&name, &res))
            .await
            .map_err(|e| OAuthError::Auth(e.to_string()))??
            .and_then(|r| r.step_up)
    };
    let mut wanted: Vec<String> = oauth.scopes.clone();
    for s in step_up.iter().flat_map(|s| s.split_whitespace()) {
        if !wanted.iter().any(|w| w == s) {
            wanted.push(s.to_string());
        }
    }
    // A fixed `callbackPort` is a redirect URI registered as such: it stays loopback.
    let route = match opts
        .public
        .clone()
        .filter(|_| oauth.callback_port.is_none())
    {
        Some(public) => Err(public),
        None => Ok(Listener::bind(oauth.callback_port).await?),
    };
    let redirect = match &route {
        Ok(listener) => listener.redirect_uri(),
        Err(public) => public.redirect_uri().to_string(),
    };
    let mut request = AuthorizationRequest::new(redirect.clone()).with_client_name(CLIENT_NAME);
    request = if wanted.is_empty() {
        request.with_initial_scope_selection()
    } else {
        request.with_scopes(wanted.iter().cloned())
    };
    let cimd_supported = meta
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let mut registered_secret = None;
    if let Some(id) = &oauth.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = &oauth.client_secret {
            request = request.with_client_secret(secret.clone());
        }
    } else if let Some(cimd) = opts.client_metadata_url.as_ref().filter(|_| cimd_supported) {
        request = request.with_client_metadata_url(cimd.clone());
    } else if meta.registration_endpoint.is_some() {
        // Dynamic registration through rmcp, here rather than inside the session, so a
        // confidential client's secret is kept for refreshes.
        let scopes = if wanted.is_empty() {
            m.select_initial_scopes(&[]).await
        } else {
            wanted.clone()
        };
        let refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let config = m.register_client(CLIENT_NAME, &redirect, &refs).await?;
        request = request.with_preregistered_client(config.client_id.clone());
        if let Some(secret) = config.client_secret.clone() {
            request = request.with_client_secret(secret.clone());
            registered_secret = Some(secret);
        }
    } else {
        return Err(OAuthError::Auth(format!(
            "the authorization server of '{}' offers no client registration: set \"oauth\": {{\"clientId\": ...}} in its entry",
            spec.name
        )));
    }
    let session = AuthorizationSession::new(m, request)
        .await
        .map_err(|(_, e)| OAuthError::from(e))?;
    let auth_url = session.get_authorization_url().to_string();
    let state = url::Url::parse(&auth_url)?
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| OAuthError::Auth("the authorization URL carries no state".into()))?;
    let back = match route {
        Ok(listener) => Back::Loopback(listener),
        Err(public) => Back::Public(public.expect(&state)?),
    };
    Ok(Pending {
        url: auth_url,
        state,
        back,
        session,
        tokens: tokens.clone(),
        name: spec.name.clone(),
        resource,
        redirect,
        registered_secret,
    })
}

impl Pending {
    /// Waits until `deadline` (`secs` long, for the error's words) for the callback, then
    /// exchanges the code and stores the tokens.
    ///
    /// # Errors
    /// The callback (timeout, forged state, refusal), the exchange, the store.
    pub async fn finish(
        self,
        deadline: tokio::time::Instant,
        secs: u64,
    ) -> Result<SignedIn, OAuthError> {
        let Pending {
            url: _,
            state,
            back,
            session,
            tokens,
            name,
            resource,
            redirect,
            registered_secret,
        } = self;
        let returned = match back {
            Back::Loopback(listener) => listener.wait(&state, deadline, secs).await?,
            Back::Public(mut awaited) => awaited.wait(deadline, secs).await?,
        };
        let response = session
            .handle_callback_with_issuer(
                &returned.code,
                &returned.state,
                returned.issuer.as_deref(),
            )
            .await?;
        let signed = SignedIn {
            expires_at: response
                .expires_in()
                .map(|d| now().saturating_add(d.as_secs())),
            refreshable: response.refresh_token().is_some(),
        };
        let file = tokens;
        let res = resource;
        tokio::task::spawn_blocking(move || {
            file.update(&name, &res.clone(), |old| {
                old.map(|mut r| {
                    r.client_secret = registered_secret;
                    r.redirect_uri = Some(redirect);
                    r.step_up = None;
                    r
                })
            })
        })
        .await
        .map_err(|e| OAuthError::Auth(e.to_string()))??;
        Ok(signed)
    }
}

/// The server's `WWW-Authenticate` challenge to an unauthenticated `initialize`, if it sent
/// one (cut at [`MAX_CHALLENGE`] bytes: longer ones are not looked at).
async fn challenge(spec: &ServerSpec, url: &str) -> Result<Option<String>, OAuthError> {
    let client = http_client().map_err(|reason| OAuthError::Unreachable {
        url: url.into(),
        reason,
    })?;
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}}
    });
    let mut req = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    let fixed = match &spec.transport {
        crate::config::Transport::Http { headers, .. }
        | crate::config::Transport::Sse { headers, .. } => headers.clone(),
        crate::config::Transport::Stdio { .. } => Default::default(),
    };
    // The headers a connection sends, its headersHelper's included (a gateway in front of the
    // server may want them before it answers at all); never an Authorization, which sign-in
    // replaces.
    let headers = super::super::headers_helper::connection_headers(
        &fixed,
        spec.headers_helper.as_deref(),
        &spec.name,
        url,
        &mut Vec::new(),
    )
    .await
    .map_err(|e| OAuthError::HeadersHelper(e.to_string()))?;
    for (k, v) in &headers {
        if !k.eq_ignore_ascii_case("authorization") {
            req = req.header(k.as_str(), v.as_str());
        }
    }
    let resp = req.send().await.map_err(|e| OAuthError::Unreachable {
        url: url.into(),
        reason: plain(&e),
    })?;
    let status = resp.status().as_u16();
    let header = resp
        .headers()
        .get("www-authenticate")
        .and_then(|h| h.to_str().ok())
        .filter(|h| h.len() <= MAX_CHALLENGE)
        .map(str::to_string);
    drop(resp);
    Ok(header.filter(|_| status == 401 || status == 403))
}

/// A remote server's sign-in state, as `servers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignIn {
    /// Tokens are stored for the server's URL.
    SignedIn {
        /// When the access token expires (seconds since the epoch), if known.
        until: Option<u64>,
        /// Whether it refreshes without the person.
        refreshable: bool,
    },
    /// It asked for sign-in (a run met its 401, or its entry names an OAuth client).
    Needed,
    /// No tokens for this URL, and it is not known to need any.
    NotSignedIn,
}

/// `spec`'s sign-in state (`None` for a stdio server, or a URL that does not parse).
///
/// # Errors
/// The store cannot be read.
pub fn status(spec: &ServerSpec, tokens: &TokenFile) -> Result<Option<SignIn>, OAuthError> {
    let Ok(url) = remote_url(spec) else {
        return Ok(None);
    };
    let Ok(resource) = canonical_resource(url) else {
        return Ok(None);
    };
    let record = tokens.get(&spec.name, &resource)?;
    let marked = record.is_some() || spec.oauth.is_some();
    let Some(response) = record
        .and_then(|r| r.credentials)
        .and_then(|c| c.token_response.clone().map(|t| (t, c.token_received_at)))
    else {
        return Ok(Some(if marked {
            SignIn::Needed
        } else {
            SignIn::NotSignedIn
        }));
    };
    let (t, received) = response;
    let until = match (t.expires_in(), received) {
        (Some(d), Some(at)) => Some(at.saturating_add(d.as_secs())),
        _ => None,
    };
    Ok(Some(SignIn::SignedIn {
        until,
        refreshable: t.refresh_token().is_some(),
    }))
}

/// The token names of the `serve` callers signed in to `spec` with their own identity (its
/// canonical URL's tokens); empty for a stdio server.
///
/// # Errors
/// The store cannot be read.
pub fn callers_signed_in(spec: &ServerSpec, tokens: &TokenFile) -> Result<Vec<String>, OAuthError> {
    let Ok(url) = remote_url(spec) else {
        return Ok(Vec::new());
    };
    let Ok(resource) = canonical_resource(url) else {
        return Ok(Vec::new());
    };
    Ok(tokens.callers_signed_in(&spec.name, &resource)?)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}
