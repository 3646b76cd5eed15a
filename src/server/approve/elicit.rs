//! [`ElicitAsker`]: asks a 2025-11-25 client with `elicitation/create` (form mode) while the
//! sandbox waits, by the question's deadline.

use rmcp::service::{Peer, ServiceError};
use rmcp::RoleServer;
use tokio::time::Instant;

use crate::calls::{Answer, Asker, Question};

/// Asks through the session's peer.
pub struct ElicitAsker {
    peer: Peer<RoleServer>,
}

impl ElicitAsker {
    /// An asker over `peer` (a client that declared form elicitation).
    pub fn new(peer: Peer<RoleServer>) -> Self {
        ElicitAsker { peer }
    }
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
}
