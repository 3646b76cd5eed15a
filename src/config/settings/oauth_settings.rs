//! [`OAuthSettings`]: signing in to remote servers: how long `login` waits for the person, and
//! the Client ID Metadata Document URL the bridge offers authorization servers that support
//! it. Read once at startup through their rows; a bad value is a startup error naming it.

use std::time::Duration;

use super::super::error::ConfigError;
use super::table::{Lookup, Number, Text, Unit};

/// `MCP_BRIDGE_LOGIN_TIMEOUT`.
pub const LOGIN_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_LOGIN_TIMEOUT",
    Unit::Seconds,
    300,
    (1, 3600),
    "`login`, and a sign-in inside a run: how long it waits for the browser's callback (not counted against the run's timeout); then nothing is stored",
);
/// `MCP_BRIDGE_OAUTH_CLIENT_METADATA_URL`.
pub const OAUTH_CLIENT_METADATA_URL: Text = Text {
    name: "MCP_BRIDGE_OAUTH_CLIENT_METADATA_URL",
    default: "unset",
    allowed: "an `https://` URL with a path",
    doc: "the bridge's Client ID Metadata Document, used as its client id with authorization servers that support it (after an entry's `oauth.clientId`, before dynamic registration)",
};
/// `MCP_BRIDGE_PUBLIC_URL`.
pub const PUBLIC_URL: Text = Text {
    name: "MCP_BRIDGE_PUBLIC_URL",
    default: "unset",
    allowed: "an `https://` URL (`http://` on loopback), no query",
    doc: "`serve --http`: the gateway's URL as callers' browsers reach it; a caller's sign-in to a remote server comes back to `<URL>/oauth/callback`, served by `serve` (unset: a loopback callback on the gateway's machine)",
};

/// The sign-in settings.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthSettings {
    /// `MCP_BRIDGE_LOGIN_TIMEOUT`.
    pub login_timeout: Duration,
    /// `MCP_BRIDGE_OAUTH_CLIENT_METADATA_URL`.
    pub client_metadata_url: Option<String>,
    /// `MCP_BRIDGE_PUBLIC_URL`, without a trailing `/`.
    pub public_url: Option<String>,
}

impl OAuthSettings {
    /// Reads the sign-in settings through `var`, each through its row.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_lookup(var: &Lookup) -> Result<Self, ConfigError> {
        Ok(OAuthSettings {
            login_timeout: LOGIN_TIMEOUT.duration(var)?,
            client_metadata_url: OAUTH_CLIENT_METADATA_URL.parse(var, None, parse_cimd)?,
            public_url: PUBLIC_URL.parse(var, None, parse_public)?,
        })
    }
}

/// An https URL with a path other than `/` (what a Client ID Metadata Document URL must be).
fn parse_cimd(raw: &str) -> Result<Option<String>, String> {
    let bad =
        || "an https:// URL with a path, e.g. https://example.com/mcp-code-bridge.json".to_string();
    let u = url::Url::parse(raw.trim()).map_err(|_| bad())?;
    if u.scheme() != "https" || u.path() == "/" || u.path().is_empty() || u.fragment().is_some() {
        return Err(bad());
    }
    Ok(Some(u.to_string()))
}

/// An https URL (http on a loopback address) with no query or fragment: the gateway's public
/// URL, kept without its trailing `/`.
fn parse_public(raw: &str) -> Result<Option<String>, String> {
    let bad = || {
        "an https:// URL (http:// only on loopback) with no query, e.g. https://gateway.example.com"
            .to_string()
    };
    let u = url::Url::parse(raw.trim()).map_err(|_| bad())?;
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    };
    let scheme_ok = u.scheme() == "https" || (u.scheme() == "http" && loopback);
    if !scheme_ok || u.query().is_some() || u.fragment().is_some() || !u.username().is_empty() {
        return Err(bad());
    }
    Ok(Some(u.to_string().trim_end_matches('/').to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_is_https_or_loopback_http_without_a_query() {
        assert_eq!(
            parse_public("https://gw.example.com/").expect("valid"),
            Some("https://gw.example.com".into())
        );
        assert_eq!(
            parse_public("https://gw.example.com/bridge/").expect("valid"),
            Some("https://gw.example.com/bridge".into())
        );
        assert_eq!(
            parse_public("http://127.0.0.1:8931").expect("valid"),
            Some("http://127.0.0.1:8931".into())
        );
        for bad in [
            "http://gw.example.com",
            "https://gw.example.com/?x=1",
            "https://gw/#f",
            "https://u@gw/",
            "gw.example.com",
        ] {
            assert!(parse_public(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_metadata_url_must_be_https_with_a_path() {
        assert_eq!(
            parse_cimd("https://example.com/client.json").expect("valid"),
            Some("https://example.com/client.json".into())
        );
        for bad in [
            "http://example.com/c.json",
            "https://example.com/",
            "https://e.com/c#x",
            "c.json",
        ] {
            assert!(parse_cimd(bad).is_err(), "{bad}");
        }
    }
}
