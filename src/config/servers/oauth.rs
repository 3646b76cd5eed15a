//! A remote entry's pre-registered OAuth client: the `"oauth"` field in the shape Claude Code
//! writes (`{"clientId", "clientSecret"?, "callbackPort"?, "scopes"?, "authServerMetadataUrl"?}`,
//! `scopes` one space-separated string), or Cursor's static-OAuth `"auth"` field (`{"CLIENT_ID",
//! "CLIENT_SECRET"?, "scopes"?}`, `scopes` an array), read as the same [`OAuthEntry`]. Every
//! string has the file's variables expanded; the secret is kept out of messages (`Debug` hides
//! it, and it joins the entry's redacted values).

use serde_json::{Map, Value};

/// Longest accepted `clientId`, `clientSecret` or `scopes` text.
const MAX_FIELD: usize = 4096;

/// A pre-registered OAuth client for one remote server, and how to sign in with it.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct OAuthEntry {
    /// `clientId`: the client registered with the server's authorization server.
    pub client_id: Option<String>,
    /// `clientSecret`: for a confidential client (never shown).
    pub client_secret: Option<String>,
    /// `callbackPort`: the loopback port the sign-in's redirect comes back to; the redirect
    /// URI is then exactly `http://localhost:PORT/callback`.
    pub callback_port: Option<u16>,
    /// `scopes`, split on whitespace (empty: chosen by discovery).
    pub scopes: Vec<String>,
    /// `authServerMetadataUrl`: the authorization server's metadata, instead of discovery.
    pub auth_server_metadata_url: Option<String>,
}

impl std::fmt::Debug for OAuthEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthEntry")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("callback_port", &self.callback_port)
            .field("scopes", &self.scopes)
            .field("auth_server_metadata_url", &self.auth_server_metadata_url)
            .finish()
    }
}

/// Parses `"oauth"` of an entry (`None` when absent or null). `expand` expands a field's
/// variables (its first argument names the field in messages); errors name the field, never
/// a value.
pub fn parse_oauth(
    obj: &Map<String, Value>,
    expand: &mut impl FnMut(&str, String) -> Result<String, String>,
) -> Result<Option<OAuthEntry>, String> {
    let oauth = match (obj.get("oauth"), obj.get("auth")) {
        (None | Some(Value::Null), None | Some(Value::Null)) => return Ok(None),
        (None | Some(Value::Null), Some(Value::Object(auth))) => {
            return parse_cursor_auth(auth, expand).map(Some)
        }
        (None | Some(Value::Null), Some(_)) => return Err("\"auth\" must be an object".into()),
        (Some(_), Some(a)) if !a.is_null() => {
            return Err(
                "an entry has \"oauth\" (Claude Code's) or \"auth\" (Cursor's), not both".into(),
            )
        }
        (Some(Value::Object(o)), _) => o,
        (Some(_), _) => return Err("\"oauth\" must be an object".into()),
    };
    let mut string = |key: &str| string_field(oauth, "oauth", key, expand);
    let client_id = string("clientId")?;
    let client_secret = string("clientSecret")?;
    let scopes = string("scopes")?
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let auth_server_metadata_url = string("authServerMetadataUrl")?;
    if let Some(u) = &auth_server_metadata_url {
        let lower = u.to_ascii_lowercase();
        if !(lower.starts_with("https://") || lower.starts_with("http://")) {
            return Err("\"oauth.authServerMetadataUrl\" must start with https://".into());
        }
    }
    let callback_port = match oauth.get("callbackPort") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(p @ 1..=65535) => Some(p as u16),
            _ => return Err("\"oauth.callbackPort\" must be a port number (1-65535)".into()),
        },
        Some(Value::String(s)) => match s.trim().parse::<u16>() {
            Ok(p) if p > 0 => Some(p),
            _ => return Err("\"oauth.callbackPort\" must be a port number (1-65535)".into()),
        },
        Some(_) => return Err("\"oauth.callbackPort\" must be a port number (1-65535)".into()),
    };
    if client_secret.is_some() && client_id.is_none() {
        return Err("\"oauth.clientSecret\" needs \"oauth.clientId\"".into());
    }
    if let Some(unknown) = oauth.keys().find(|k| {
        ![
            "clientId",
            "clientSecret",
            "callbackPort",
            "scopes",
            "authServerMetadataUrl",
        ]
        .contains(&k.as_str())
    }) {
        return Err(format!(
            "\"oauth\" has an unknown field {:?} (known: clientId, clientSecret, callbackPort, scopes, authServerMetadataUrl)",
            crate::shown::Shown(unknown).to_string()
        ));
    }
    Ok(Some(OAuthEntry {
        client_id,
        client_secret,
        callback_port,
        scopes,
        auth_server_metadata_url,
    }))
}

/// The string `field.key` of `obj`, its variables expanded (`None` when absent, null or blank).
fn string_field(
    obj: &Map<String, Value>,
    field: &str,
    key: &str,
    expand: &mut impl FnMut(&str, String) -> Result<String, String>,
) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_FIELD => {
            let v = expand(&format!("{field}.{key}"), s.clone())?;
            Ok(Some(v).filter(|v| !v.trim().is_empty()))
        }
        Some(Value::String(_)) => Err(format!(
            "\"{field}.{key}\" is longer than {MAX_FIELD} characters"
        )),
        Some(_) => Err(format!("\"{field}.{key}\" must be a string")),
    }
}

/// Cursor's `"auth"`: `CLIENT_ID` (needed), `CLIENT_SECRET`, `scopes` (an array of strings).
fn parse_cursor_auth(
    auth: &Map<String, Value>,
    expand: &mut impl FnMut(&str, String) -> Result<String, String>,
) -> Result<OAuthEntry, String> {
    let mut string = |key: &str| string_field(auth, "auth", key, expand);
    let client_id = string("CLIENT_ID")?;
    let client_secret = string("CLIENT_SECRET")?;
    if client_id.is_none() {
        return Err("\"auth\" needs \"CLIENT_ID\" (Cursor's static OAuth client)".into());
    }
    let scopes = match auth.get("scopes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= 256 => items
            .iter()
            .map(|v| match v {
                Value::String(s) if s.len() <= MAX_FIELD && !s.contains(char::is_whitespace) => {
                    Ok(s.clone())
                }
                _ => Err("\"auth.scopes\" must be an array of scope names".to_string()),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("\"auth.scopes\" must be an array of scope names".into()),
    };
    if let Some(unknown) = auth
        .keys()
        .find(|k| !["CLIENT_ID", "CLIENT_SECRET", "scopes"].contains(&k.as_str()))
    {
        return Err(format!(
            "\"auth\" has an unknown field {:?} (known: CLIENT_ID, CLIENT_SECRET, scopes)",
            crate::shown::Shown(unknown).to_string()
        ));
    }
    Ok(OAuthEntry {
        client_id,
        client_secret,
        scopes,
        ..OAuthEntry::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Option<OAuthEntry>, String> {
        let obj = v.as_object().expect("object").clone();
        parse_oauth(&obj, &mut |_, s| Ok(s))
    }

    #[test]
    fn claude_codes_shape_is_read_with_scopes_split() {
        let e = parse(json!({"oauth": {"clientId": "abc", "clientSecret": "shh",
            "callbackPort": 8080, "scopes": "read  write\tadmin",
            "authServerMetadataUrl": "https://as.example/.well-known/oauth-authorization-server"}}))
        .expect("valid")
        .expect("present");
        assert_eq!(e.client_id.as_deref(), Some("abc"));
        assert_eq!(e.client_secret.as_deref(), Some("shh"));
        assert_eq!(e.callback_port, Some(8080));
        assert_eq!(e.scopes, ["read", "write", "admin"]);
        assert!(
            !format!("{e:?}").contains("shh"),
            "the secret is never shown"
        );
        assert_eq!(parse(json!({})).expect("valid"), None);
        assert_eq!(parse(json!({"oauth": null})).expect("valid"), None);
        let port_text = parse(json!({"oauth": {"callbackPort": "9000"}}))
            .expect("valid")
            .expect("present");
        assert_eq!(port_text.callback_port, Some(9000));
    }

    #[test]
    fn bad_fields_are_named_without_their_values() {
        for (entry, words) in [
            (json!({"oauth": "x"}), "\"oauth\" must be an object"),
            (
                json!({"oauth": {"clientId": 3}}),
                "\"oauth.clientId\" must be a string",
            ),
            (
                json!({"oauth": {"callbackPort": 0}}),
                "\"oauth.callbackPort\"",
            ),
            (
                json!({"oauth": {"callbackPort": 70000}}),
                "\"oauth.callbackPort\"",
            ),
            (
                json!({"oauth": {"clientSecret": "topsecret"}}),
                "needs \"oauth.clientId\"",
            ),
            (json!({"oauth": {"clientid": "a"}}), "unknown field"),
            (
                json!({"oauth": {"authServerMetadataUrl": "file:///etc/passwd"}}),
                "https://",
            ),
        ] {
            let err = parse(entry.clone()).expect_err(&entry.to_string());
            assert!(err.contains(words), "{err}");
            assert!(!err.contains("topsecret"), "{err}");
        }
    }

    #[test]
    fn cursors_static_oauth_reads_as_the_same_client() {
        let e = parse(json!({"auth": {"CLIENT_ID": "abc", "CLIENT_SECRET": "shh",
            "scopes": ["read", "write"]}}))
        .expect("valid")
        .expect("some");
        assert_eq!(e.client_id.as_deref(), Some("abc"));
        assert_eq!(e.client_secret.as_deref(), Some("shh"));
        assert_eq!(e.scopes, ["read", "write"]);
        assert_eq!(e.callback_port, None);
        assert!(!format!("{e:?}").contains("shh"));
        for (v, words) in [
            (
                json!({"auth": {"CLIENT_SECRET": "s"}}),
                "needs \"CLIENT_ID\"",
            ),
            (
                json!({"auth": {"CLIENT_ID": "a", "scopes": "read"}}),
                "array of scope names",
            ),
            (
                json!({"auth": {"CLIENT_ID": "a", "scopes": ["a b"]}}),
                "array of scope names",
            ),
            (json!({"auth": {"CLIENT_ID": "a", "x": 1}}), "unknown field"),
            (json!({"auth": "x"}), "must be an object"),
            (
                json!({"oauth": {"clientId": "a"}, "auth": {"CLIENT_ID": "b"}}),
                "not both",
            ),
        ] {
            let err = parse(v).expect_err("refused");
            assert!(err.contains(words), "{err}");
        }
    }
}
