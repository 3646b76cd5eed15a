//! One frame from the sandbox, whichever channel brought it: `ready` answers the boot
//! handshake, `started` and `result` advance the running exec, `output` becomes its progress,
//! `call` goes to [`Calls`], the snapshot frames to `keeping.rs`, `preloaded` to `preload.rs`.
//! A frame over the limit or one that does not parse fails the running exec. A frame nobody
//! asked for (another exec's, a second `ready`, a snapshot chunk between saves) is dropped
//! and counted; the count goes with the next result. Log lines go through the session's
//! rate limit, sandbox text in them escaped and cut.

use std::sync::Arc;

use super::calls::Calls;
use super::json_cost;
use super::limits::SessionLimits;
use super::state::Shared;
use crate::lines::FrameEvent;
use crate::log_limit::clipped;
use crate::sandbox::error::ProtocolError;
use crate::sandbox::protocol::{is_call, parse_inbound, Inbound, ReadyFrame, PROTOCOL_VERSION};

/// What every frame handler needs; cloned into each read loop.
#[derive(Clone)]
pub(super) struct FrameSink {
    pub(super) shared: Arc<Shared>,
    pub(super) max_frame: usize,
    calls: Calls,
}

impl FrameSink {
    /// A sink for one session.
    pub(super) fn new(shared: Arc<Shared>, calls: Calls, limits: SessionLimits) -> Self {
        FrameSink {
            shared,
            max_frame: limits.max_frame,
            calls,
        }
    }

    /// Handles one event of the frame assembler.
    pub(super) fn handle(&self, event: FrameEvent) {
        let shared = &self.shared;
        let line = match event {
            FrameEvent::Line(line) => line,
            FrameEvent::TooLong { .. } => {
                shared.drop_frame();
                let max_frame = self.max_frame;
                shared.fail_running(ProtocolError::FrameTooLong { max_frame }.into());
                return;
            }
        };
        if is_call(&line) {
            if let Err(msg) = self.calls.handle_line(&line, shared) {
                crate::limited!(shared.log, tracing::Level::WARN, "{msg}");
                shared.fail_running(ProtocolError::from(msg).into());
            }
            return;
        }
        let parsed = parse_inbound(&line);
        // The frame holds what it needs: the line goes before any of its JSON is read into a
        // value (a `ready` frame's posture).
        drop(line);
        match parsed {
            Ok(Inbound::Ready(frame)) => ready(frame, shared, self.max_frame),
            Ok(Inbound::Started { id }) => {
                let mut running = shared.running.lock().expect("running lock");
                match running.as_mut().filter(|r| r.id == id && !r.started) {
                    Some(r) => r.started = true,
                    None => shared.drop_stray(id),
                }
            }
            Ok(Inbound::Result(mut frame)) => {
                let mut running = shared.running.lock().expect("running lock");
                match running.take() {
                    Some(r) if r.id == frame.id => {
                        let files = shared.files.lock().expect("files lock").take();
                        if let Some(files) = files.filter(|f| f.exec() == frame.id) {
                            frame.files = files.finish();
                        }
                        frame.dropped_frames = shared.take_dropped();
                        let _ = r.done.send(Ok(frame));
                    }
                    other => {
                        *running = other;
                        shared.drop_frame();
                        crate::limited!(
                            shared.log,
                            tracing::Level::WARN,
                            id = frame.id,
                            "ignored a result for an exec that is not running"
                        );
                    }
                }
            }
            // Taken by `handle_line` above.
            Ok(Inbound::Call(_)) => shared.drop_frame(),
            Ok(Inbound::File(chunk)) => {
                let mut files = shared.files.lock().expect("files lock");
                match files.as_mut().filter(|f| f.exec() == chunk.exec) {
                    Some(cell) => cell.chunk(chunk),
                    None => {
                        shared.drop_frame();
                        crate::limited!(
                            shared.log,
                            tracing::Level::DEBUG,
                            exec = chunk.exec,
                            "ignored a file chunk for an exec that is not running"
                        );
                    }
                }
            }
            Ok(Inbound::Output(frame)) => {
                let mut running = shared.running.lock().expect("running lock");
                match running
                    .as_mut()
                    .filter(|r| r.id == frame.id)
                    .and_then(|r| r.progress.as_mut())
                {
                    Some(p) => p.on_output(&frame),
                    None => shared.drop_stray(frame.id),
                }
            }
            Ok(Inbound::Snapshot { id, data }) => {
                if !shared.keeping.chunk(id, &data) {
                    shared.drop_frame();
                }
            }
            Ok(Inbound::Saved(frame)) => {
                if !shared.keeping.saved(frame) {
                    shared.drop_frame();
                }
            }
            Ok(Inbound::Restored(frame)) => {
                if !shared.keeping.restored(frame) {
                    shared.drop_frame();
                }
            }
            Ok(Inbound::Preloaded(frame)) => {
                if !shared.preload.answered(&frame) {
                    shared.drop_frame();
                }
            }
            Err(msg) => {
                crate::limited!(shared.log, tracing::Level::WARN, "{msg}");
                shared.fail_running(ProtocolError::from(msg).into());
            }
        }
    }
}

/// Answers the boot handshake with the posture report, or why the entrypoint cannot serve.
/// The report is read into a value only here, and only when that takes at most `max_frame`.
fn ready(frame: ReadyFrame, shared: &Shared, max_frame: usize) {
    // Only the first `ready` answers the handshake; sandbox code can forge more.
    let Some(tx) = shared.ready.lock().expect("ready lock").take() else {
        shared.drop_frame();
        return;
    };
    let ReadyFrame {
        v,
        channel,
        channel_error,
        posture,
        ..
    } = frame;
    match (channel.as_deref(), channel_error) {
        (_, Some(why)) => tracing::info!(
            "frames stay on stdio: the socket channel failed: {}",
            clipped(&why)
        ),
        (Some(ch), None) => tracing::debug!(channel = %clipped(ch), "sandbox ready"),
        _ => {}
    }
    let result = if v != PROTOCOL_VERSION {
        Err(format!(
            "entrypoint speaks protocol {v}, the bridge {PROTOCOL_VERSION}"
        ))
    } else {
        match posture {
            None => Ok(serde_json::Value::Null),
            Some(p) if json_cost::scan(p.text().as_bytes()).parsed() > max_frame => Err(format!(
                "the entrypoint's posture report ({} bytes) is too large to read within \
                 MCP_BRIDGE_MAX_FRAME ({max_frame} bytes)",
                p.text().len()
            )),
            Some(p) => serde_json::from_str(p.text())
                .map_err(|e| format!("the entrypoint's posture report is malformed: {e}")),
        }
    };
    let _ = tx.send(result);
}
