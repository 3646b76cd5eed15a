//! The upstream layer: the user's MCP servers, their warm clients, tool docs and search.
//!
//! `pool.rs` holds one [`client::Upstream`] handle per configured server (and, for a
//! `"perClient"` server, one per client: `per_client.rs`), whose connection one
//! task owns (`owner.rs`, starting it through `start.rs`; `transport.rs` its stdio pipes,
//! `lane/` the fast `tools/call` path on them; `sse/` the legacy HTTP+SSE transport,
//! `remote_headers.rs` the headers of remote servers, `headers_helper.rs` Claude Code's
//! `headersHelper` command that adds to them); `host/` answers the
//! sandbox's host methods over the pool; `docs.rs`, `search/`, `result.rs` and `near.rs` ("did
//! you mean") are pure; `validate/` checks arguments against input schemas before a call; `pins/` holds
//! changed tool definitions to their pins; `read_chunk.rs` sizes
//! the buffers a server's pipes are read into by what they carry. `elicit.rs` is the bridge's
//! own client on each connection: a server's questions go to the run whose call is in flight,
//! checked by `question.rs`.
//! The only module that names rmcp's client role.

mod cache;
pub mod client;
pub mod docs;
mod elicit;
mod error;
mod handshake;
mod headers_helper;
mod host;
mod lane;
mod live;
mod near;
pub mod oauth;
mod owner;
mod per_client;
pub mod pins;
mod pool;
pub mod pytypes;
mod question;
mod read_chunk;
mod remote;
mod remote_headers;
mod result;
pub mod search;
mod sign_in;
mod sign_ins;
mod sse;
mod start;
mod start_error;
pub mod stubs;
mod transport;
mod validate;

pub use error::UpstreamError;
pub use host::UpstreamHostCalls;
pub use pool::UpstreamPool;
