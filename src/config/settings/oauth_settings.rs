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

/// The sign-in settings.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthSettings {
    /// `MCP_BRIDGE_LOGIN_TIMEOUT`.
    pub login_timeout: Duration,
    /// `MCP_BRIDGE_OAUTH_CLIENT_METADATA_URL`.
    pub client_metadata_url: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
