//! The reader task of a sandbox session: reassembles frames from the container's stdout,
//! answers `call`s through the dispatcher, logs stderr and keeps its tail, and marks the
//! session dead when the output ends. Everything it reads is untrusted (see `frame.rs`).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, watch, Semaphore};

use super::dispatch::{CallContext, Dispatcher};
use super::error::BridgeError;
use super::frame::{FrameEvent, LineAssembler};
use super::protocol::{parse_inbound, Inbound, Outbound, PROTOCOL_VERSION};
use super::session::{
    Shared, EXIT_CODE_WAIT_MS, MAX_IN_FLIGHT_CALLS, STDERR_LINE_MAX, STDERR_TAIL_LINES,
};
use crate::container::Chunk;

/// Serves the container's output until it ends.
pub(super) async fn read_loop(
    mut output: futures::stream::BoxStream<'static, Result<Chunk, crate::container::RuntimeError>>,
    shared: Arc<Shared>,
    writer: mpsc::Sender<Vec<u8>>,
    dispatcher: Dispatcher,
    max_frame: usize,
    mut exit_rx: watch::Receiver<Option<i64>>,
) {
    let mut frames = LineAssembler::new(max_frame);
    let mut stderr = LineAssembler::new(STDERR_LINE_MAX);
    let calls = Arc::new(Semaphore::new(MAX_IN_FLIGHT_CALLS));
    let mut events = Vec::new();
    while let Some(chunk) = output.next().await {
        match chunk {
            Ok(Chunk::Stdout(bytes)) => {
                frames.push(&bytes, &mut events);
                for ev in events.drain(..) {
                    handle_frame(ev, max_frame, &shared, &writer, &dispatcher, &calls);
                }
            }
            Ok(Chunk::Stderr(bytes)) => {
                stderr.push(&bytes, &mut events);
                for ev in events.drain(..) {
                    let line = match ev {
                        FrameEvent::Line(l) => String::from_utf8_lossy(&l).into_owned(),
                        FrameEvent::TooLong { .. } => "[a very long stderr line was cut]".into(),
                    };
                    tracing::debug!(target: "sandbox", "{line}");
                    let mut tail = shared.stderr_tail.lock().expect("stderr tail lock");
                    if tail.len() == STDERR_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line);
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

fn handle_frame(
    event: FrameEvent,
    max_frame: usize,
    shared: &Arc<Shared>,
    writer: &mpsc::Sender<Vec<u8>>,
    dispatcher: &Dispatcher,
    calls: &Arc<Semaphore>,
) {
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
        Ok(Inbound::Ready { v, .. }) => {
            let result = if v == PROTOCOL_VERSION {
                Ok(())
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
        Ok(Inbound::Call {
            id,
            exec,
            method,
            params,
        }) => {
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
                let _ = writer.try_send(reply.to_line());
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
                let _ = writer.try_send(reply.to_line());
                return;
            };
            let dispatcher = dispatcher.clone();
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
                let _ = writer.send(reply.to_line()).await;
                drop(permit);
            });
        }
        Err(msg) => {
            tracing::warn!("{msg}");
            shared.fail_running(BridgeError::Protocol(msg));
        }
    }
}
