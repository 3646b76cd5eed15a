//! The sandbox layer: the actor that owns one persistent container session, the session's
//! tasks and frames, the frame protocol, and the namespace kept across an idle stop.
//!
//! `actor/` (the [`Sandbox`] actor: queue, deadlines, lazy start, idle stop) drives `session/`
//! (one container: its tasks and frames), which speaks `protocol/` frames reassembled by
//! `crate::lines`; each `call` frame goes to the host-call contract (`crate::calls`, the
//! dispatcher); `snapshot/` owns the saved namespace; `channel.rs` is the optional socket that
//! carries frames instead of stdio. Knows containers only through the
//! `container::ContainerRuntime` trait, and the user's servers only through `calls::HostCalls`.

mod actor;
mod channel;
pub mod entrypoint;
mod error;
pub mod posture;
mod progress;
mod protocol;
mod session;
mod snapshot;

pub use actor::{Connector, RunRequest, Sandbox, INTERRUPT_GRACE_MS};
pub use error::{BridgeError, ProtocolError};
pub use progress::Progress;
pub use protocol::{parse_inbound, FrameError};
pub use session::json_cost;
