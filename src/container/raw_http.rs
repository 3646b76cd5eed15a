//! Plain HTTP/1.0 requests over the engine's unix socket, where bollard's typed calls fall short.
//!
//! - Listing labelled containers: bollard's typed list rejects states it does not know, and
//!   podman reports `"stopped"` for exited containers after cleanup, which is exactly the state of
//!   a dead bridge's leftovers. This reads only `Id` and `Labels`, so any state parses.
//! - Identifying the engine: podman answers `/version` in ~300 ms (it runs `conmon`/`runc` to
//!   report their versions) while `/_ping` takes ~1 ms and names libpod in its headers.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{ManagedContainer, RuntimeError, LABEL_MANAGED};

/// Largest list response accepted (a few thousand containers).
const MAX_RESPONSE: usize = 32 << 20;
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
    let fail = |message: String| RuntimeError::Transport {
        engine: engine.to_string(),
        action: "list sandboxes",
        message,
    };
    // filters={"label":["mcp-code-bridge"]}, percent-encoded.
    let target = "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22mcp-code-bridge%22%5D%7D";
    let (_, body) = tokio::time::timeout(Duration::from_secs(TIMEOUT_SECS), get(path, target))
        .await
        .map_err(|_| fail(format!("no answer within {TIMEOUT_SECS} s")))?
        .map_err(fail)?;
    let list: Vec<Summary> =
        serde_json::from_slice(&body).map_err(|e| fail(format!("bad JSON: {e}")))?;
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
    let fail = |message: String| RuntimeError::Transport {
        engine: "engine".into(),
        action: "ping the engine",
        message,
    };
    let (head, _) = tokio::time::timeout(Duration::from_secs(5), get(path, "/_ping"))
        .await
        .map_err(|_| fail("no answer within 5 s".into()))?
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
async fn get(path: &str, target: &str) -> Result<(String, Vec<u8>), String> {
    let mut stream = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|e| e.to_string())?;
    let request =
        format!("GET {target} HTTP/1.0\r\nHost: engine\r\nAccept: application/json\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    (&mut stream)
        .take(MAX_RESPONSE as u64 + 1)
        .read_to_end(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    if response.len() > MAX_RESPONSE {
        return Err("response too large".into());
    }
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP header end")?;
    let head = String::from_utf8_lossy(&response[..split]);
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("HTTP {status}"));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Err("unexpected chunked response to an HTTP/1.0 request".into());
    }
    Ok((head.into_owned(), response[split + 4..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_is_told_by_ping_headers() {
        let podman = "HTTP/1.0 200 OK\r\nApi-Version: 1.41\r\nLibpod-Api-Version: 4.3.1\r\nServer: Libpod/4.3.1 (linux)";
        let docker = "HTTP/1.1 200 OK\r\nApi-Version: 1.43\r\nServer: Docker/24.0.5 (linux)";
        assert_eq!(engine_of(podman), "podman");
        assert_eq!(engine_of(docker), "docker");
    }
}
