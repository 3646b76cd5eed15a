//! Questions a downstream server asks the user during a call (MCP elicitation), relayed by the
//! bridge: the [`ServerQuestion`] as the run's [`Asker`](super::Asker) gets it (already checked
//! by the upstream layer), the [`Reply`] it gives back, and the run's [`QuestionGate`] (one
//! question at a time per run, at most [`MAX_QUESTIONS_PER_RUN`] in all).

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value};

/// MCP's notification that a URL-mode question is done, `{"elicitationId"}` (rmcp 3.9 has no
/// type for it): relayed from a server to the user's client, and sent by the bridge itself
/// when a sign-in it asked for lands.
pub const LINK_DONE: &str = "notifications/elicitation/complete";

/// Questions one run may relay at most; later ones are declined at once.
pub const MAX_QUESTIONS_PER_RUN: u32 = 16;

/// What a server asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionKind {
    /// A form: `schema` is the server's `requestedSchema` (checked: an object of primitive
    /// properties, bounded).
    Form {
        /// The checked `requestedSchema`.
        schema: Map<String, Value>,
    },
    /// A link for the user to open (`url`: `https` or `http`, shown as is).
    Url {
        /// The URL.
        url: String,
        /// The server's `elicitationId` (empty when it sent none).
        id: String,
    },
}

/// A downstream server's question to the user.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerQuestion {
    /// The server's configured name.
    pub server: String,
    /// The server's message (bounded; not yet escaped for a terminal).
    pub message: String,
    /// A form or a link.
    pub kind: QuestionKind,
}

impl ServerQuestion {
    /// A form's fields, in the schema's order: (name, its schema).
    pub fn fields(&self) -> Vec<(&str, &Map<String, Value>)> {
        let QuestionKind::Form { schema } = &self.kind else {
            return Vec::new();
        };
        schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .filter_map(|(k, v)| Some((k.as_str(), v.as_object()?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the form requires field `name`.
    pub fn requires(&self, name: &str) -> bool {
        let QuestionKind::Form { schema } = &self.kind else {
            return false;
        };
        schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
    }

    /// A form accepted with its fields' defaults (SEP-1034): each field that has a `default`
    /// gets it; `None` for a link, or when a required field has no default.
    pub fn defaults(&self) -> Option<Map<String, Value>> {
        if !matches!(self.kind, QuestionKind::Form { .. }) {
            return None;
        }
        let mut content = Map::new();
        for (name, prop) in self.fields() {
            match prop.get("default") {
                Some(v) => {
                    content.insert(name.to_string(), v.clone());
                }
                None if self.requires(name) => return None,
                None => {}
            }
        }
        Some(content)
    }
}

/// The user's answer to a [`ServerQuestion`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Accepted; a form's `content` (checked against the schema by the upstream layer before
    /// it goes to the server), none for a link.
    Accept(Option<Map<String, Value>>),
    /// Declined by the user.
    Decline,
    /// Dismissed without a choice.
    Cancel,
    /// Nobody could be asked: the reason (the server gets a decline).
    Unavailable(String),
    /// No answer by the deadline (the server gets a cancel).
    TimedOut,
}

/// One run's questions: one at a time, a bounded number.
#[derive(Debug, Default)]
pub struct QuestionGate {
    one: tokio::sync::Mutex<()>,
    asked: AtomicU32,
}

impl QuestionGate {
    /// Waits for the run's turn to ask; `None` once the run has asked
    /// [`MAX_QUESTIONS_PER_RUN`] questions. The guard is held while the question is out.
    pub async fn turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if self.asked.fetch_add(1, Ordering::Relaxed) >= MAX_QUESTIONS_PER_RUN {
            self.asked.store(MAX_QUESTIONS_PER_RUN, Ordering::Relaxed);
            return None;
        }
        Some(self.one.lock().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(schema: Value) -> ServerQuestion {
        ServerQuestion {
            server: "s".into(),
            message: "m".into(),
            kind: QuestionKind::Form {
                schema: schema.as_object().expect("object").clone(),
            },
        }
    }

    #[test]
    fn a_form_is_answered_with_its_defaults_unless_a_required_field_has_none() {
        let q = form(json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "verified": {"type": "boolean", "default": true},
            "note": {"type": "string"},
        }}));
        assert_eq!(
            q.defaults(),
            Some(
                json!({"name": "John Doe", "age": 30, "verified": true})
                    .as_object()
                    .expect("o")
                    .clone()
            )
        );
        let q = form(
            json!({"type": "object", "properties": {"pin": {"type": "string"}}, "required": ["pin"]}),
        );
        assert_eq!(q.defaults(), None);
        let link = ServerQuestion {
            server: "s".into(),
            message: "m".into(),
            kind: QuestionKind::Url {
                url: "https://e.com".into(),
                id: String::new(),
            },
        };
        assert_eq!(link.defaults(), None);
    }

    #[tokio::test]
    async fn a_run_asks_one_question_at_a_time_and_a_bounded_number() {
        let gate = QuestionGate::default();
        let first = gate.turn().await.expect("a turn");
        let second = tokio::time::timeout(std::time::Duration::from_millis(50), gate.turn());
        assert!(
            second.await.is_err(),
            "a second question waited for the first"
        );
        drop(first);
        // The question that waited (and gave up) counts too.
        for _ in 3..=MAX_QUESTIONS_PER_RUN {
            assert!(gate.turn().await.is_some());
        }
        assert!(gate.turn().await.is_none(), "past the bound");
        assert!(gate.turn().await.is_none(), "still past the bound");
    }
}
