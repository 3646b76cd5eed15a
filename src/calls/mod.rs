//! The host-call contract: what sandbox code may ask of the host and how it is answered.
//!
//! Every request from sandbox code passes [`Dispatcher::handle`] (`dispatcher.rs`): its names
//! are checked (`names.rs`), it is parsed once into a typed [`HostRequest`] (`request.rs`, the
//! methods listed in `host_method.rs`), shown to the [`CallHook`] (`hook.rs`, where the policy
//! sits) and answered by the built-ins or the [`HostCalls`] backend (`host_calls.rs`, which the
//! user's servers implement). Each run carries its [`RunScope`] (`run_scope.rs`: id, narrowing,
//! caller, tallies) and, when somebody can be asked, an [`Asker`] (`ask.rs`), which also relays
//! downstream servers' questions (`relay.rs`). Failures carry an
//! [`ErrorKind`] (`error_kind.rs`); a run's servers come back as [`LoadedTools`] (`loaded.rs`).
//! Knows no sandbox, no server and no policy: those implement or call these types.

mod ask;
mod dispatcher;
mod error;
mod error_kind;
mod hook;
mod host_calls;
mod host_method;
mod language;
mod loaded;
mod names;
mod person_wait;
mod relay;
mod request;
mod run_scope;
mod trace;
mod trace_context;

pub use ask::{Answer, ApprovalReason, AskedCall, Asker, Question};
pub use dispatcher::{Dispatcher, SavedNamespace};
pub use error::{CallError, LoadError};
pub use error_kind::ErrorKind;
pub use hook::{Admission, Answered, CallHook};
pub use host_calls::{CallContext, HostCalls, NoHostCalls, ToolFacts};
pub use host_method::HostMethod;
pub use language::Language;
pub use loaded::LoadedTools;
pub use person_wait::{PersonWait, PersonWaits};
pub use relay::{
    QuestionGate, QuestionKind, Reply, ServerQuestion, LINK_DONE, MAX_QUESTIONS_PER_RUN,
};
pub use request::{BackendCall, Detail, HostRequest, ToolCall, MAX_SEARCH_LIMIT};
pub use run_scope::{
    Caller, Narrowing, RunBudgets, RunScope, ServerUse, SignInWay, Tally, MAX_ALLOWED_TOOLS,
};
pub use trace::{json_bytes, RunSize, Tokens, Trace, TracedCall, BYTES_PER_TOKEN, MAX_TRACED};
pub use trace_context::TraceContext;
