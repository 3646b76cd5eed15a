//! [`SignIns`]: one server's sign-ins inside runs, as its handle keeps them (`sign_in.rs`
//! signs in through them). A leaf.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

/// One server's sign-ins inside runs: one at a time, the last one's outcome shared with the
/// calls that waited for it.
#[derive(Debug, Default)]
pub struct SignIns {
    /// Held by the sign-in under way.
    pub(super) one: tokio::sync::Mutex<()>,
    /// Sign-ins finished (either way).
    pub(super) finished: AtomicU64,
    /// Whether the last one signed in.
    pub(super) last_ok: AtomicBool,
    /// Sign-ins after a refused call, in a row, whose retry was refused again.
    pub(super) refused_again: AtomicU32,
}
