//! Asking the user to approve calls: the [`Asker`] seam (implemented only by the MCP face,
//! never reachable from sandbox code), the [`Question`] it is asked and the [`Answer`].

use tokio::time::Instant;

use super::relay::{Reply, ServerQuestion};

/// Why a call needs the user's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalReason {
    /// The server marks the tool `destructiveHint: true` (and not `readOnlyHint: true`).
    Destructive,
    /// Nothing is known of the tool: its server is not running and no tool list of it is
    /// cached, so its hints cannot be read (treated as destructive).
    HintsUnknown,
    /// The operator's `requireApproval` rule in `file`.
    Listed {
        /// The pattern.
        pattern: String,
        /// The config file.
        file: String,
    },
}

impl std::fmt::Display for ApprovalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalReason::Destructive => f.write_str("the server marks it destructiveHint"),
            ApprovalReason::HintsUnknown => f.write_str(
                "its server is not running and no tool list of it is cached, so it may be \
                 destructive",
            ),
            ApprovalReason::Listed { pattern, file } => {
                write!(f, "\"requireApproval\" rule \"{pattern}\" in {file}")
            }
        }
    }
}

/// One call waiting for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskedCall {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// Why it needs approval.
    pub reason: ApprovalReason,
    /// A short, terminal-safe preview of the arguments (bounded).
    pub preview: String,
}

/// A question to the user: approve these calls of run `run`?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The run's id.
    pub run: String,
    /// The calls (one, or a batch made at once).
    pub calls: Vec<AskedCall>,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Approved; `for_run`: also every later call of the same tools in this run.
    Approved {
        /// Remember for the rest of the run.
        for_run: bool,
    },
    /// Declined (or cancelled) by the user.
    Declined,
    /// Nobody could be asked, or the question could not be delivered: the reason.
    Unavailable(String),
    /// No answer by the deadline.
    TimedOut,
}

/// Asks the user to approve calls; implemented by the MCP face (elicitation, or an
/// input-required result), and only there: sandbox code can never answer.
#[async_trait::async_trait]
pub trait Asker: Send + Sync + 'static {
    /// Asks `question`, waiting no later than `deadline`.
    async fn ask(&self, question: Question, deadline: Instant) -> Answer;

    /// Relays a downstream server's question to the user, waiting no later than `deadline`.
    /// An asker that cannot relay one says so (the server gets a decline at once).
    async fn relay(&self, question: ServerQuestion, deadline: Instant) -> Reply {
        let _ = (question, deadline);
        Reply::Unavailable("this client cannot be asked".into())
    }

    /// Tells the user's client that the link question `id` it was asked (URL mode) is done
    /// (MCP's `notifications/elicitation/complete`). An asker without URL mode does nothing.
    async fn completed(&self, id: &str) {
        let _ = id;
    }
}
