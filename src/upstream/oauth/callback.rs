//! The loopback listener a sign-in's redirect comes back to (`http://127.0.0.1:PORT/callback`,
//! or `http://localhost:PORT/callback` for an entry's `callbackPort`). Everything it reads is
//! hostile: a request head is read up to [`MAX_HEAD`] bytes within [`READ_TIME`], only `GET` of
//! the callback path is looked at, a `state` other than the sign-in's ends the sign-in with
//! [`CallbackError::State`] (nothing is exchanged or stored), and at most [`MAX_STRAY`] other
//! requests (a favicon, a probe) are answered 404 before it gives up.

use std::time::Duration;

use subtle::ConstantTimeEq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// The path the redirect URI names.
pub const PATH: &str = "/callback";
/// The largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// How long one request may take to arrive.
const READ_TIME: Duration = Duration::from_secs(5);
/// Requests for other paths answered before the sign-in is given up.
const MAX_STRAY: usize = 64;
/// The longest `error` / `error_description` text kept from a callback.
const MAX_ERROR_TEXT: usize = 200;

/// Why no authorization code came back.
#[derive(Debug, thiserror::Error)]
pub enum CallbackError {
    /// The listener could not be opened.
    #[error("cannot listen on 127.0.0.1:{port} for the sign-in's callback: {source}")]
    Bind {
        /// The port asked for (0: any).
        port: u16,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No callback came in time.
    #[error("no sign-in callback within {0} s (MCP_BRIDGE_LOGIN_TIMEOUT); nothing was stored")]
    Timeout(u64),
    /// The callback's `state` is not this sign-in's: forged, replayed or from another sign-in.
    #[error("the sign-in callback's state does not match this sign-in (a forged or replayed callback); nothing was stored")]
    State,
    /// The authorization server reported an error.
    #[error("the authorization server refused the sign-in: {0}")]
    Refused(String),
    /// The callback carried no code.
    #[error("the sign-in callback carried no authorization code; nothing was stored")]
    NoCode,
    /// Too many sign-ins wait at the gateway's public callback already.
    #[error("{0} sign-ins wait at the gateway's callback already; try again in a moment")]
    Busy(usize),
    /// Too many requests that were not the callback.
    #[error(
        "more than {MAX_STRAY} requests that were not the sign-in callback; nothing was stored"
    )]
    Stray,
}

/// What a good callback carries.
pub struct Returned {
    /// The authorization code (a secret: never shown).
    pub code: String,
    /// The state (already checked).
    pub state: String,
    /// RFC 9207's `iss`, when sent.
    pub issuer: Option<String>,
}

/// An open callback listener.
pub struct Listener {
    listener: TcpListener,
    port: u16,
    fixed: bool,
}

impl Listener {
    /// Listens on 127.0.0.1 at `port` (`None`: any free port).
    ///
    /// # Errors
    /// [`CallbackError::Bind`].
    pub async fn bind(port: Option<u16>) -> Result<Listener, CallbackError> {
        let asked = port.unwrap_or(0);
        let listener = TcpListener::bind(("127.0.0.1", asked))
            .await
            .map_err(|source| CallbackError::Bind {
                port: asked,
                source,
            })?;
        let port = listener
            .local_addr()
            .map_err(|source| CallbackError::Bind {
                port: asked,
                source,
            })?
            .port();
        Ok(Listener {
            listener,
            port,
            fixed: port == asked && asked != 0,
        })
    }

    /// The redirect URI: `http://localhost:PORT/callback` for a fixed port (as Claude Code
    /// registers it), else `http://127.0.0.1:PORT/callback`.
    pub fn redirect_uri(&self) -> String {
        let host = if self.fixed { "localhost" } else { "127.0.0.1" };
        format!("http://{host}:{}{PATH}", self.port)
    }

    /// Waits until `deadline` for the callback of the sign-in whose state is `state`.
    ///
    /// # Errors
    /// [`CallbackError`]: timeout, wrong state, a refusal, no code, too many stray requests.
    pub async fn wait(
        &self,
        state: &str,
        deadline: Instant,
        secs: u64,
    ) -> Result<Returned, CallbackError> {
        let mut stray = 0;
        loop {
            let accepted = tokio::time::timeout_at(deadline, self.listener.accept()).await;
            let Ok(Ok((mut conn, _))) = accepted else {
                if accepted.is_err() {
                    return Err(CallbackError::Timeout(secs));
                }
                continue;
            };
            let head = match tokio::time::timeout(READ_TIME, read_head(&mut conn)).await {
                Ok(Some(head)) => head,
                _ => {
                    reply(&mut conn, 400, "Bad request.").await;
                    stray += 1;
                    if stray > MAX_STRAY {
                        return Err(CallbackError::Stray);
                    }
                    continue;
                }
            };
            match judge(&head, state) {
                Judged::Stray => {
                    reply(&mut conn, 404, "Not found.").await;
                    stray += 1;
                    if stray > MAX_STRAY {
                        return Err(CallbackError::Stray);
                    }
                }
                Judged::Done(Ok(returned)) => {
                    reply(
                        &mut conn,
                        200,
                        "Signed in to the MCP server. You can close this tab.",
                    )
                    .await;
                    return Ok(returned);
                }
                Judged::Done(Err(err)) => {
                    reply(&mut conn, 400, "Sign-in failed; see the terminal.").await;
                    return Err(err);
                }
            }
        }
    }
}

enum Judged {
    Stray,
    Done(Result<Returned, CallbackError>),
}

/// Reads a request head (up to the blank line), at most [`MAX_HEAD`] bytes.
async fn read_head(conn: &mut TcpStream) -> Option<String> {
    let mut got = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let n = conn.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        if got.windows(4).any(|w| w == b"\r\n\r\n") || got.windows(2).any(|w| w == b"\n\n") {
            return String::from_utf8(got).ok();
        }
        if got.len() > MAX_HEAD {
            return None;
        }
    }
}

/// What a request head means for the sign-in waiting on `state`.
fn judge(head: &str, state: &str) -> Judged {
    let line = head.lines().next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some("GET"), Some(target)) = (parts.next(), parts.next()) else {
        return Judged::Stray;
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != PATH {
        return Judged::Stray;
    }
    Judged::Done(judge_query(query, state))
}

/// What a callback's query (`code`, `state`, `iss`, `error`) means for the sign-in waiting on
/// `state`.
pub(super) fn judge_query(query: &str, state: &str) -> Result<Returned, CallbackError> {
    let mut code = None;
    let mut got_state = None;
    let mut issuer = None;
    let mut error = None;
    let mut description = None;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let slot = match &*k {
            "code" => &mut code,
            "state" => &mut got_state,
            "iss" => &mut issuer,
            "error" => &mut error,
            "error_description" => &mut description,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(v.into_owned());
        }
    }
    let state_ok = got_state.as_deref().is_some_and(|s| {
        s.len() == state.len() && bool::from(s.as_bytes().ct_eq(state.as_bytes()))
    });
    if !state_ok {
        return Err(CallbackError::State);
    }
    if let Some(error) = error {
        let mut text = short(&error);
        if let Some(d) = description {
            text = format!("{text} ({})", short(&d));
        }
        return Err(CallbackError::Refused(text));
    }
    match code.filter(|c| !c.is_empty()) {
        Some(code) => Ok(Returned {
            code,
            state: state.to_string(),
            issuer,
        }),
        None => Err(CallbackError::NoCode),
    }
}

/// A callback's text, cut and with control characters dropped.
fn short(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(MAX_ERROR_TEXT)
        .collect()
}

async fn reply(conn: &mut TcpStream, status: u16, text: &str) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!("<!doctype html><title>mcp-code-bridge</title><p>{text}</p>\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(READ_TIME, conn.write_all(response.as_bytes())).await;
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(target: &str) -> String {
        format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n")
    }

    #[test]
    fn only_the_callback_with_this_sign_ins_state_counts() {
        let s = "st4te";
        assert!(matches!(judge(&get("/favicon.ico"), s), Judged::Stray));
        assert!(matches!(
            judge("POST /callback?code=c&state=st4te HTTP/1.1\r\n\r\n", s),
            Judged::Stray
        ));
        assert!(matches!(
            judge(&get("/callback?code=c&state=other"), s),
            Judged::Done(Err(CallbackError::State))
        ));
        assert!(matches!(
            judge(&get("/callback?code=c"), s),
            Judged::Done(Err(CallbackError::State))
        ));
        // A refusal with a forged state is a forged callback, not a refusal.
        assert!(matches!(
            judge(&get("/callback?error=access_denied&state=x"), s),
            Judged::Done(Err(CallbackError::State))
        ));
        assert!(matches!(
            judge(&get("/callback?state=st4te"), s),
            Judged::Done(Err(CallbackError::NoCode))
        ));
        let Judged::Done(Err(CallbackError::Refused(text))) = judge(
            &get("/callback?error=access_denied&error_description=no%0Athanks&state=st4te"),
            s,
        ) else {
            panic!("a refusal");
        };
        assert_eq!(text, "access_denied (nothanks)");
        let Judged::Done(Ok(r)) = judge(
            &get("/callback?code=abc&state=st4te&iss=https%3A%2F%2Fas"),
            s,
        ) else {
            panic!("the callback");
        };
        assert_eq!(
            (r.code.as_str(), r.issuer.as_deref()),
            ("abc", Some("https://as"))
        );
    }

    #[tokio::test]
    async fn the_listener_answers_strays_and_bounds_a_huge_head() {
        let l = Listener::bind(None).await.expect("bind");
        let uri = l.redirect_uri();
        assert!(
            uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"),
            "{uri}"
        );
        let port = l.port;
        let client = tokio::spawn(async move {
            let mut huge = TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            let _ = huge.write_all(&vec![b'a'; 64 * 1024]).await;
            // Cut off after MAX_HEAD bytes (its answer may be lost to the reset).
            let mut answer = Vec::new();
            let _ = huge.read_to_end(&mut answer).await;
            let mut ok = TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            ok.write_all(get("/callback?code=k&state=s1").as_bytes())
                .await
                .expect("write");
            let mut answer = String::new();
            ok.read_to_string(&mut answer).await.expect("read");
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let r = l.wait("s1", deadline, 10).await.expect("the callback");
        assert_eq!(r.code, "k");
        client.await.expect("client");
        let timeout = l
            .wait("s1", Instant::now() + Duration::from_millis(50), 0)
            .await;
        assert!(matches!(timeout, Err(CallbackError::Timeout(0))));
    }

    #[tokio::test]
    async fn a_fixed_port_is_named_localhost_as_claude_code_registers_it() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = probe.local_addr().expect("addr").port();
        drop(probe);
        let l = Listener::bind(Some(port)).await.expect("bind");
        assert_eq!(
            l.redirect_uri(),
            format!("http://localhost:{port}/callback")
        );
    }
}
