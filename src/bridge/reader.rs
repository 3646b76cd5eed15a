//! The reader task of a sandbox session: reassembles frames from the container's stdout,
//! answers `call`s through the dispatcher, logs stderr and keeps its tail, and marks the
//! session dead when the output ends. Everything it reads is untrusted (see `crate::lines`).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, watch, Semaphore};

use super::dispatch::{CallContext, Dispatcher};
use super::error::BridgeError;
use super::protocol::{parse_inbound, CallFrame, Inbound, Outbound, ReadyFrame, PROTOCOL_VERSION};
use super::session::{
    Outgoing, SessionLimits, Shared, EXIT_CODE_WAIT_MS, MAX_IN_FLIGHT_CALLS, STDERR_LINE_MAX,
};
use crate::container::Chunk;
use crate::lines::{FrameEvent, LineAssembler};

/// What every frame handler needs; cloned into each read loop.
#[derive(Clone)]
pub(super) struct FrameSink {
    pub(super) shared: Arc<Shared>,
    pub(super) writer: mpsc::Sender<Outgoing>,
    pub(super) dispatcher: Dispatcher,
    pub(super) max_frame: usize,
    /// In-flight sandbox requests, shared by both channels.
    pub(super) calls: Arc<Semaphore>,
    /// Bytes of replies queued but not yet written to the sandbox (one permit per byte).
    pub(super) pending: Arc<Semaphore>,
    pub(super) max_pending: usize,
}

impl FrameSink {
    /// A sink for one session.
    pub(super) fn new(
        shared: Arc<Shared>,
        writer: mpsc::Sender<Outgoing>,
        dispatcher: Dispatcher,
        limits: SessionLimits,
    ) -> Self {
        FrameSink {
            shared,
            writer,
            dispatcher,
            max_frame: limits.max_frame,
            calls: Arc::new(Semaphore::new(MAX_IN_FLIGHT_CALLS)),
            pending: Arc::new(Semaphore::new(limits.max_pending_results)),
            max_pending: limits.max_pending_results,
        }
    }
}

/// Serves the container's output (stdout frames, stderr) until it ends, then marks the
/// session dead.
pub(super) async fn read_loop(
    mut output: futures::stream::BoxStream<'static, Result<Chunk, crate::container::RuntimeError>>,
    sink: FrameSink,
    mut exit_rx: watch::Receiver<Option<i64>>,
) {
    let shared = sink.shared.clone();
    let mut frames = LineAssembler::new(sink.max_frame);
    let mut stderr = LineAssembler::new(STDERR_LINE_MAX);
    let mut events = Vec::new();
    while let Some(chunk) = output.next().await {
        match chunk {
            // Once frames use the socket channel, stdout carries no frames: whatever still
            // arrives there (sandbox code writing to the container's stdout) is stray output,
            // bounded like stderr instead of buffered up to the frame limit.
            Ok(Chunk::Stdout(bytes)) if !shared.engine.on_socket() => {
                frames.push(&bytes, &mut events);
                for ev in events.drain(..) {
                    handle_frame(ev, &sink);
                }
            }
            Ok(Chunk::Stdout(bytes) | Chunk::Stderr(bytes)) => {
                stderr.push(&bytes, &mut events);
                for ev in events.drain(..) {
                    let line = match ev {
                        FrameEvent::Line(l) => String::from_utf8_lossy(&l).into_owned(),
                        FrameEvent::TooLong { .. } => "[a very long stderr line was cut]".into(),
                    };
                    tracing::debug!(target: "sandbox", "{line}");
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
    shared
        .ended
        .store(true, std::sync::atomic::Ordering::SeqCst);
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
                    handle_frame(ev, &sink);
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

fn handle_frame(event: FrameEvent, sink: &FrameSink) {
    let FrameSink {
        shared,
        writer,
        dispatcher,
        max_frame,
        calls,
        ..
    } = sink;
    let max_frame = *max_frame;
    let line = match event {
        FrameEvent::Line(line) => line,
        FrameEvent::TooLong { .. } => {
            shared.fail_running(BridgeError::Protocol(format!(
                "the sandbox sent a frame larger than MCP_BRIDGE_MAX_FRAME ({max_frame} bytes); it was dropped"
            )));
            return;
        }
    };
    match parse_inbound(&line) {
        Ok(Inbound::Ready(ReadyFrame {
            v,
            channel,
            channel_error,
            posture,
            ..
        })) => {
            match (channel.as_deref(), channel_error) {
                (_, Some(why)) => {
                    tracing::info!("frames stay on stdio: the socket channel failed: {why}")
                }
                (Some(ch), None) => tracing::debug!(channel = ch, "sandbox ready"),
                _ => {}
            }
            let result = if v == PROTOCOL_VERSION {
                Ok(posture.unwrap_or_default())
            } else {
                Err(format!(
                    "entrypoint speaks protocol {v}, the bridge {PROTOCOL_VERSION}"
                ))
            };
            if let Some(tx) = shared.ready.lock().expect("ready lock").take() {
                let _ = tx.send(result);
            }
        }
        Ok(Inbound::Started { id }) => {
            if let Some(r) = shared
                .running
                .lock()
                .expect("running lock")
                .as_mut()
                .filter(|r| r.id == id)
            {
                r.started = true;
            }
        }
        Ok(Inbound::Result(frame)) => {
            let mut running = shared.running.lock().expect("running lock");
            match running.take() {
                Some(r) if r.id == frame.id => {
                    let _ = r.done.send(Ok(frame));
                }
                other => {
                    *running = other;
                    tracing::warn!(
                        id = frame.id,
                        "ignored a result for an exec that is not running"
                    );
                }
            }
        }
        Ok(Inbound::Call(CallFrame {
            id,
            exec,
            method,
            params,
        })) => {
            let servers = {
                let running = shared.running.lock().expect("running lock");
                running
                    .as_ref()
                    .filter(|r| r.id == exec)
                    .map(|r| (r.servers.clone(), r.deadline))
            };
            let writer = writer.clone();
            let Some((servers, deadline)) = servers else {
                let reply = Outbound::Reply {
                    id,
                    ok: false,
                    value: serde_json::Value::Null,
                    error: Some("no run_python call is in progress".into()),
                    kind: Some("bad_request"),
                };
                let _ = writer.try_send(reply.to_line().into());
                return;
            };
            let Ok(permit) = calls.clone().try_acquire_owned() else {
                let msg = format!("too many host requests in flight (limit {MAX_IN_FLIGHT_CALLS})");
                let reply = Outbound::Reply {
                    id,
                    ok: false,
                    value: serde_json::Value::Null,
                    error: Some(msg),
                    kind: Some("bad_request"),
                };
                let _ = writer.try_send(reply.to_line().into());
                return;
            };
            let dispatcher = dispatcher.clone();
            let (pending, max_pending) = (sink.pending.clone(), sink.max_pending);
            tokio::spawn(async move {
                let ctx = CallContext {
                    exec_id: exec,
                    servers,
                    deadline,
                };
                let reply = match dispatcher.handle(&ctx, &method, params).await {
                    Ok(value) => Outbound::Reply {
                        id,
                        ok: true,
                        value,
                        error: None,
                        kind: None,
                    },
                    Err(e) => Outbound::Reply {
                        id,
                        ok: false,
                        value: serde_json::Value::Null,
                        error: Some(e.message),
                        kind: Some(e.kind),
                    },
                };
                let out = budgeted(reply, id, &pending, max_pending);
                let _ = writer.send(out).await;
                drop(permit);
            });
        }
        Err(msg) => {
            tracing::warn!("{msg}");
            shared.fail_running(BridgeError::Protocol(msg));
        }
    }
}

/// The reply as a queued frame holding its share of the reply budget, or, when the sandbox
/// has left too much unread (or the reply alone is over the budget), an error reply instead:
/// a sandbox that asks for results and never reads them cannot make the bridge hold them all.
fn budgeted(reply: Outbound<'_>, id: u64, pending: &Arc<Semaphore>, max: usize) -> Outgoing {
    let line = reply.to_line();
    let share = u32::try_from(line.len()).unwrap_or(u32::MAX);
    let held = (line.len() <= max)
        .then(|| pending.clone().try_acquire_many_owned(share).ok())
        .flatten();
    if let Some(held) = held {
        return Outgoing {
            line,
            _budget: Some(held),
        };
    }
    let message = if line.len() > max {
        format!(
            "this result ({} bytes) was dropped: it is larger than MCP_BRIDGE_MAX_PENDING_RESULTS \
             ({max} bytes)",
            line.len()
        )
    } else {
        format!(
            "this result ({} bytes) was dropped: {} bytes of earlier results are still waiting \
             for the sandbox to read them, and MCP_BRIDGE_MAX_PENDING_RESULTS is {max} bytes",
            line.len(),
            max.saturating_sub(pending.available_permits())
        )
    };
    Outbound::Reply {
        id,
        ok: false,
        value: serde_json::Value::Null,
        error: Some(message),
        kind: Some("bad_request"),
    }
    .to_line()
    .into()
}
