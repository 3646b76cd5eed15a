//! [`SessionBook`]: which token opened each 2025-11-25 MCP session. rmcp's session ids are
//! unguessable, but rmcp does not know tokens: without this, a request with another token and a
//! leaked session id would be served in that session. The book binds a session to the token
//! whose `initialize` created it (a request with another token is answered as if the session
//! did not exist) and bounds the sessions a token may hold: past [`MAX_SESSIONS_PER_TOKEN`],
//! its oldest session is closed (its client starts a new one, as after any expiry). It also
//! marks the sessions whose standing GET stream is open: one per session is not counted as a
//! request in flight.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// Sessions one token may hold; opening one more closes its oldest.
pub const MAX_SESSIONS_PER_TOKEN: usize = 256;

/// Sessions and the tokens that opened them.
#[derive(Default)]
pub struct SessionBook {
    owner: HashMap<String, Arc<str>>,
    order: HashMap<Arc<str>, VecDeque<String>>,
    /// Sessions with their standing GET stream open (each one the book knows).
    standing: HashSet<String>,
}

impl SessionBook {
    /// May `token` use `session`? False for a session another token opened, or one the book
    /// never saw (rmcp answers those itself).
    pub fn allows(&self, session: &str, token: &str) -> bool {
        self.owner.get(session).is_none_or(|t| &**t == token)
    }

    /// Notes that `token` opened `session`; returns the sessions to close (its oldest, past
    /// the cap).
    pub fn opened(&mut self, session: &str, token: &Arc<str>) -> Vec<String> {
        if self.owner.contains_key(session) {
            return Vec::new();
        }
        self.owner.insert(session.to_string(), token.clone());
        let order = self.order.entry(token.clone()).or_default();
        order.push_back(session.to_string());
        let mut evicted = Vec::new();
        while order.len() > MAX_SESSIONS_PER_TOKEN {
            if let Some(old) = order.pop_front() {
                self.owner.remove(&old);
                self.standing.remove(&old);
                evicted.push(old);
            }
        }
        evicted
    }

    /// Forgets `session` (it was closed or deleted).
    pub fn closed(&mut self, session: &str) {
        self.standing.remove(session);
        if let Some(token) = self.owner.remove(session) {
            if let Some(order) = self.order.get_mut(&token) {
                order.retain(|s| s != session);
            }
        }
    }

    /// Marks `session`'s standing GET stream open; false when the book does not know the
    /// session or its stream is already open (that GET counts as a request in flight).
    pub fn stand(&mut self, session: &str) -> bool {
        self.owner.contains_key(session) && self.standing.insert(session.to_string())
    }

    /// Marks `session`'s standing GET stream closed.
    pub fn sat(&mut self, session: &str) {
        self.standing.remove(session);
    }

    /// Forgets every session of tokens `keep` rejects; returns them (to close).
    pub fn revoke(&mut self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let gone: Vec<Arc<str>> = self.order.keys().filter(|t| !keep(t)).cloned().collect();
        let mut sessions = Vec::new();
        for token in gone {
            for s in self.order.remove(&token).unwrap_or_default() {
                self.owner.remove(&s);
                self.standing.remove(&s);
                sessions.push(s);
            }
        }
        sessions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_bound_and_bounded() {
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let mut book = SessionBook::default();
        assert!(book.opened("s1", &a).is_empty());
        assert!(book.allows("s1", "a") && !book.allows("s1", "b"));
        assert!(book.allows("unknown", "b"), "rmcp answers unknown sessions");
        for i in 0..MAX_SESSIONS_PER_TOKEN {
            let evicted = book.opened(&format!("x{i}"), &a);
            if i + 1 < MAX_SESSIONS_PER_TOKEN {
                assert!(evicted.is_empty());
            } else {
                assert_eq!(evicted, vec!["s1".to_string()], "the oldest goes");
            }
        }
        assert!(book.opened("t1", &b).is_empty(), "b's count is its own");
        book.closed("t1");
        assert!(book.allows("t1", "a"));
        let revoked = book.revoke(|t| t != "a");
        assert_eq!(revoked.len(), MAX_SESSIONS_PER_TOKEN);
        assert!(book.allows("x5", "b"));
    }

    #[test]
    fn one_standing_stream_per_known_session() {
        let a: Arc<str> = Arc::from("a");
        let mut book = SessionBook::default();
        assert!(!book.stand("unknown"), "only sessions the book knows");
        book.opened("s1", &a);
        book.opened("s2", &a);
        assert!(book.stand("s1"));
        assert!(
            !book.stand("s1"),
            "a second stream of s1 is a request in flight"
        );
        assert!(book.stand("s2"));
        book.sat("s1");
        assert!(book.stand("s1"));
        book.closed("s1");
        assert!(!book.stand("s1"));
        book.revoke(|_| false);
        assert!(book.standing.is_empty() && !book.stand("s2"));
    }
}
