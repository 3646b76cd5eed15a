//! The bridge layer: sandbox sessions, their frame protocol, and requests from sandbox code.
//!
//! `sandbox.rs` (the actor) drives `session/` (one container: its tasks and frames) which speaks
//! `protocol/` frames reassembled by `crate::lines`; `dispatch/` is the one place sandbox
//! requests pass (parsed once into a typed `HostRequest`, seen by a `CallHook`); `snapshot/`
//! owns the saved namespace; `channel.rs` is the optional socket that carries frames instead
//! of stdio. Knows containers only through the `container::ContainerRuntime` trait.

mod channel;
mod dispatch;
pub mod entrypoint;
mod error;
mod error_kind;
pub mod log_limit;
pub mod posture;
mod progress;
mod protocol;
mod run_scope;
mod sandbox;
mod session;
mod snapshot;

pub use dispatch::{
    Admission, Answered, BackendCall, CallContext, CallError, CallHook, Detail, Dispatcher,
    HostCalls, HostMethod, HostRequest, LoadError, NoHostCalls, ToolCall, ToolFacts,
    MAX_SEARCH_LIMIT,
};
pub use error::{BridgeError, ProtocolError};
pub use error_kind::ErrorKind;
pub use progress::Progress;
pub use protocol::{
    parse_inbound, CallFrame, FrameError, Inbound, LoadedTools, Outbound, ReadyFrame, ResultFrame,
};
pub use run_scope::{
    fill_random, random_id, sha256_hex, Answer, ApprovalReason, AskedCall, Asker, Caller,
    Narrowing, Question, RunBudgets, RunScope, ServerUse, Tally, MAX_ALLOWED_TOOLS,
};
pub use sandbox::{Connector, RunRequest, Sandbox, INTERRUPT_GRACE_MS};
pub use session::json_cost;
