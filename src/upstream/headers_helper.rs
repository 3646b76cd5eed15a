//! Claude Code's `headersHelper`: a shell command from a remote entry whose stdout is a JSON
//! object of header names to string values, merged over the entry's static `headers` (a
//! helper's header replaces a static one of the same name). Run as Claude Code documents it: in
//! a shell (`/bin/sh -c`), with `CLAUDE_CODE_MCP_SERVER_NAME` and `CLAUDE_CODE_MCP_SERVER_URL`
//! set, at most [`HELPER_TIMEOUT`], afresh on every connection (start and restart), never cached.
//!
//! Only a definition that may start reaches here (`client.rs` checks consent first). Nothing
//! from other fields is put into the command line: the server's name and URL go in the
//! environment. The helper's stdout is read up to [`MAX_OUTPUT`]; its stderr is dropped (it may
//! print the secret); its headers are never logged and errors never echo its output.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use tokio::io::AsyncReadExt;

/// How long the helper may run: Claude Code's documented 10 seconds.
pub(super) const HELPER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most stdout read from the helper.
pub(super) const MAX_OUTPUT: usize = 64 * 1024;
/// The most headers the helper may set.
pub(super) const MAX_HEADERS: usize = 64;
/// The longest header value accepted from the helper.
pub(super) const MAX_VALUE: usize = 8 * 1024;

/// Why the helper gave no headers; the text names no header value and no output.
#[derive(Debug, thiserror::Error)]
pub(super) enum HelperError {
    /// The shell could not be started.
    #[error("its headersHelper could not be started: {0}")]
    Spawn(#[source] std::io::Error),
    /// It exited with a code other than 0.
    #[error("its headersHelper exited with code {0}")]
    Exit(i32),
    /// A signal ended it.
    #[error("its headersHelper was ended by signal {0}")]
    Signal(i32),
    /// It ran longer than [`HELPER_TIMEOUT`] (it and its children were killed).
    #[error("its headersHelper did not finish within {} s and was stopped", .0.as_secs())]
    Timeout(Duration),
    /// It wrote more than [`MAX_OUTPUT`] bytes.
    #[error("its headersHelper wrote more than {MAX_OUTPUT} bytes (it was stopped)")]
    TooLarge,
    /// Its output is not one JSON object.
    #[error("its headersHelper's output is not a JSON object of header names to strings")]
    NotObject,
    /// It set more than [`MAX_HEADERS`] headers.
    #[error("its headersHelper set {0} headers (at most {MAX_HEADERS})")]
    TooMany(usize),
    /// A value is not a string (the position is in name order).
    #[error("its headersHelper's header #{0} (in name order) has a value that is not a string")]
    NotString(usize),
    /// A name is not a valid HTTP header name.
    #[error("its headersHelper's header #{0} (in name order) has an invalid name")]
    BadName(usize),
    /// A value is not a valid HTTP header value, or is longer than [`MAX_VALUE`].
    #[error(
        "its headersHelper's header #{0} (in name order) has an invalid value (control characters, or over {MAX_VALUE} bytes)"
    )]
    BadValue(usize),
}

/// Runs `command` for the server `server` at `url` and returns its headers, checked.
///
/// # Errors
/// [`HelperError`]: it could not start, failed, ran too long, wrote too much, or wrote no valid
/// headers.
pub(super) async fn run(
    command: &str,
    server: &str,
    url: &str,
    timeout: Duration,
) -> Result<BTreeMap<String, String>, HelperError> {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .env("CLAUDE_CODE_MCP_SERVER_NAME", server)
        .env("CLAUDE_CODE_MCP_SERVER_URL", url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = cmd.spawn().map_err(HelperError::Spawn)?;
    // Killed however this ends: done, failed, timed out, or the start abandoned (dropped).
    let _group = KillGroup(child.id().and_then(|p| i32::try_from(p).ok()));
    let mut stdout = child.stdout.take().ok_or(HelperError::NotObject)?;
    let finished = async {
        let mut out = Vec::new();
        (&mut stdout)
            .take(MAX_OUTPUT as u64 + 1)
            .read_to_end(&mut out)
            .await
            .map_err(HelperError::Spawn)?;
        if out.len() > MAX_OUTPUT {
            return Err(HelperError::TooLarge);
        }
        let status = child.wait().await.map_err(HelperError::Spawn)?;
        Ok((status, out))
    };
    let (status, out) = tokio::time::timeout(timeout, finished)
        .await
        .map_err(|_| HelperError::Timeout(timeout))??;
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        return Err(match (status.code(), status.signal()) {
            (Some(code), _) => HelperError::Exit(code),
            (None, Some(sig)) => HelperError::Signal(sig),
            (None, None) => HelperError::Exit(-1),
        });
    }
    parse(&out)
}

/// The helper's process group, sent SIGKILL when dropped: whatever it started goes with it.
struct KillGroup(Option<i32>);

impl Drop for KillGroup {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

/// The helper's stdout as headers: one JSON object of valid header names to string values.
fn parse(out: &[u8]) -> Result<BTreeMap<String, String>, HelperError> {
    let value: serde_json::Value =
        serde_json::from_slice(out).map_err(|_| HelperError::NotObject)?;
    let serde_json::Value::Object(map) = value else {
        return Err(HelperError::NotObject);
    };
    if map.len() > MAX_HEADERS {
        return Err(HelperError::TooMany(map.len()));
    }
    let mut headers = BTreeMap::new();
    for (i, (name, value)) in map.into_iter().enumerate() {
        let n = i + 1;
        let serde_json::Value::String(value) = value else {
            return Err(HelperError::NotString(n));
        };
        HeaderName::try_from(name.as_str()).map_err(|_| HelperError::BadName(n))?;
        if value.len() > MAX_VALUE || HeaderValue::try_from(value.as_str()).is_err() {
            return Err(HelperError::BadValue(n));
        }
        headers.insert(name, value);
    }
    Ok(headers)
}

/// The texts to keep out of messages for these headers: each value, and the part after its
/// scheme (`Bearer <token>`: the token alone too); parts under 4 bytes are left (they would
/// blank ordinary words).
pub(super) fn secret_parts(headers: &BTreeMap<String, String>) -> Vec<String> {
    let mut parts = Vec::new();
    for v in headers.values() {
        let tail = v.split_once(' ').map(|(_, t)| t.trim());
        for part in [Some(v.as_str()), tail].into_iter().flatten() {
            if part.len() >= 4 && !parts.iter().any(|p| p == part) {
                parts.push(part.to_string());
            }
        }
    }
    // Longest first, so a value is replaced whole before a part of it.
    parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    parts
}

/// The headers of one connection to `server` at `url`: `fixed` (the entry's static ones),
/// with those of `helper` (run afresh now, as Claude Code runs it on every connection) over
/// them; the helper's values are registered as secrets for every log line and pushed to
/// `secrets` for the caller's own messages.
///
/// # Errors
/// [`HelperError`], as [`run`].
pub(super) async fn connection_headers(
    fixed: &BTreeMap<String, String>,
    helper: Option<&str>,
    server: &str,
    url: &str,
    secrets: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, HelperError> {
    let Some(helper) = helper else {
        return Ok(fixed.clone());
    };
    let dynamic = run(helper, server, url, HELPER_TIMEOUT).await?;
    for part in secret_parts(&dynamic) {
        crate::log_secrets::register(&part);
        secrets.push(part);
    }
    Ok(merged(fixed, dynamic))
}

/// The entry's static `headers` with the helper's over them: a helper's header replaces a
/// static one of the same name, whatever its case.
pub(super) fn merged(
    fixed: &BTreeMap<String, String>,
    dynamic: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut all: BTreeMap<String, String> = fixed
        .iter()
        .filter(|(k, _)| !dynamic.keys().any(|d| d.eq_ignore_ascii_case(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    all.extend(dynamic);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn helper(command: &str) -> Result<BTreeMap<String, String>, HelperError> {
        run(
            command,
            "docs",
            "https://mcp.example.test/mcp",
            Duration::from_secs(3),
        )
        .await
    }

    #[tokio::test]
    async fn its_json_object_becomes_headers_and_it_sees_the_servers_name_and_url() {
        let got = helper(
            r#"printf '{"Authorization": "Bearer %s", "X-Url": "%s"}' "$CLAUDE_CODE_MCP_SERVER_NAME" "$CLAUDE_CODE_MCP_SERVER_URL""#,
        )
        .await
        .expect("valid output");
        assert_eq!(got["Authorization"], "Bearer docs");
        assert_eq!(got["X-Url"], "https://mcp.example.test/mcp");
    }

    #[tokio::test]
    async fn the_servers_name_and_url_are_data_never_command_text() {
        let d = tempfile::tempdir().expect("tempdir");
        let planted = d.path().join("planted");
        let name = format!(
            "x$(touch {})`touch {}`;touch {}",
            planted.display(),
            planted.display(),
            planted.display()
        );
        let url = format!("http://127.0.0.1:1/mcp?$(touch {})", planted.display());
        let got = run(
            r#"printf '{"X-Name": "%s"}' "$CLAUDE_CODE_MCP_SERVER_NAME""#,
            &name,
            &url,
            Duration::from_secs(3),
        )
        .await
        .expect("valid");
        assert_eq!(got["X-Name"], name);
        assert!(!planted.exists(), "a field became shell text");
    }

    #[tokio::test]
    async fn failures_name_the_cause_and_never_the_output() {
        let secret = "tok-9f1e2d";
        let cases: Vec<(String, &str)> = vec![
            (
                format!("echo '{{\"A\": \"{secret}\"}}'; exit 3"),
                "exited with code 3",
            ),
            (format!("echo '{secret} not json'"), "not a JSON object"),
            (format!("echo '[\"{secret}\"]'"), "not a JSON object"),
            (
                format!("echo '{{\"A\": 1, \"B\": \"{secret}\"}}'"),
                "#1 (in name order) has a value that is not a string",
            ),
            (
                format!("echo '{{\"Bad Name\": \"{secret}\"}}'"),
                "#1 (in name order) has an invalid name",
            ),
            (
                format!("printf '{{\"A\": \"{secret}\\\\n\"}}'"),
                "#1 (in name order) has an invalid value",
            ),
            (format!("echo {secret}; kill -9 $$"), "ended by signal 9"),
            ("head -c 70000 /dev/zero".into(), "more than 65536 bytes"),
        ];
        for (command, want) in cases {
            let err = helper(&command).await.expect_err(&command).to_string();
            assert!(err.contains(want), "{command}: {err}");
            assert!(!err.contains(secret), "{command}: {err}");
        }
        let many: String = (0..=MAX_HEADERS)
            .map(|i| format!("\"H{i}\": \"v\""))
            .collect::<Vec<_>>()
            .join(", ");
        let err = helper(&format!("echo '{{{many}}}'"))
            .await
            .expect_err("too many");
        assert!(err.to_string().contains("set 65 headers"), "{err}");
        let long = "x".repeat(MAX_VALUE + 1);
        let err = helper(&format!("echo '{{\"A\": \"{long}\"}}'"))
            .await
            .expect_err("too long");
        assert!(matches!(err, HelperError::BadValue(1)), "{err}");
    }

    #[tokio::test]
    async fn a_helper_that_hangs_is_stopped_with_its_children() {
        let d = tempfile::tempdir().expect("tempdir");
        let late = d.path().join("late");
        let started = std::time::Instant::now();
        let err = run(
            &format!("(sleep 2; touch {}) & sleep 30", late.display()),
            "s",
            "http://127.0.0.1:1/mcp",
            Duration::from_millis(500),
        )
        .await
        .expect_err("hangs");
        assert!(matches!(err, HelperError::Timeout(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!late.exists(), "a child of the helper outlived the timeout");

        // A start abandoned while the helper runs (its future dropped) stops it all the same.
        let dropped = d.path().join("dropped");
        let abandoned = tokio::time::timeout(
            Duration::from_millis(300),
            run(
                &format!("(sleep 2; touch {}) & sleep 30", dropped.display()),
                "s",
                "http://127.0.0.1:1/mcp",
                Duration::from_secs(20),
            ),
        )
        .await;
        assert!(abandoned.is_err(), "still running when dropped");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!dropped.exists(), "a child of an abandoned helper lived on");
    }

    #[test]
    fn secret_parts_are_the_values_and_their_credentials() {
        let h = BTreeMap::from([
            ("Authorization".to_string(), "Bearer tok-123".to_string()),
            ("X-A".to_string(), "abc".to_string()),
            ("X-Key".to_string(), "k3y-value".to_string()),
        ]);
        assert_eq!(secret_parts(&h), ["Bearer tok-123", "k3y-value", "tok-123"]);
    }

    #[test]
    fn the_helpers_headers_replace_static_ones_of_the_same_name_in_any_case() {
        let fixed = BTreeMap::from([
            ("authorization".to_string(), "Bearer static".to_string()),
            ("X-Team".to_string(), "a".to_string()),
        ]);
        let dynamic = BTreeMap::from([("Authorization".to_string(), "Bearer dyn".to_string())]);
        let all = merged(&fixed, dynamic);
        assert_eq!(
            all,
            BTreeMap::from([
                ("Authorization".to_string(), "Bearer dyn".to_string()),
                ("X-Team".to_string(), "a".to_string()),
            ])
        );
    }
}
