//! [`read_head`]: one HTTP/1.1 request head from the sandbox, bounded in size, header count and
//! idle time, parsed into what the proxy needs: a CONNECT target, or an absolute-form `http://`
//! request rewritten to origin form for the server.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The largest request head accepted, in bytes.
pub const MAX_HEAD: usize = 16 * 1024;
/// Header lines accepted per request.
pub const MAX_HEADERS: usize = 64;

/// Why a request head is not served.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    /// The stream ended, failed, or was idle too long before the head was complete.
    #[error("the request head did not arrive")]
    Incomplete,
    /// Longer than [`MAX_HEAD`] or more than [`MAX_HEADERS`] headers.
    #[error("the request head is too large")]
    TooLarge,
    /// Not a proxy request this proxy serves.
    #[error("{0}")]
    Bad(&'static str),
}

/// What the sandbox asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel (HTTPS).
    Connect {
        /// The host, as written (`[::1]` for IPv6).
        host: String,
        /// The port.
        port: u16,
    },
    /// A plain HTTP request for `host:port`; `head` is what goes to the server.
    Forward {
        /// The method.
        method: String,
        /// The host, as written.
        host: String,
        /// The port.
        port: u16,
        /// The rewritten head (origin form, `Connection: close`), ending in a blank line.
        head: Vec<u8>,
    },
}

/// Reads a head from `stream`, each read within `idle`; returns it and the bytes read past it.
///
/// # Errors
/// [`HeadError`].
pub async fn read_head<R: AsyncRead + Unpin>(
    stream: &mut R,
    idle: Duration,
) -> Result<(Request, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(HeadError::TooLarge);
        }
        match tokio::time::timeout(idle, stream.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return Err(HeadError::Incomplete),
        }
    };
    if end > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    let rest = buf.split_off(end);
    Ok((parse(&buf)?, rest))
}

fn parse(head: &[u8]) -> Result<Request, HeadError> {
    let text =
        std::str::from_utf8(head).map_err(|_| HeadError::Bad("the request head is not text"))?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Bad("malformed request line"));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0")
        || method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
    {
        return Err(HeadError::Bad("malformed request line"));
    }
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        if headers.len() == MAX_HEADERS {
            return Err(HeadError::TooLarge);
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(HeadError::Bad("malformed header line"));
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(HeadError::Bad("malformed header line"));
        }
        headers.push((name, value.trim()));
    }
    if method == "CONNECT" {
        let (host, port) = split_authority(target, None)?;
        return Ok(Request::Connect { host, port });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err(HeadError::Bad(
            "only absolute http:// requests and CONNECT are proxied",
        ));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    if authority.contains('@') {
        return Err(HeadError::Bad("credentials in the URL are not proxied"));
    }
    let (host, port) = split_authority(authority, Some(80))?;
    let mut out = format!("{method} {path} {version}\r\n");
    out.push_str(&format!("Host: {authority}\r\n"));
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if matches!(
            lower.as_str(),
            "host" | "connection" | "proxy-connection" | "proxy-authorization" | "keep-alive"
        ) {
            continue;
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        method: method.to_string(),
        host,
        port,
        head: out.into_bytes(),
    })
}

/// `host:port` (`[v6]:port`); `default` when the port is absent and allowed to be.
fn split_authority(raw: &str, default: Option<u16>) -> Result<(String, u16), HeadError> {
    let bad = HeadError::Bad("malformed host:port");
    let (host, port) = if raw.starts_with('[') {
        match raw.find(']') {
            Some(at) => (&raw[..=at], raw[at + 1..].strip_prefix(':')),
            None => return Err(bad),
        }
    } else {
        match raw.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (raw, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|&p| p != 0).ok_or(bad)?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad),
    };
    if host.is_empty() {
        return Err(HeadError::Bad("malformed host:port"));
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn head(bytes: &[u8]) -> Result<(Request, Vec<u8>), HeadError> {
        let mut r = bytes;
        read_head(&mut r, Duration::from_secs(5)).await
    }

    #[tokio::test]
    async fn connect_and_absolute_requests_are_parsed() {
        let (req, rest) = head(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\nTLS")
            .await
            .expect("connect");
        assert_eq!(
            req,
            Request::Connect {
                host: "pypi.org".into(),
                port: 443
            }
        );
        assert_eq!(rest, b"TLS");
        let (req, rest) = head(
            b"POST http://Example.test:8080/a?b=1 HTTP/1.1\r\nHost: evil.test\r\nProxy-Connection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
        )
        .await
        .expect("forward");
        let Request::Forward {
            method,
            host,
            port,
            head: sent,
        } = req
        else {
            panic!("forward")
        };
        assert_eq!(
            (method.as_str(), host.as_str(), port),
            ("POST", "Example.test", 8080)
        );
        let sent = String::from_utf8(sent).expect("text");
        assert_eq!(
            sent,
            "POST /a?b=1 HTTP/1.1\r\nHost: Example.test:8080\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(rest, b"hi");
        let (req, _) = head(b"GET http://[::1]/ HTTP/1.0\r\n\r\n")
            .await
            .expect("v6");
        assert!(matches!(req, Request::Forward { ref host, port: 80, .. } if host == "[::1]"));
    }

    #[tokio::test]
    async fn odd_or_huge_heads_are_refused() {
        for bad in [
            &b"GET /local HTTP/1.1\r\n\r\n"[..],
            b"GET https://x.test/ HTTP/1.1\r\n\r\n",
            b"GET http://u:p@x.test/ HTTP/1.1\r\n\r\n",
            b"CONNECT x.test HTTP/1.1\r\n\r\n",
            b"CONNECT x.test:0 HTTP/1.1\r\n\r\n",
            b"GET http://x.test/ HTTP/2\r\n\r\n",
            b"GET  http://x.test/ HTTP/1.1\r\n\r\n",
            b"GET http://x.test/ HTTP/1.1\r\nno colon\r\n\r\n",
        ] {
            assert!(
                matches!(head(bad).await, Err(HeadError::Bad(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let many = format!(
            "GET http://x.test/ HTTP/1.1\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        assert!(matches!(
            head(many.as_bytes()).await,
            Err(HeadError::TooLarge)
        ));
        let long = format!(
            "GET http://x.test/ HTTP/1.1\r\nA: {}\r\n\r\n",
            "b".repeat(MAX_HEAD)
        );
        assert!(matches!(
            head(long.as_bytes()).await,
            Err(HeadError::TooLarge)
        ));
        assert!(matches!(
            head(b"GET http://x.test/ HTTP/1.1\r\n").await,
            Err(HeadError::Incomplete)
        ));
    }
}
