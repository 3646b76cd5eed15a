//! [`Rounds`]: approval for 2026-07-28 clients (SEP-2322). The run starts in the background
//! with a [`RoundsAsker`]; the handler waits for the run's end (the normal result) or its next
//! question. A question becomes an input-required result: the elicitation form in
//! `inputRequests`, and a `requestState` sealed for this run, question, caller and arguments
//! (`state.rs`); the run waits in [`Parked`] meanwhile. The client's retry (same caller, same
//! arguments, `inputResponses`, `requestState`) is checked, its answer handed to the waiting call, and
//! the handler waits again. Progress notifications reach the client only in the first round:
//! later rounds have no progress token of the first request, and theirs are dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequest, ElicitResult,
    InputRequest, InputRequiredResult,
};
use rmcp::ErrorData;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::parked::{Parked, ParkedRun, Waiting, NOT_VERIFIED};
use super::state::{StateSeal, Ticket};
use crate::calls::{Answer, Asker, Question, Reply, ServerQuestion};
use crate::ids::random_id;

/// The key of the approval form in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "approval";
/// The key of a downstream server's question relayed, in `inputRequests` / `inputResponses`.
pub const RELAY_KEY: &str = "question";

/// What a run asks.
enum Asking {
    /// Approval of calls.
    Approval(Question, oneshot::Sender<Answer>),
    /// A downstream server's question, relayed (`run`: the asker's own id for the ticket).
    Relay(ServerQuestion, String, oneshot::Sender<Reply>),
}

/// One question of a run, on its way to the handler.
pub struct Asked {
    asking: Asking,
    id: String,
    deadline: Instant,
}

/// The run's asker: hands each question to whichever handler drives the run.
pub struct RoundsAsker {
    tx: mpsc::Sender<Asked>,
    /// Names the run in relayed questions' tickets (their question carries no run id).
    id: String,
}

#[async_trait::async_trait]
impl Asker for RoundsAsker {
    async fn ask(&self, question: Question, deadline: Instant) -> Answer {
        let (reply, rx) = oneshot::channel();
        let asked = Asked {
            asking: Asking::Approval(question, reply),
            id: random_id(),
            deadline,
        };
        if self.tx.send(asked).await.is_err() {
            return Answer::Unavailable("the client's request is gone".into());
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Answer::Unavailable("the question was dropped unanswered".into()),
            Err(_) => Answer::TimedOut,
        }
    }

    async fn relay(&self, question: ServerQuestion, deadline: Instant) -> Reply {
        let (reply, rx) = oneshot::channel();
        let asked = Asked {
            asking: Asking::Relay(question, self.id.clone(), reply),
            id: random_id(),
            deadline,
        };
        if self.tx.send(asked).await.is_err() {
            return Reply::Unavailable("the client's request is gone".into());
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Reply::Unavailable("the question was dropped unanswered".into()),
            Err(_) => Reply::TimedOut,
        }
    }
}

/// A run going on in the background.
pub struct InFlight {
    asks: mpsc::Receiver<Asked>,
    done: JoinHandle<Result<CallToolResult, ErrorData>>,
    /// Stops the run when the run is dropped (expired, evicted, its client gone).
    _stop: DropGuard,
}

/// The 2026-07-28 face: the seal and the waiting runs. One per server handler.
pub struct Rounds {
    seal: StateSeal,
    parked: Arc<Parked<InFlight>>,
}

impl Default for Rounds {
    fn default() -> Self {
        Rounds {
            seal: StateSeal::new(),
            parked: Arc::new(Parked::default()),
        }
    }
}

impl Rounds {
    /// Starts a run for `caller` (the binding of who asked: [`crate::server::router::Who::binding`],
    /// empty under stdio): `run` gets the asker and the run's stop token and returns its
    /// result.
    pub async fn start<F, Fut>(
        &self,
        caller: &str,
        links: bool,
        arguments: Option<&rmcp::model::JsonObject>,
        run: F,
        ct: CancellationToken,
    ) -> Result<CallToolResponse, ErrorData>
    where
        F: FnOnce(Arc<dyn Asker>, CancellationToken) -> Fut,
        Fut: std::future::Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let (tx, asks) = mpsc::channel(1);
        let stop = CancellationToken::new();
        let asker = RoundsAsker {
            tx,
            id: random_id(),
        };
        let done = tokio::spawn(run(Arc::new(asker), stop.clone()));
        let flight = InFlight {
            asks,
            done,
            _stop: stop.drop_guard(),
        };
        self.drive(flight, caller, links, arguments, ct).await
    }

    /// A retry from `caller`: checks its `requestState`, hands its answer to the waiting run,
    /// and drives the run on. A state that does not verify (another caller's included), or
    /// whose question is not waiting, is an invalid-params error (the request is not one this
    /// server can continue).
    pub async fn resume(
        &self,
        caller: &str,
        links: bool,
        request: &CallToolRequestParams,
        ct: CancellationToken,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.as_ref();
        let Some(state) = request.request_state.as_deref() else {
            return Err(ErrorData::invalid_params(
                "inputResponses without a requestState: nothing asked for them",
                None,
            ));
        };
        let Some(Ticket { run, question }) = self.seal.open(state, caller, arguments) else {
            return Err(ErrorData::invalid_params(NOT_VERIFIED, None));
        };
        let parked = self
            .parked
            .take(&run, &question, caller)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let response = |key: &str| {
            request
                .input_responses
                .as_ref()
                .and_then(|r| r.get(key))
                .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
        };
        match parked.reply {
            Waiting::Approval(tx) => {
                let answer = response(INPUT_KEY).map_or(Answer::Declined, |r| {
                    super::answer(r.action, r.content.as_ref())
                });
                let _ = tx.send(answer);
            }
            Waiting::Relay(tx) => {
                let reply = response(RELAY_KEY).map_or(Reply::Decline, |r| {
                    super::elicit::reply_of(r.action, r.content)
                });
                let _ = tx.send(reply);
            }
        }
        self.drive(parked.run, caller, links, arguments, ct).await
    }

    /// Waits for the run's end or its next question (parked, and returned as input required).
    /// `links`: this request's client declared URL-mode elicitation.
    async fn drive(
        &self,
        mut flight: InFlight,
        caller: &str,
        links: bool,
        arguments: Option<&rmcp::model::JsonObject>,
        ct: CancellationToken,
    ) -> Result<CallToolResponse, ErrorData> {
        loop {
            let asked = tokio::select! {
                biased;
                // The client cancelled this request: dropping the run stops it.
                () = ct.cancelled() => {
                    return Err(ErrorData::internal_error("the request was cancelled", None))
                }
                done = &mut flight.done => {
                    return match done {
                        Ok(result) => result.map(Into::into),
                        Err(e) => Err(ErrorData::internal_error(format!("the run failed: {e}"), None)),
                    };
                }
                Some(asked) = flight.asks.recv() => asked,
            };
            let Asked {
                asking,
                id,
                deadline,
            } = asked;
            let mut requests = BTreeMap::new();
            let (run_id, reply) = match asking {
                Asking::Approval(question, reply) => {
                    let form = ElicitRequest::new(super::form(&question));
                    requests.insert(INPUT_KEY.to_string(), InputRequest::Elicitation(form));
                    (question.run, Waiting::Approval(reply))
                }
                Asking::Relay(question, run, reply) => {
                    // A link in URL mode where this request's client declared it, else in a form.
                    let Some(params) = super::elicit::request(&question, links) else {
                        let why = "the form could not be put to the client".to_string();
                        Waiting::Relay(reply).unavailable(why);
                        continue;
                    };
                    let form = ElicitRequest::new(params);
                    requests.insert(RELAY_KEY.to_string(), InputRequest::Elicitation(form));
                    (run, Waiting::Relay(reply))
                }
            };
            let ttl = deadline.saturating_duration_since(Instant::now());
            let ticket = Ticket {
                run: run_id.clone(),
                question: id.clone(),
            };
            let state = self.seal.seal(&ticket, caller, arguments, ttl);
            let parked = ParkedRun {
                run: flight,
                run_id,
                question: id,
                caller: caller.to_string(),
                reply,
                expires: deadline,
            };
            match self.parked.park(parked) {
                Ok(()) => {
                    let result = InputRequiredResult::new(Some(requests), Some(state));
                    return Ok(CallToolResponse::InputRequired(result));
                }
                Err((back, full)) => {
                    back.reply.unavailable(full.reason());
                    flight = back.run;
                }
            }
        }
    }
}
