//! The read loops of a sandbox session: the attach stream (stdout frames, stderr) and the
//! socket channel. Each reassembles frames for the [`FrameSink`], logs stderr and keeps its
//! tail, and marks the session dead when its stream ends. Everything they read is untrusted
//! (see `crate::lines` for the frame limit): stderr lines reach the log escaped, cut and
//! rate-limited.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use super::inbound::FrameSink;
use super::limits::{EXIT_CODE_WAIT_MS, STDERR_LINE_MAX};
use crate::container::{Chunk, RuntimeError};
use crate::lines::{FrameEvent, LineAssembler};
use crate::log_limit::{clipped, LogLimit};

/// Serves the container's output (stdout frames, stderr) until it ends, then marks the
/// session dead.
pub(super) async fn read_loop(
    mut output: BoxStream<'static, Result<Chunk, RuntimeError>>,
    sink: FrameSink,
    mut exit_rx: watch::Receiver<Option<i64>>,
) {
    let shared = sink.shared.clone();
    let mut frames = LineAssembler::new(sink.max_frame);
    let mut stderr = LineAssembler::new(STDERR_LINE_MAX);
    let mut events = Vec::new();
    // Stderr lines have a limit of their own: a chatty program must not silence the
    // warnings about frames.
    let stderr_log = LogLimit::new();
    while let Some(chunk) = output.next().await {
        match chunk {
            // Once frames use the socket channel, stdout carries no frames: whatever still
            // arrives there (sandbox code writing to the container's stdout) is stray output,
            // bounded like stderr instead of buffered up to the frame limit.
            Ok(Chunk::Stdout(bytes)) if !shared.engine.on_socket() => {
                frames.push(&bytes, &mut events);
                for ev in events.drain(..) {
                    sink.handle(ev);
                }
            }
            Ok(Chunk::Stdout(bytes) | Chunk::Stderr(bytes)) => {
                stderr.push(&bytes, &mut events);
                for ev in events.drain(..) {
                    let line = match ev {
                        FrameEvent::Line(l) => String::from_utf8_lossy(&l).into_owned(),
                        FrameEvent::TooLong { .. } => "[a very long stderr line was cut]".into(),
                    };
                    if tracing::enabled!(target: "sandbox", tracing::Level::DEBUG) {
                        if let Some(suppressed) = stderr_log.admit() {
                            tracing::debug!(
                                target: "sandbox",
                                suppressed_before = suppressed,
                                "{}",
                                clipped(&line)
                            );
                        }
                    }
                    shared.stderr_tail.push(line);
                }
            }
            Err(err) => {
                tracing::warn!(cause = %err, "sandbox output stream failed");
                break;
            }
        }
    }
    if frames.pending() > 0 {
        tracing::warn!(
            bytes = frames.pending(),
            "sandbox output ended inside a frame"
        );
    }
    let suppressed = stderr_log.flush();
    if suppressed > 0 {
        tracing::debug!(target: "sandbox", suppressed, "stderr lines were left out of the log");
    }
    shared.set_ended();
    let code = tokio::time::timeout(
        Duration::from_millis(EXIT_CODE_WAIT_MS),
        exit_rx.wait_for(|c| c.is_some()),
    )
    .await
    .ok()
    .and_then(|r| r.ok().and_then(|c| *c))
    .filter(|c| *c >= 0);
    shared.mark_dead(code);
}

/// Serves frames from the socket channel. When the sandbox closes it (it died, or hostile code
/// closed it), the session is over: it is marked dead and the next call gets a fresh sandbox.
pub(super) async fn socket_read_loop(mut socket: tokio::net::unix::OwnedReadHalf, sink: FrameSink) {
    let mut frames = LineAssembler::new(sink.max_frame);
    let mut events = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match socket.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                frames.push(&buf[..n], &mut events);
                for ev in events.drain(..) {
                    sink.handle(ev);
                }
            }
            Err(err) => {
                tracing::warn!(cause = %err, "reading the sandbox's frame channel failed");
                break;
            }
        }
    }
    // Give the output stream a moment to end first: it knows the exit code.
    tokio::time::sleep(Duration::from_millis(EXIT_CODE_WAIT_MS)).await;
    if sink.shared.death.borrow().is_none() {
        tracing::warn!("the sandbox closed its frame channel; it will be replaced");
        sink.shared.mark_dead(None);
    }
}
