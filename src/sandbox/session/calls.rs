//! `call` frames: sandbox code asking the host for something. Each is checked against the
//! running exec, the in-flight cap, the frame limit and the request budget (what the `call`
//! frames being handled hold), handled by the dispatcher on a task of its own (on the bridge's
//! task tracker, ended with the session), and its reply queued
//! within the reply budget. Both budgets are `MCP_BRIDGE_MAX_PENDING_RESULTS` bytes. A request
//! is charged what its parameters take once read (`json_cost.rs`), counted before they are
//! read, not the length of their text.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::json_cost;
use super::limits::{SessionLimits, MAX_IN_FLIGHT_CALLS, MAX_QUEUED_CALLS};
use super::state::Shared;
use super::writer::Outgoing;
use crate::calls::ErrorKind;
use crate::calls::{CallContext, Dispatcher};
use crate::sandbox::protocol::{call_id, parse_call, CallFrame, FrameError, Outbound};

/// Where a session's `call` frames go: answered by `dispatcher`, each on a task of `tracker`
/// (the bridge's, which shutdown waits for).
#[derive(Clone)]
pub struct CallRoute {
    /// The one place every sandbox request passes.
    pub dispatcher: Dispatcher,
    /// Where the request tasks are spawned.
    pub tracker: TaskTracker,
}

/// What answering `call` frames needs; shared by both read loops.
#[derive(Clone)]
pub(super) struct Calls {
    writer: mpsc::Sender<Outgoing>,
    dispatcher: Dispatcher,
    tracker: TaskTracker,
    /// Cancelled when the session ends: its requests' answers have nowhere to go.
    ended: CancellationToken,
    /// In-flight sandbox requests, shared by both channels.
    in_flight: Arc<Semaphore>,
    /// Requests waiting for room in flight (a fan-out past the cap waits, by the run's
    /// deadline, rather than failing); past [`MAX_QUEUED_CALLS`] one is refused.
    queued: Arc<Semaphore>,
    /// Bytes of replies queued but not yet written to the sandbox (one permit per byte).
    pending: Arc<Semaphore>,
    /// Bytes of the `call` frames being handled (one permit per byte), within the same
    /// budget: a request's parameters are held until its reply is made.
    requests: Arc<Semaphore>,
    max_pending: usize,
    /// `MCP_BRIDGE_MAX_FRAME`: no one request may hold more.
    max_frame: usize,
}

impl Calls {
    /// Calls answered through `route`, their replies queued on `writer`, until `ended`.
    pub(super) fn new(
        writer: mpsc::Sender<Outgoing>,
        route: CallRoute,
        limits: SessionLimits,
        ended: CancellationToken,
    ) -> Self {
        Calls {
            writer,
            dispatcher: route.dispatcher,
            tracker: route.tracker,
            ended,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT_CALLS)),
            queued: Arc::new(Semaphore::new(MAX_QUEUED_CALLS)),
            pending: Arc::new(Semaphore::new(limits.max_pending_results)),
            requests: Arc::new(Semaphore::new(limits.max_pending_results)),
            max_pending: limits.max_pending_results,
            max_frame: limits.max_frame,
        }
    }

    /// Answers one `call` line: at once when it is refused, else from a task of its own. What
    /// the line takes read (`json_cost.rs`) is charged before it is read: a request over the
    /// frame limit or the budget is refused having read only its `id`.
    ///
    /// # Errors
    /// The message for a line that is not a well-formed `call` frame.
    pub(super) fn handle_line(&self, line: &[u8], shared: &Shared) -> Result<(), FrameError> {
        let cost = json_cost::scan(line);
        let held = cost.held();
        let refuse_unread = |message: String| match call_id(line) {
            Some(id) => self.refuse(id, message, shared),
            None => shared.drop_frame(),
        };
        if held > self.max_frame {
            refuse_unread(format!(
                "this request was refused: its {} bytes of JSON ({} values) would take about \
                 {held} bytes once read, more than MCP_BRIDGE_MAX_FRAME ({} bytes)",
                cost.text,
                cost.elements + cost.entries + 1,
                self.max_frame
            ));
            return Ok(());
        }
        let share = u32::try_from(held).unwrap_or(u32::MAX);
        let Ok(request) = self.requests.clone().try_acquire_many_owned(share) else {
            refuse_unread(format!(
                "this request (about {held} bytes once read) was refused: host requests in \
                 flight would hold more than MCP_BRIDGE_MAX_PENDING_RESULTS ({} bytes)",
                self.max_pending
            ));
            return Ok(());
        };
        self.handle(parse_call(line)?, request, shared);
        Ok(())
    }

    /// A `bad_request` reply to call `id`; dropped (and counted) when the write queue is full:
    /// the sandbox is not reading its replies.
    fn refuse(&self, id: u64, message: String, shared: &Shared) {
        if self
            .writer
            .try_send(refusal(id, message).to_line().into())
            .is_err()
        {
            shared.drop_frame();
        }
    }

    /// Answers a `call` frame whose cost `request` holds.
    fn handle(&self, frame: CallFrame, request: OwnedSemaphorePermit, shared: &Shared) {
        let CallFrame {
            id,
            exec,
            method,
            params,
        } = frame;
        let servers = {
            let running = shared.running.lock().expect("running lock");
            running
                .as_ref()
                .filter(|r| r.id == exec)
                .map(|r| (r.servers.clone(), r.deadline, r.scope.clone()))
        };
        let Some((servers, deadline, run)) = servers else {
            return self.refuse(id, "no run_python call is in progress".into(), shared);
        };
        // Room in flight now, or a place in the queue for it; neither: refused.
        let room = match self.in_flight.clone().try_acquire_owned() {
            Ok(permit) => Room::Now(permit),
            Err(_) => match self.queued.clone().try_acquire_owned() {
                Ok(place) => Room::Queued(place),
                Err(_) => {
                    return self.refuse(
                        id,
                        format!(
                            "too many host requests in flight and waiting (limits \
                             {MAX_IN_FLIGHT_CALLS} and {MAX_QUEUED_CALLS})"
                        ),
                        shared,
                    )
                }
            },
        };
        let in_flight = self.in_flight.clone();
        let writer = self.writer.clone();
        let dispatcher = self.dispatcher.clone();
        let (pending, max_pending) = (self.pending.clone(), self.max_pending);
        let task = async move {
            let ctx = CallContext {
                servers,
                deadline,
                run,
            };
            let (permit, waited) = match room {
                Room::Now(permit) => (Ok(permit), None),
                Room::Queued(place) => {
                    let got = tokio::time::timeout_at(deadline, in_flight.acquire_owned()).await;
                    (
                        got.map_err(|_| ()).and_then(|r| r.map_err(|_| ())),
                        Some(place),
                    )
                }
            };
            drop(waited);
            let outcome = match permit {
                Ok(permit) => Some((dispatcher.handle(&ctx, &method, params).await, permit)),
                Err(()) => None,
            };
            let (outcome, permit) = match outcome {
                Some((outcome, permit)) => (outcome, Some(permit)),
                None => (
                    Err(crate::calls::CallError::bad_request(format!(
                        "no room among the {MAX_IN_FLIGHT_CALLS} host requests in flight before \
                         the run's deadline"
                    ))),
                    None,
                ),
            };
            let reply = match outcome {
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
                    value: Value::Null,
                    error: Some(e.message),
                    kind: Some(e.kind),
                },
            };
            let out = budgeted(reply, id, &pending, max_pending);
            // The request's bytes are counted until its reply (maybe its echo) is a line.
            drop(request);
            let _ = writer.send(out).await;
            drop(permit);
        };
        let ended = self.ended.clone();
        let task = async move {
            tokio::select! {
                _ = ended.cancelled() => {}
                _ = task => {}
            }
        };
        self.tracker.spawn(task.in_current_span());
    }
}

/// Where a request stands when it arrives: in flight at once, or waiting for room.
enum Room {
    Now(tokio::sync::OwnedSemaphorePermit),
    Queued(tokio::sync::OwnedSemaphorePermit),
}

/// A `bad_request` reply to call `id`.
fn refusal(id: u64, message: String) -> Outbound<'static> {
    Outbound::Reply {
        id,
        ok: false,
        value: Value::Null,
        error: Some(message),
        kind: Some(ErrorKind::BadRequest),
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
    refusal(id, message).to_line().into()
}
