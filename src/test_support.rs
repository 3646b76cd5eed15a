//! Helpers the unit tests of several modules share (built for tests only): the log lines a test
//! writes, and one HTTP request read off a socket.

use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;

/// The log lines written while a test runs on this thread ([`capture_logs`]).
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("log lock").clone()).expect("utf-8")
    }
}

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures this thread's log lines (debug and up, no colours) until the guard is dropped.
pub fn capture_logs() -> (Log, tracing::subscriber::DefaultGuard) {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    (log, tracing::subscriber::set_default(subscriber))
}

/// Reads one HTTP request off `conn`: its head, and a body of its `content-length` (none
/// without one). Returns `(head and body as text, where the body starts, its length)`.
pub async fn read_http_request(conn: &mut tokio::net::TcpStream) -> (String, usize, usize) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).await.expect("read");
        assert!(n > 0, "the request ended early");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length = text[..end]
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        if got.len() >= end + 4 + length {
            return (text, end + 4, length);
        }
    }
}
