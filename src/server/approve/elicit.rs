//! [`ElicitAsker`]: asks a 2025-11-25 client with `elicitation/create` while the sandbox waits,
//! by the question's deadline: approval questions (form mode), and downstream servers'
//! questions relayed (their form as sent, their link in URL mode when the client declared it,
//! else in a form's message).

use rmcp::model::{
    CustomNotification, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ServerNotification,
};
use rmcp::service::{Peer, ServiceError};
use rmcp::RoleServer;
use serde_json::Value;
use tokio::time::Instant;

use crate::calls::{Answer, Asker, Question, QuestionKind, Reply, ServerQuestion};

/// Asks through the session's peer.
pub struct ElicitAsker {
    peer: Peer<RoleServer>,
}

impl ElicitAsker {
    /// An asker over `peer` (a client that declared form elicitation).
    pub fn new(peer: Peer<RoleServer>) -> Self {
        ElicitAsker { peer }
    }

    /// Whether the client declared URL-mode elicitation.
    fn takes_links(&self) -> bool {
        self.peer
            .peer_info()
            .and_then(|i| i.capabilities.elicitation.as_ref().map(|e| e.url.is_some()))
            .unwrap_or(false)
    }
}

/// What the user reads first: which server asks (escaped), then its message (escaped, line
/// breaks kept).
fn framed(question: &ServerQuestion) -> String {
    format!(
        "The MCP server \"{}\" asks (relayed by mcp-code-bridge):\n{}",
        crate::shown::escaped(&question.server),
        crate::shown::escape(&question.message, &['\n'], false)
    )
}

/// The request for `question`; `links`: the client takes URL mode.
pub(super) fn request(question: &ServerQuestion, links: bool) -> Option<ElicitRequestParams> {
    let message = framed(question);
    Some(match &question.kind {
        QuestionKind::Form { schema } => ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: serde_json::from_value(Value::Object(schema.clone())).ok()?,
        },
        QuestionKind::Url { url, id } if links => ElicitRequestParams::UrlElicitationParams {
            meta: None,
            message,
            url: url.clone(),
            elicitation_id: if id.is_empty() {
                crate::ids::random_id()
            } else {
                id.clone()
            },
        },
        // A client with form elicitation only: the link in the message, an empty form.
        QuestionKind::Url { url, .. } => ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!("{message}\n\nOpen this link: {url}\nAccept once you are done there."),
            requested_schema: ElicitationSchema::builder().build_unchecked(),
        },
    })
}

#[async_trait::async_trait]
impl Asker for ElicitAsker {
    async fn ask(&self, question: Question, deadline: Instant) -> Answer {
        let wait = deadline.saturating_duration_since(Instant::now());
        let asked = self
            .peer
            .create_elicitation_with_timeout(super::form(&question), Some(wait));
        match tokio::time::timeout_at(deadline, asked).await {
            Err(_) | Ok(Err(ServiceError::Timeout { .. })) => Answer::TimedOut,
            Ok(Err(e)) => {
                tracing::info!(error = %e, "elicitation/create failed");
                Answer::Unavailable(format!("the client did not take the question ({e})"))
            }
            Ok(Ok(result)) => super::answer(result.action, result.content.as_ref()),
        }
    }

    async fn relay(&self, question: ServerQuestion, deadline: Instant) -> Reply {
        let Some(params) = request(&question, self.takes_links()) else {
            return Reply::Unavailable("the form could not be put to the client".into());
        };
        let wait = deadline.saturating_duration_since(Instant::now());
        let asked = self
            .peer
            .create_elicitation_with_timeout(params, Some(wait));
        match tokio::time::timeout_at(deadline, asked).await {
            Err(_) | Ok(Err(ServiceError::Timeout { .. })) => Reply::TimedOut,
            Ok(Err(e)) => {
                tracing::info!(error = %e, "elicitation/create of a relayed question failed");
                Reply::Unavailable("the client did not take the question".into())
            }
            Ok(Ok(result)) => reply_of(result.action, result.content),
        }
    }

    async fn completed(&self, id: &str) {
        if !self.takes_links() {
            return;
        }
        let note = CustomNotification::new(
            crate::calls::LINK_DONE,
            Some(serde_json::json!({ "elicitationId": id })),
        );
        if let Err(e) = self
            .peer
            .send_notification(ServerNotification::CustomNotification(note))
            .await
        {
            tracing::debug!(error = %e, "notifications/elicitation/complete was not sent");
        }
    }
}

/// The client's answer to a relayed question as a [`Reply`]: content that is not an object
/// declines (the form's check comes later, in the upstream layer).
pub(super) fn reply_of(action: ElicitationAction, content: Option<Value>) -> Reply {
    match (action, content) {
        (ElicitationAction::Accept, None) => Reply::Accept(None),
        (ElicitationAction::Accept, Some(Value::Object(content))) => Reply::Accept(Some(content)),
        (ElicitationAction::Cancel, _) => Reply::Cancel,
        _ => Reply::Decline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(kind: QuestionKind) -> ServerQuestion {
        ServerQuestion {
            server: "db\u{1b}[2J".into(),
            message: "Your name?\nPlease \u{7}".into(),
            kind,
        }
    }

    #[test]
    fn a_relayed_question_names_its_server_escaped_and_keeps_its_form() {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let kind = QuestionKind::Form {
            schema: schema.as_object().expect("object").clone(),
        };
        let Some(ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        }) = request(&question(kind), false)
        else {
            panic!("not a form");
        };
        assert!(message.contains("\"db\\u{1b}[2J\" asks"), "{message}");
        assert!(message.contains("Your name?\nPlease \\u{7}"), "{message}");
        let sent = serde_json::to_value(&requested_schema).expect("json");
        assert_eq!(sent["properties"], schema["properties"]);
    }

    #[test]
    fn a_link_goes_in_url_mode_or_in_a_forms_message() {
        let kind = QuestionKind::Url {
            url: "https://example.com/x".into(),
            id: String::new(),
        };
        let q = question(kind);
        let Some(ElicitRequestParams::UrlElicitationParams {
            url,
            elicitation_id,
            ..
        }) = request(&q, true)
        else {
            panic!("not url mode");
        };
        assert_eq!(url, "https://example.com/x");
        assert!(!elicitation_id.is_empty());
        let Some(ElicitRequestParams::FormElicitationParams { message, .. }) = request(&q, false)
        else {
            panic!("not a form");
        };
        assert!(
            message.contains("Open this link: https://example.com/x"),
            "{message}"
        );
    }
}
