//! Questions from a downstream server relayed to the user: the bridge's own MCP client
//! ([`BridgeClient`]) declares elicitation (form and URL) in every `initialize`, and a server's
//! `elicitation/create` goes to the run whose call is in flight on that connection
//! ([`Flights`]): checked (`question.rs`), asked through the run's
//! [`Asker`](crate::calls::Asker), one at a time per run, by `MCP_BRIDGE_QUESTION_TIMEOUT`
//! (the wait does not count against the run's timeout: `PersonWaits`); the answer checked against the form before it goes back.
//! Nobody to ask, or calls of more than one client in flight (whose question it is cannot be
//! told): declined at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation,
    UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};
use tokio::time::Instant;

use super::question;
use crate::calls::{QuestionKind, Reply, RunScope};
use crate::log_limit::LogLimit;
use crate::shown::Shown;

/// One call in flight on a connection.
struct Flight {
    id: u64,
    run: Arc<RunScope>,
}

/// The calls in flight on one server (all its connections over time): whom a question is for.
#[derive(Default)]
pub struct Flights {
    next: AtomicU64,
    calls: Mutex<Vec<Flight>>,
}

/// A call's place in [`Flights`], given up when dropped.
pub struct InFlight {
    flights: Arc<Flights>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut calls = self.flights.calls.lock().expect("flights lock");
        calls.retain(|f| f.id != self.id);
    }
}

impl Flights {
    /// Records a call of `run` until the guard is dropped.
    pub fn enter(self: &Arc<Self>, run: Arc<RunScope>) -> InFlight {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let flight = Flight { id, run };
        self.calls.lock().expect("flights lock").push(flight);
        InFlight {
            flights: self.clone(),
            id,
        }
    }

    /// The run a question is for: the oldest call's in flight, when every call in flight comes
    /// from the same client.
    ///
    /// # Errors
    /// Why nobody can be asked.
    fn route(&self) -> Result<Arc<RunScope>, &'static str> {
        let calls = self.calls.lock().expect("flights lock");
        let Some(first) = calls.first() else {
            return Err("no call of this server is in flight");
        };
        if calls.iter().any(|f| f.run.caller != first.run.caller) {
            return Err("calls of more than one client are in flight on this server");
        }
        Ok(first.run.clone())
    }
}

/// Link questions of a server's accepted and not yet said done, kept at most: an older one
/// is forgotten (its `notifications/elicitation/complete` is then dropped).
const MAX_OPEN_LINKS: usize = 16;

/// A link question the user's client accepted: the server's id for it, the id the client
/// was given (the bridge's own, so a server cannot name another's question), whose run.
struct OpenLink {
    theirs: String,
    ours: String,
    run: Arc<RunScope>,
}

/// The bridge's MCP client on one server connection.
pub struct BridgeClient {
    server: String,
    flights: Arc<Flights>,
    timeout: Duration,
    /// Lines a server's questions cause, bounded (a flood of questions writes a few dozen).
    log: LogLimit,
    /// Link questions accepted, awaiting the server's word that they are done.
    links: Mutex<std::collections::VecDeque<OpenLink>>,
}

impl BridgeClient {
    /// A client for server `server` routing its questions through `flights`, each waiting at
    /// most `timeout` for the user.
    pub fn new(server: &str, flights: Arc<Flights>, timeout: Duration) -> Self {
        BridgeClient {
            server: server.to_string(),
            flights,
            timeout,
            log: LogLimit::new(),
            links: Mutex::default(),
        }
    }

    /// Keeps `link` until the server says it is done (at most [`MAX_OPEN_LINKS`]).
    fn keep_link(&self, link: OpenLink) {
        let mut links = self.links.lock().expect("links lock");
        if links.len() >= MAX_OPEN_LINKS {
            links.pop_front();
        }
        links.push_back(link);
    }

    /// The open link the server calls `theirs`, taken out: each is said done once.
    fn take_link(&self, theirs: &str) -> Option<OpenLink> {
        let mut links = self.links.lock().expect("links lock");
        let at = links.iter().position(|l| l.theirs == theirs)?;
        links.remove(at)
    }

    /// A decline, logged with why (never the question's content).
    fn declined(&self, why: &str) -> Result<ElicitResult, ErrorData> {
        crate::limited!(self.log, tracing::Level::INFO, server = %Shown(&self.server), "a question from the server was declined: {why}");
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }
}

/// What the bridge says of itself in every server's `initialize`: its own name and version
/// (rmcp's default would name rmcp), and elicitation in form and URL mode.
pub fn client_info() -> ClientConfig {
    let mut elicitation = ElicitationCapability::new();
    elicitation.form = Some(FormElicitationCapability::new());
    elicitation.url = Some(UrlElicitationCapability::new());
    let mut caps = ClientCapabilities::default();
    caps.elicitation = Some(elicitation);
    ClientConfig::new(
        caps,
        Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")),
    )
}

impl ClientHandler for BridgeClient {
    fn get_info(&self) -> ClientConfig {
        client_info()
    }

    /// A server's word that a link question is done goes to the client that was asked it,
    /// under the id that client knows; any other notification, or an id this connection's
    /// server was not accepted a link under, is dropped.
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method != crate::calls::LINK_DONE {
            return;
        }
        let theirs = notification
            .params
            .as_ref()
            .and_then(|p| p.get("elicitationId"))
            .and_then(serde_json::Value::as_str);
        let Some(link) = theirs.and_then(|id| self.take_link(id)) else {
            return;
        };
        if let Some(asker) = link.run.asker.clone() {
            asker.completed(&link.ours).await;
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let asked = match question::read(&self.server, request) {
            Ok(q) => q,
            Err(e) => {
                crate::limited!(self.log, tracing::Level::WARN, server = %Shown(&self.server), "a question from the server was refused: {e}");
                return Err(ErrorData::invalid_params(e.to_string(), None));
            }
        };
        let run = match self.flights.route() {
            Ok(route) => route,
            Err(why) => return self.declined(why),
        };
        let Some(asker) = run.asker.clone() else {
            return self.declined("this run's client cannot be asked");
        };
        // The wait for the user does not count against the run's timeout (`PersonWaits`): it
        // has its own bound.
        let deadline = Instant::now() + self.timeout;
        let mut asked = asked;
        // A link question reaches the client under an id of the bridge's own.
        let link_ids = match &mut asked.kind {
            QuestionKind::Url { id, .. } if !id.is_empty() => {
                let ours = crate::ids::random_id();
                Some((std::mem::replace(id, ours.clone()), ours))
            }
            _ => None,
        };
        let schema = match &asked.kind {
            QuestionKind::Form { schema } => Some(schema.clone()),
            QuestionKind::Url { .. } => None,
        };
        let reply = tokio::select! {
            reply = async {
                let turn = tokio::time::timeout_at(deadline, run.questions.turn()).await;
                match turn {
                    Err(_) => Reply::TimedOut,
                    Ok(None) => Reply::Unavailable(format!(
                        "this run already relayed {} questions",
                        crate::calls::MAX_QUESTIONS_PER_RUN
                    )),
                    Ok(Some(_turn)) => {
                        let _waiting = run.waits.begin();
                        asker.relay(asked, deadline).await
                    }
                }
            } => reply,
            _ = run.stopped.cancelled() => Reply::Cancel,
            // The run ended (cancelled by its client, say): its question is withdrawn.
            _ = run.finished.cancelled() => Reply::Cancel,
            _ = context.ct.cancelled() => Reply::Cancel,
        };
        let action = |a| Ok(ElicitResult::new(a));
        match reply {
            Reply::Accept(content) => match (schema, content) {
                (Some(schema), Some(content)) => {
                    if let Err(e) = question::check_answer(&schema, &content) {
                        return self.declined(&e.to_string());
                    }
                    Ok(ElicitResult::new(ElicitationAction::Accept)
                        .with_content(serde_json::Value::Object(content)))
                }
                (Some(_), None) => self.declined("the answer accepted a form without content"),
                (None, _) => {
                    if let Some((theirs, ours)) = link_ids {
                        self.keep_link(OpenLink { theirs, ours, run });
                    }
                    action(ElicitationAction::Accept)
                }
            },
            Reply::Decline => action(ElicitationAction::Decline),
            Reply::Cancel => action(ElicitationAction::Cancel),
            Reply::TimedOut => {
                crate::limited!(self.log, tracing::Level::INFO, server = %Shown(&self.server), "a question from the server got no answer in time");
                action(ElicitationAction::Cancel)
            }
            Reply::Unavailable(why) => self.declined(&why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::Caller;

    fn run(token: Option<&str>) -> Arc<RunScope> {
        let caller = token.map(|t| {
            Arc::new(Caller {
                token: t.into(),
                sandbox: format!("sbx-{t}"),
                identity: None,
            })
        });
        Arc::new(RunScope::new("", None, None).with_caller(caller))
    }

    #[test]
    fn a_question_goes_to_the_one_client_whose_calls_are_in_flight() {
        let flights = Arc::new(Flights::default());
        assert!(flights.route().is_err(), "nobody in flight");
        let a1 = run(Some("a"));
        let first = flights.enter(a1.clone());
        let _second = flights.enter(run(Some("a")));
        let to = flights.route().expect("one client");
        assert_eq!(to.id, a1.id, "the oldest call's run");
        let other = flights.enter(run(Some("b")));
        assert!(flights.route().is_err(), "two clients: nobody is asked");
        drop(other);
        drop(first);
        assert_eq!(
            flights.route().expect("a again").caller,
            run(Some("a")).caller
        );
    }

    #[test]
    fn open_links_are_bounded_and_each_is_said_done_once() {
        let client = BridgeClient::new("s", Arc::default(), Duration::from_secs(1));
        for n in 0..=MAX_OPEN_LINKS {
            client.keep_link(OpenLink {
                theirs: format!("t{n}"),
                ours: format!("o{n}"),
                run: run(None),
            });
        }
        assert!(client.take_link("t0").is_none(), "the oldest was forgotten");
        assert_eq!(client.take_link("t1").expect("kept").ours, "o1");
        assert!(client.take_link("t1").is_none(), "said done once");
        assert!(
            client.take_link("o2").is_none(),
            "the bridge's own id is not the server's"
        );
    }

    #[test]
    fn the_bridge_declares_form_and_url_elicitation() {
        let info = client_info();
        let e = info.capabilities.elicitation.expect("elicitation");
        assert!(e.form.is_some() && e.url.is_some());
        assert_eq!(info.client_info.name, "mcp-code-bridge");
    }
}
