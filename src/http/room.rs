//! Which client sandbox makes room at a cap: the least recently used idle awake one is put to
//! sleep, and sleepers past their own bounds are forgotten. Pure choices over the hub's slots
//! (`hub.rs` acts on them), tested without sandboxes.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use tokio::time::Instant;

/// What the choices read of a slot (a trait, so that they are tested without sandboxes).
pub(super) trait Standing {
    /// The token it belongs to.
    fn token(&self) -> &Arc<str>;
    /// When a run last used it.
    fn last_used(&self) -> Instant;
    /// Runs in flight in it.
    fn busy(&self) -> usize;
    /// Its container runs (not put to sleep).
    fn awake(&self) -> bool;
}

/// The least recently used awake slot with no run in flight (of `token`, or of anyone).
pub(super) fn lru_idle<K: Clone + Eq + Hash, S: Standing>(
    slots: &HashMap<K, S>,
    token: Option<&Arc<str>>,
) -> Option<K> {
    slots
        .iter()
        .filter(|(_, s)| s.awake() && s.busy() == 0 && token.is_none_or(|t| s.token() == t))
        .min_by_key(|(_, s)| s.last_used())
        .map(|(k, _)| k.clone())
}

/// The sleeping slots to forget, least recently used first: those of `token` past
/// `per_token`, then those of anyone past `total`; `keep` (the one waking) aside.
pub(super) fn sleepers_past<K: Clone + Eq + Hash, S: Standing>(
    slots: &HashMap<K, S>,
    token: &Arc<str>,
    keep: &K,
    per_token: usize,
    total: usize,
) -> Vec<K> {
    let mut gone: Vec<K> = Vec::new();
    for mine_only in [true, false] {
        let cap = if mine_only { per_token } else { total };
        let mut sleeping: Vec<(Instant, &K)> = slots
            .iter()
            .filter(|(k, s)| {
                *k != keep && !s.awake() && (!mine_only || s.token() == token) && !gone.contains(k)
            })
            .map(|(k, s)| (s.last_used(), k))
            .collect();
        if sleeping.len() <= cap {
            continue;
        }
        sleeping.sort_by_key(|(t, _)| *t);
        let excess = sleeping.len() - cap;
        let oldest: Vec<K> = sleeping
            .into_iter()
            .take(excess)
            .map(|(_, k)| k.clone())
            .collect();
        gone.extend(oldest);
    }
    gone
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    struct Fake {
        token: Arc<str>,
        last_used: Instant,
        busy: usize,
        awake: bool,
    }

    impl Standing for Fake {
        fn token(&self) -> &Arc<str> {
            &self.token
        }
        fn last_used(&self) -> Instant {
            self.last_used
        }
        fn busy(&self) -> usize {
            self.busy
        }
        fn awake(&self) -> bool {
            self.awake
        }
    }

    fn slots(spec: &[(&str, &str, u64, usize, bool)]) -> HashMap<String, Fake> {
        let t0 = Instant::now();
        spec.iter()
            .map(|&(key, token, age, busy, awake)| {
                let fake = Fake {
                    token: Arc::from(token),
                    last_used: t0 + Duration::from_secs(100 - age),
                    busy,
                    awake,
                };
                (key.to_string(), fake)
            })
            .collect()
    }

    fn key(k: &str) -> String {
        k.to_string()
    }

    #[test]
    fn the_least_recently_used_idle_awake_slot_is_chosen() {
        let a: Arc<str> = Arc::from("a");
        let s = slots(&[
            ("old-busy", "a", 50, 1, true),
            ("old-asleep", "a", 40, 0, false),
            ("mid", "a", 30, 0, true),
            ("new", "a", 10, 0, true),
            ("b-oldest", "b", 60, 0, true),
        ]);
        assert_eq!(lru_idle(&s, Some(&a)), Some(key("mid")));
        assert_eq!(lru_idle(&s, None), Some(key("b-oldest")));
        let busy = slots(&[("x", "a", 5, 1, true), ("y", "a", 5, 2, true)]);
        assert_eq!(lru_idle(&busy, None), None, "every one runs code");
    }

    #[test]
    fn sleepers_are_bounded_per_token_then_in_total() {
        let a: Arc<str> = Arc::from("a");
        let s = slots(&[
            ("a1", "a", 50, 0, false),
            ("a2", "a", 40, 0, false),
            ("a3", "a", 30, 0, false),
            ("b1", "b", 60, 0, false),
            ("b2", "b", 20, 0, false),
            ("awake", "a", 90, 0, true),
        ]);
        // a keeps 2 sleeping: its oldest goes; then 3 in all: b's oldest goes.
        let mut gone = sleepers_past(&s, &a, &key("none"), 2, 3);
        gone.sort_by_key(|k| format!("{k:?}"));
        assert_eq!(gone, vec![key("a1"), key("b1")]);
        // The one waking is never chosen.
        assert_eq!(sleepers_past(&s, &a, &key("a1"), 1, 10), vec![key("a2")]);
        assert!(sleepers_past(&s, &a, &key("none"), 8, 8).is_empty());
    }
}
