//! Files out of the sandbox: the host side of the outbox.
//!
//! The entrypoint sends, after each cell, the files that cell wrote under `/workspace/out`
//! (and `runtime.save`'s, and the pictures it rendered) as `file` frames: base64 chunks of
//! each file in turn. [`CellFiles`] receives them into this session's [`Outbox`] folder under
//! the state dir, within `MCP_BRIDGE_OUTBOX_*` limits enforced as the bytes arrive; the names
//! are the host's (`names.rs`); a picture is shown only when the host finds a PNG within the
//! image budget (`png.rs`). Knows nothing of frames' transport or of MCP.

mod names;
mod png;
mod receive;
mod store;
#[cfg(test)]
mod tests;

pub use names::is_text;
pub use png::png_size;
pub use receive::{human, CellFiles, Delivery, FileChunk, Skip};
pub use store::Outbox;
