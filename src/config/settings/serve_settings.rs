//! [`ServeSettings`]: serving many agents (`serve --http`): how many sandboxes, how many
//! requests, how big a request, how long an idle client's sandbox is kept, the warm pool, and
//! the modules a waiting sandbox imports ahead (`MCP_BRIDGE_PRELOAD`, stdio `run` too). Read
//! once at startup through their rows; a bad value is a startup error naming it.

use std::time::Duration;

use super::super::error::ConfigError;
use super::table::{Lookup, Number, Text, Unit};

use super::table::{DAY, MIB};

/// Modules `MCP_BRIDGE_PRELOAD` may name at most.
pub const MAX_PRELOAD: usize = 32;

/// `MCP_BRIDGE_PRELOAD`.
pub const PRELOAD: Text = Text {
    name: "MCP_BRIDGE_PRELOAD",
    default: "unset",
    allowed: "module names, comma separated (at most 32)",
    doc: "modules a waiting sandbox imports ahead (a prewarmed or pooled one), e.g. `pandas,numpy,matplotlib.pyplot`; the first cell importing them then pays nothing",
};
/// `MCP_BRIDGE_WARM_POOL`.
pub const WARM_POOL: Number = Number::new(
    "MCP_BRIDGE_WARM_POOL",
    Unit::Count,
    2,
    (0, 64),
    "`serve --http`: started, unassigned sandboxes kept ready for new clients; `0` = none",
);
/// `MCP_BRIDGE_MAX_SANDBOXES`.
pub const MAX_SANDBOXES: Number = Number::new(
    "MCP_BRIDGE_MAX_SANDBOXES",
    Unit::Count,
    16,
    (1, 4096),
    "`serve --http`: awake client sandboxes at most, over all tokens (the warm pool not counted); past it the least recently used idle one sleeps",
);
/// `MCP_BRIDGE_SANDBOXES_PER_TOKEN`.
pub const SANDBOXES_PER_TOKEN: Number = Number::new(
    "MCP_BRIDGE_SANDBOXES_PER_TOKEN",
    Unit::Count,
    8,
    (1, 4096),
    "`serve --http`: awake client sandboxes one token may hold at once; past it its least recently used idle one sleeps",
);
/// `MCP_BRIDGE_REQUESTS_PER_TOKEN`.
pub const REQUESTS_PER_TOKEN: Number = Number::new(
    "MCP_BRIDGE_REQUESTS_PER_TOKEN",
    Unit::Count,
    32,
    (1, 65_536),
    "`serve --http`: HTTP requests one token may have in flight; more get HTTP 429",
);
/// `MCP_BRIDGE_HTTP_MAX_BODY`.
pub const HTTP_MAX_BODY: Number = Number::new(
    "MCP_BRIDGE_HTTP_MAX_BODY",
    Unit::Bytes,
    4 * MIB,
    (64 << 10, 256 * MIB),
    "`serve --http`: largest request body; larger gets HTTP 413",
);
/// Origins `MCP_BRIDGE_HTTP_ALLOWED_ORIGINS` may name at most.
pub const MAX_ALLOWED_ORIGINS: usize = 64;
/// `MCP_BRIDGE_HTTP_ALLOWED_ORIGINS`.
pub const HTTP_ALLOWED_ORIGINS: Text = Text {
    name: "MCP_BRIDGE_HTTP_ALLOWED_ORIGINS",
    default: "unset",
    allowed: "origins (`scheme://host[:port]`), comma separated (at most 64)",
    doc: "`serve --http`: browser origins whose requests are served besides this server's own on loopback; a request with any other `Origin` header gets HTTP 403 (one without `Origin` is served)",
};
/// `MCP_BRIDGE_HTTP_UNAUTH_TIMEOUT`.
pub const HTTP_UNAUTH_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_HTTP_UNAUTH_TIMEOUT",
    Unit::Seconds,
    5,
    (1, 300),
    "`serve --http`: a connection none of whose requests has yet carried a good token is closed N s after it opened (without a tokens file, this user's own connections are admitted at once and others closed)",
);
/// `MCP_BRIDGE_HTTP_CONNECTIONS_PER_PEER`.
pub const HTTP_CONNECTIONS_PER_PEER: Number = Number::new(
    "MCP_BRIDGE_HTTP_CONNECTIONS_PER_PEER",
    Unit::Count,
    64,
    (1, 1024),
    "`serve --http`: connections not yet admitted from one peer (an IPv4 address, an IPv6 /64, a local user on loopback); more are closed at once",
);
/// `MCP_BRIDGE_SANDBOX_TTL`.
pub const SANDBOX_TTL: Number = Number::new(
    "MCP_BRIDGE_SANDBOX_TTL",
    Unit::Seconds,
    DAY,
    (60, 30 * DAY),
    "`serve --http`: a client's sandbox (its handle and snapshot) is forgotten after N s unused; its container stops earlier, after `MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT`, and comes back with its variables",
);
/// `MCP_BRIDGE_DRAIN_TIMEOUT`.
pub const DRAIN_TIMEOUT: Number = Number::new(
    "MCP_BRIDGE_DRAIN_TIMEOUT",
    Unit::Seconds,
    10,
    (1, 600),
    "`serve --http`: on SIGTERM, how long runs in flight may finish before every sandbox is removed",
);

/// The settings for serving many agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    /// `MCP_BRIDGE_PRELOAD`: modules imported ahead in a waiting sandbox.
    pub preload: Vec<String>,
    /// `MCP_BRIDGE_WARM_POOL`.
    pub warm_pool: usize,
    /// `MCP_BRIDGE_MAX_SANDBOXES`.
    pub max_sandboxes: usize,
    /// `MCP_BRIDGE_SANDBOXES_PER_TOKEN`.
    pub sandboxes_per_token: usize,
    /// `MCP_BRIDGE_REQUESTS_PER_TOKEN`.
    pub requests_per_token: usize,
    /// `MCP_BRIDGE_HTTP_MAX_BODY`.
    pub http_max_body: usize,
    /// `MCP_BRIDGE_HTTP_ALLOWED_ORIGINS`, each lower-cased.
    pub allowed_origins: Vec<String>,
    /// `MCP_BRIDGE_HTTP_UNAUTH_TIMEOUT`.
    pub unauth_timeout: Duration,
    /// `MCP_BRIDGE_HTTP_CONNECTIONS_PER_PEER`.
    pub connections_per_peer: usize,
    /// `MCP_BRIDGE_SANDBOX_TTL`.
    pub sandbox_ttl: Duration,
    /// `MCP_BRIDGE_DRAIN_TIMEOUT`.
    pub drain_timeout: Duration,
}

impl ServeSettings {
    /// Reads the serving settings through `var`, each through its row.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the first variable with an unusable value.
    pub fn from_lookup(var: &Lookup) -> Result<Self, ConfigError> {
        Ok(ServeSettings {
            preload: PRELOAD.parse(var, Vec::new(), parse_preload)?,
            warm_pool: WARM_POOL.get(var)? as usize,
            max_sandboxes: MAX_SANDBOXES.get(var)? as usize,
            sandboxes_per_token: SANDBOXES_PER_TOKEN.get(var)? as usize,
            requests_per_token: REQUESTS_PER_TOKEN.get(var)? as usize,
            http_max_body: HTTP_MAX_BODY.get(var)? as usize,
            allowed_origins: HTTP_ALLOWED_ORIGINS.parse(var, Vec::new(), parse_origins)?,
            unauth_timeout: HTTP_UNAUTH_TIMEOUT.duration(var)?,
            connections_per_peer: HTTP_CONNECTIONS_PER_PEER.get(var)? as usize,
            sandbox_ttl: SANDBOX_TTL.duration(var)?,
            drain_timeout: DRAIN_TIMEOUT.duration(var)?,
        })
    }
}

/// `a,b.c` as module names: each a dotted Python identifier (ASCII), at most [`MAX_PRELOAD`].
fn parse_preload(raw: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if names.len() > MAX_PRELOAD {
        return Err(format!("at most {MAX_PRELOAD} modules"));
    }
    for name in &names {
        let ok = name.len() <= 200
            && name.split('.').all(|part| {
                let mut chars = part.chars();
                chars
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        if !ok {
            return Err(format!("'{name}' is not a module name"));
        }
    }
    Ok(names)
}

/// `https://a.example,http://b:8080` as origins (RFC 6454's serialization: a scheme, `://`,
/// a host, an optional port; no path, no user), lower-cased; at most [`MAX_ALLOWED_ORIGINS`].
fn parse_origins(raw: &str) -> Result<Vec<String>, String> {
    let origins: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if origins.len() > MAX_ALLOWED_ORIGINS {
        return Err(format!("at most {MAX_ALLOWED_ORIGINS} origins"));
    }
    for origin in &origins {
        let shown: String = origin.chars().take(80).collect();
        let Some((scheme, host)) = origin.split_once("://") else {
            return Err(format!("'{shown}' is not an origin (scheme://host[:port])"));
        };
        let scheme_ok = !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.');
        let host_ok = origin.len() <= 300
            && !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b));
        if !scheme_ok || !host_ok {
            return Err(format!(
                "'{shown}' is not an origin (scheme://host[:port], no path)"
            ));
        }
    }
    Ok(origins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_takes_module_names_only() {
        assert_eq!(
            parse_preload("pandas, numpy,matplotlib.pyplot").expect("valid"),
            vec!["pandas", "numpy", "matplotlib.pyplot"]
        );
        assert_eq!(parse_preload(" ").expect("empty"), Vec::<String>::new());
        for bad in ["os;rm", "a..b", "1abc", "a-b", "é"] {
            assert!(parse_preload(bad).is_err(), "{bad}");
        }
        let many = vec!["m"; MAX_PRELOAD + 1].join(",");
        assert!(parse_preload(&many).is_err());
    }

    #[test]
    fn allowed_origins_are_exact_origins() {
        assert_eq!(
            parse_origins("https://App.example, http://127.0.0.1:8080,").expect("valid"),
            vec!["https://app.example", "http://127.0.0.1:8080"]
        );
        assert_eq!(
            parse_origins("http://[::1]:9").expect("v6"),
            vec!["http://[::1]:9"]
        );
        for bad in [
            "app.example",
            "https://app.example/",
            "https://app.example/path",
            "https://user@app.example",
            "://app.example",
            "https://",
            "null",
        ] {
            assert!(parse_origins(bad).is_err(), "{bad}");
        }
        let many = vec!["http://a"; MAX_ALLOWED_ORIGINS + 1].join(",");
        assert!(parse_origins(&many).is_err());
    }
}
