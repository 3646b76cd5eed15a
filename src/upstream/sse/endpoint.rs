//! The `endpoint` event of a legacy HTTP+SSE server: the URL its messages are POSTed to,
//! resolved against the event stream's URL and refused unless it is on the same origin. Pure.

use reqwest::Url;

/// The longest endpoint accepted (a session id in a path or query fits easily).
pub const MAX_ENDPOINT: usize = 4096;

/// Why an `endpoint` event was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The event had no URL.
    #[error("its endpoint event names no URL")]
    Empty,
    /// The event's URL is longer than [`MAX_ENDPOINT`].
    #[error("its endpoint event is longer than {MAX_ENDPOINT} bytes")]
    TooLong,
    /// The URL does not parse against the stream's URL.
    #[error("its endpoint event names no valid URL ({0})")]
    Invalid(String),
    /// The URL is on another origin: the POSTs would carry the entry's headers (credentials)
    /// to a host the user never configured.
    #[error(
        "its endpoint event names another origin ({0}); refused: messages carry the entry's \
         headers, which must only go to the configured server's own scheme, host and port"
    )]
    OtherOrigin(String),
}

/// The URL to POST messages to, from an `endpoint` event's `data` and the stream's URL: a
/// relative reference is resolved against `stream`; the result must have its scheme, host,
/// port and user info, and loses any fragment.
///
/// # Errors
/// See [`EndpointError`].
pub fn resolve(stream: &Url, data: &str) -> Result<Url, EndpointError> {
    let data = data.trim();
    if data.is_empty() {
        return Err(EndpointError::Empty);
    }
    if data.len() > MAX_ENDPOINT {
        return Err(EndpointError::TooLong);
    }
    let mut url = stream
        .join(data)
        .map_err(|e| EndpointError::Invalid(e.to_string()))?;
    let same = url.origin() == stream.origin()
        && url.username() == stream.username()
        && url.password() == stream.password();
    if !same {
        let mut shown = url.origin().ascii_serialization();
        if shown == "null" {
            shown = format!("a {:?} URL", url.scheme());
        }
        shown.truncate(200);
        return Err(EndpointError::OtherOrigin(shown));
    }
    url.set_fragment(None);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> Url {
        Url::parse("http://127.0.0.1:8000/mcp/sse?x=1").expect("url")
    }

    #[test]
    fn relative_endpoints_are_resolved_against_the_stream() {
        let ok = |d: &str| resolve(&stream(), d).expect("accepted").to_string();
        assert_eq!(
            ok("/messages/?session_id=ab12"),
            "http://127.0.0.1:8000/messages/?session_id=ab12"
        );
        assert_eq!(ok("messages?s=1"), "http://127.0.0.1:8000/mcp/messages?s=1");
        assert_eq!(ok("  ?s=2\n"), "http://127.0.0.1:8000/mcp/sse?s=2");
        assert_eq!(
            ok("http://127.0.0.1:8000/m#frag"),
            "http://127.0.0.1:8000/m",
            "absolute on the same origin, fragment dropped"
        );
    }

    #[test]
    fn another_origin_is_refused() {
        let other = |d: &str| match resolve(&stream(), d) {
            Err(EndpointError::OtherOrigin(o)) => o,
            got => panic!("{d}: {got:?}"),
        };
        assert_eq!(other("http://evil.example/messages"), "http://evil.example");
        assert_eq!(
            other("//evil.example/m"),
            "http://evil.example",
            "scheme-relative"
        );
        assert_eq!(
            other("https://127.0.0.1:8000/m"),
            "https://127.0.0.1:8000",
            "scheme"
        );
        assert_eq!(
            other("http://127.0.0.1:8001/m"),
            "http://127.0.0.1:8001",
            "port"
        );
        assert_eq!(
            other("http://localhost:8000/m"),
            "http://localhost:8000",
            "name"
        );
        assert_eq!(other("file:///etc/passwd"), "a \"file\" URL");
        assert_eq!(other("data:text/plain,x"), "a \"data\" URL");
        // Same host and port, but user info (sent as basic auth) the entry did not have.
        assert!(matches!(
            resolve(&stream(), "http://u:p@127.0.0.1:8000/m"),
            Err(EndpointError::OtherOrigin(_))
        ));
        let err = resolve(&stream(), "http://evil.example/m").expect_err("refused");
        assert!(err.to_string().contains("another origin"), "{err}");
    }

    #[test]
    fn empty_long_and_invalid_endpoints_are_refused() {
        assert_eq!(resolve(&stream(), " \n"), Err(EndpointError::Empty));
        let long = format!("/m?{}", "a".repeat(MAX_ENDPOINT));
        assert_eq!(resolve(&stream(), &long), Err(EndpointError::TooLong));
        assert!(matches!(
            resolve(&stream(), "http://[::1"),
            Err(EndpointError::Invalid(_))
        ));
    }
}
