//! Engine and bollard bugs worked around by talking to the engine's unix socket directly: plain
//! HTTP/1.0 requests, written by hand, where bollard's typed calls fail or cost too much.
//!
//! - Listing labelled containers: podman's Docker-compatible list reports its internal
//!   `"stopped"` (and `"stopping"`) states, which the Docker API does not have, and bollard's
//!   typed list rejects the whole answer over one such container ("unknown variant `stopped`").
//!   That is exactly the state of a dead bridge's leftovers after cleanup. This reads only `Id`
//!   and `Labels`, so any state parses. Podman:
//!   <https://github.com/containers/podman/issues/28359> (fixed by
//!   <https://github.com/containers/podman/pull/28390>); bollard:
//!   <https://github.com/fussybeaver/bollard/issues/293>,
//!   <https://github.com/fussybeaver/bollard/pull/715>.
//! - Identifying the engine: podman answers `/version` in ~300 ms (it runs `conmon`/`runc` to
//!   report their versions; measured here, no issue found) while `/_ping` takes ~1 ms and names
//!   libpod in its headers.
//! - Waiting for a podman container to exit: podman before 4.5 answers the Docker-API `wait` by
//!   polling the container's state with no pause, which keeps more than one CPU busy for as long
//!   as the sandbox lives (<https://github.com/containers/podman/issues/18150>, fixed by
//!   <https://github.com/containers/podman/pull/18149>). Its own libpod `wait` takes a poll
//!   interval.
//!
//! Only `docker.rs` calls these, and only for an engine on a unix socket.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::error::TransportError;
use super::{ManagedContainer, RuntimeError, LABEL_MANAGED};

/// Largest list response accepted (a few thousand containers).
const MAX_RESPONSE: usize = 32 << 20;
/// Largest `wait` response accepted (an exit code, or an error message).
const MAX_WAIT_RESPONSE: usize = 64 << 10;
/// How often podman checks the container's state for a libpod `wait` (its default is 250 ms).
/// Costs about 1% of a CPU in the podman service; a death is still reported first by the end
/// of the frame channel and of the output stream, this only brings the exit code.
pub const PODMAN_WAIT_INTERVAL_MS: u64 = 50;
/// Time allowed for the whole request.
const TIMEOUT_SECS: u64 = 15;

#[derive(Deserialize)]
struct Summary {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "Labels", default)]
    labels: Option<HashMap<String, String>>,
}

/// Lists every container carrying [`LABEL_MANAGED`] through the socket at `path`.
///
/// # Errors
/// [`RuntimeError::Transport`] on connection, HTTP or JSON failures.
pub async fn list_managed(engine: &str, path: &str) -> Result<Vec<ManagedContainer>, RuntimeError> {
    let fail = |cause: TransportError| RuntimeError::Transport {
        engine: engine.to_string(),
        action: "list sandboxes",
        cause,
    };
    // filters={"label":["mcp-code-bridge"]}, percent-encoded.
    let target = "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22mcp-code-bridge%22%5D%7D";
    let (_, body) = tokio::time::timeout(Duration::from_secs(TIMEOUT_SECS), get(path, target))
        .await
        .map_err(|_| fail(TransportError::NoAnswer { secs: TIMEOUT_SECS }))?
        .map_err(fail)?;
    let list: Vec<Summary> =
        serde_json::from_slice(&body).map_err(|e| fail(TransportError::Json(e)))?;
    Ok(list
        .into_iter()
        .filter_map(|s| {
            let labels = s.labels.unwrap_or_default();
            labels
                .contains_key(LABEL_MANAGED)
                .then_some(ManagedContainer { id: s.id, labels })
        })
        .collect())
}

/// `podman` or `docker`, from the `/_ping` answer of the engine at `path`.
///
/// # Errors
/// [`RuntimeError::Transport`] when the socket does not answer with HTTP 200 in time.
pub async fn identify(path: &str) -> Result<String, RuntimeError> {
    let fail = |cause: TransportError| RuntimeError::Transport {
        engine: "engine".into(),
        action: "ping the engine",
        cause,
    };
    let (head, _) = tokio::time::timeout(Duration::from_secs(5), get(path, "/_ping"))
        .await
        .map_err(|_| fail(TransportError::NoAnswer { secs: 5 }))?
        .map_err(fail)?;
    Ok(engine_of(&head).to_string())
}

fn engine_of(head: &str) -> &'static str {
    let head = head.to_ascii_lowercase();
    if head.contains("\nlibpod-api-version:") || head.contains("\nserver: libpod") {
        "podman"
    } else {
        "docker"
    }
}

/// GET `target`; returns the response head and body (HTTP 200 only).
async fn get(path: &str, target: &str) -> Result<(String, Vec<u8>), TransportError> {
    let (status, head, body) = request(path, "GET", target, MAX_RESPONSE).await?;
    if status != 200 {
        return Err(TransportError::Status(status));
    }
    Ok((head, body))
}

/// Waits until podman container `id` has exited, through the libpod API at `path`; returns its
/// exit code. Polls at [`PODMAN_WAIT_INTERVAL_MS`]; lasts as long as the container runs.
///
/// # Errors
/// [`RuntimeError::Engine`] when podman answers with an error status (404: no such container),
/// [`RuntimeError::Transport`] when the connection fails or the answer is not an exit code.
pub async fn podman_wait(engine: &str, path: &str, id: &str) -> Result<i64, RuntimeError> {
    let action = "wait for the sandbox";
    let fail = |cause: TransportError| RuntimeError::Transport {
        engine: engine.to_string(),
        action,
        cause,
    };
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    {
        return Err(fail(TransportError::NotAnId(id.to_string())));
    }
    let target = format!(
        "/v4.0.0/libpod/containers/{id}/wait?condition=stopped&condition=exited&interval={PODMAN_WAIT_INTERVAL_MS}ms"
    );
    let (status, _, body) = request(path, "POST", &target, MAX_WAIT_RESPONSE)
        .await
        .map_err(fail)?;
    let text = String::from_utf8_lossy(&body);
    if status != 200 {
        return Err(RuntimeError::Engine {
            engine: engine.to_string(),
            action,
            status,
            message: error_message(&text),
        });
    }
    text.trim().parse::<i64>().map_err(|_| {
        fail(TransportError::Malformed(format!(
            "the answer is not an exit code: {:?}",
            clip(&text)
        )))
    })
}

/// The `message` of a JSON error body, else the body itself (clipped).
fn error_message(body: &str) -> String {
    #[derive(Deserialize)]
    struct Body {
        message: String,
    }
    serde_json::from_str::<Body>(body)
        .map(|b| b.message)
        .unwrap_or_else(|_| clip(body).to_string())
}

fn clip(text: &str) -> &str {
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// One HTTP/1.0 request without a body; returns the status, the head and the body (at most
/// `max` bytes). HTTP/1.0 keeps the answer unchunked and ends it by closing the connection.
async fn request(
    path: &str,
    method: &str,
    target: &str,
    max: usize,
) -> Result<(u16, String, Vec<u8>), TransportError> {
    let mut stream = tokio::net::UnixStream::connect(path).await?;
    let request = format!(
        "{method} {target} HTTP/1.0\r\nHost: engine\r\nAccept: application/json\r\nContent-Length: 0\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    (&mut stream)
        .take(max as u64 + 1)
        .read_to_end(&mut response)
        .await?;
    if response.len() > max {
        return Err(TransportError::Malformed("response too large".into()));
    }
    parse_response(response)
}

/// Splits a whole HTTP/1.x response into status, head and body.
fn parse_response(mut response: Vec<u8>) -> Result<(u16, String, Vec<u8>), TransportError> {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| {
            if response.is_empty() {
                TransportError::Closed("the engine closed the connection without an answer")
            } else {
                TransportError::Malformed("no HTTP header end".into())
            }
        })?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|_| head.starts_with("HTTP/1."))
        .ok_or_else(|| {
            TransportError::Malformed(format!("not an HTTP response: {:?}", clip(&head)))
        })?;
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Err(TransportError::Malformed(
            "unexpected chunked response to an HTTP/1.0 request".into(),
        ));
    }
    let body = response.split_off(split + 4);
    Ok((status, head, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-shot engine on a unix socket: records the request head, answers `response`.
    async fn engine(
        response: &'static [u8],
    ) -> (tempfile::TempDir, String, tokio::task::JoinHandle<String>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("engine.sock").display().to_string();
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let served = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if conn.read(&mut byte).await.expect("read") == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            conn.write_all(response).await.expect("write");
            String::from_utf8_lossy(&head).into_owned()
        });
        (dir, path, served)
    }

    #[tokio::test]
    async fn podman_wait_asks_libpod_with_an_interval_and_reads_the_exit_code() {
        let (_dir, path, served) =
            engine(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n137\n").await;
        assert_eq!(
            podman_wait("podman", &path, "abc123").await.expect("code"),
            137
        );
        let head = served.await.expect("served");
        let expected = format!(
            "POST /v4.0.0/libpod/containers/abc123/wait?condition=stopped&condition=exited&interval={PODMAN_WAIT_INTERVAL_MS}ms HTTP/1.0\r\n"
        );
        assert!(head.starts_with(&expected), "{head}");
    }

    #[tokio::test]
    async fn podman_wait_errors_are_typed() {
        let (_dir, path, _served) = engine(
            b"HTTP/1.0 404 Not Found\r\n\r\n{\"cause\":\"no such container\",\"message\":\"no container with name or ID abc\",\"response\":404}",
        )
        .await;
        let err = podman_wait("podman", &path, "abc").await.expect_err("404");
        assert!(err.is_not_found() && !err.is_transport(), "{err:?}");
        assert!(
            err.to_string().contains("no container with name or ID abc"),
            "{err}"
        );

        let (_dir, path, _served) = engine(b"HTTP/1.0 200 OK\r\n\r\n{\"StatusCode\":0}").await;
        let err = podman_wait("podman", &path, "abc")
            .await
            .expect_err("not a code");
        assert!(err.is_transport(), "{err:?}");

        let (_dir, path, _served) = engine(b"").await;
        let err = podman_wait("podman", &path, "abc")
            .await
            .expect_err("no answer");
        assert!(err.to_string().contains("without an answer"), "{err}");

        let err = podman_wait("podman", &path, "../../x")
            .await
            .expect_err("bad id");
        assert!(err.to_string().contains("not a container id"), "{err}");
    }

    #[test]
    fn engine_is_told_by_ping_headers() {
        let podman = "HTTP/1.0 200 OK\r\nApi-Version: 1.41\r\nLibpod-Api-Version: 4.3.1\r\nServer: Libpod/4.3.1 (linux)";
        let docker = "HTTP/1.1 200 OK\r\nApi-Version: 1.43\r\nServer: Docker/24.0.5 (linux)";
        assert_eq!(engine_of(podman), "podman");
        assert_eq!(engine_of(docker), "docker");
    }
}
