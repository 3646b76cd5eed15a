//! [`SignIns`]: one server's sign-ins inside runs, as its handle keeps them (`sign_in.rs`
//! signs in through them); [`CallerSignIns`]: those of callers' own handles, one per caller
//! identity and server, shared by that caller's sandboxes. A leaf.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex, Weak};

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

/// The sign-ins of callers' own handles of remote servers, one per caller identity and server:
/// each of a caller's sandboxes has a handle of its own, but they sign in to one set of
/// records, so simultaneous first calls from two of them ask the person once. Held weakly: an
/// entry goes with the last handle using it (so there are at most as many as own handles).
#[derive(Debug, Default)]
pub struct CallerSignIns {
    by_caller: Mutex<HashMap<(String, String), Weak<SignIns>>>,
}

impl CallerSignIns {
    /// The sign-ins of the caller with identity `key` to `server`, made when it has none.
    pub fn of(&self, key: &str, server: &str) -> Arc<SignIns> {
        let mut map = self.by_caller.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, held| held.strong_count() > 0);
        let id = (key.to_string(), server.to_string());
        if let Some(held) = map.get(&id).and_then(Weak::upgrade) {
            return held;
        }
        let fresh = Arc::new(SignIns::default());
        map.insert(id, Arc::downgrade(&fresh));
        fresh
    }

    /// Entries held now (tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        let map = self.by_caller.lock().unwrap_or_else(|e| e.into_inner());
        map.values().filter(|h| h.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_caller_and_server_while_a_handle_holds_it() {
        let all = CallerSignIns::default();
        let a1 = all.of("alice", "docs");
        let a2 = all.of("alice", "docs");
        assert!(Arc::ptr_eq(&a1, &a2), "a caller's sandboxes share one");
        assert!(!Arc::ptr_eq(&a1, &all.of("bob", "docs")));
        assert!(!Arc::ptr_eq(&a1, &all.of("alice", "other")));
        drop((a1, a2));
        assert_eq!(all.len(), 0, "gone with the last handle");
    }
}
