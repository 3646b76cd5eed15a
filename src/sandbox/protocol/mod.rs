//! Frames exchanged with the sandbox entrypoint (see ARCHITECTURE.md, "frame protocol").
//!
//! Pure serde types, no I/O. `entrypoint/protocol.py` mirrors them. `inbound.rs` reads the
//! frames from the sandbox, `result.rs` holds the biggest of them (an exec's outcome),
//! `state_frames.rs` those of a cell's progress, the namespace snapshot and the imports ahead; `outbound.rs`
//! writes the frames to the sandbox.

mod inbound;
mod outbound;
mod result;
mod state_frames;

pub use inbound::{
    call_id, is_call, parse_call, parse_inbound, CallFrame, FrameError, Inbound, ReadyFrame,
};
pub use outbound::{ChannelOffer, EgressOffer, ExecServers, ExecTools, Outbound, SentTools};
pub use result::ResultFrame;
pub use state_frames::{Bounded, OutputFrame, PreloadedFrame, RestoredFrame, SavedFrame};

/// Protocol version sent in `boot` and expected in `ready`.
pub const PROTOCOL_VERSION: u32 = 1;
