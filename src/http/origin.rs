//! [`Origins`]: which browser origins `serve --http` answers (the streamable HTTP transport
//! says servers MUST validate `Origin`, against DNS rebinding). A page a browser loaded from
//! another site may send requests to a loopback port; the browser names that site in `Origin`.
//! On a loopback address this server's own origins (`http://127.0.0.1:PORT`,
//! `http://localhost:PORT`, `http://[::1]:PORT`) are allowed; on any address, those of
//! `MCP_BRIDGE_HTTP_ALLOWED_ORIGINS`. A request without `Origin` (every non-browser client) is
//! not a browser's and is served.

use std::net::SocketAddr;

/// The origins whose requests are served.
#[derive(Debug, Clone)]
pub struct Origins {
    /// Lower-cased, exact origins.
    allowed: Vec<String>,
}

impl Origins {
    /// The origins allowed for a server listening on `local`: its own on loopback, and
    /// `extra` (the setting, already lower-cased) everywhere.
    pub fn new(local: SocketAddr, extra: &[String]) -> Self {
        let mut allowed = Vec::new();
        if local.ip().is_loopback() {
            let port = local.port();
            for host in ["127.0.0.1", "localhost", "[::1]"] {
                allowed.push(format!("http://{host}:{port}"));
            }
        }
        allowed.extend(extra.iter().cloned());
        Origins { allowed }
    }

    /// True when a request whose `Origin` header is `origin` (`None`: no such header) may be
    /// served. A value that is not text is refused.
    pub fn allows(&self, origin: Option<&[u8]>) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let Ok(text) = std::str::from_utf8(origin) else {
            return false;
        };
        let text = text.trim();
        self.allowed.iter().any(|a| a.eq_ignore_ascii_case(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn on_loopback_only_the_servers_own_origins_pass() {
        let o = Origins::new(addr("127.0.0.1:8765"), &[]);
        assert!(o.allows(None), "no Origin: not a browser, served");
        for ok in [
            "http://127.0.0.1:8765",
            "http://localhost:8765",
            "http://[::1]:8765",
            "HTTP://LocalHost:8765",
        ] {
            assert!(o.allows(Some(ok.as_bytes())), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://127.0.0.1:8766",
            "http://127.0.0.1",
            "https://127.0.0.1:8765",
            "http://localhost:8765.evil.example",
            "null",
            "",
        ] {
            assert!(!o.allows(Some(bad.as_bytes())), "{bad}");
        }
        assert!(!o.allows(Some(b"http://\xff:8765")));
    }

    #[test]
    fn elsewhere_only_the_setting_passes() {
        let none = Origins::new(addr("0.0.0.0:8765"), &[]);
        assert!(none.allows(None));
        assert!(!none.allows(Some(b"http://127.0.0.1:8765")));
        assert!(!none.allows(Some(b"https://app.example")));
        let some = Origins::new(addr("10.0.0.5:443"), &["https://app.example".to_string()]);
        assert!(some.allows(Some(b"https://app.example")));
        assert!(!some.allows(Some(b"https://app.example:444")));
        let v6 = Origins::new(addr("[::1]:80"), &["https://app.example".to_string()]);
        assert!(v6.allows(Some(b"http://[::1]:80")) && v6.allows(Some(b"https://app.example")));
    }
}
