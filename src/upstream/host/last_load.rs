//! [`LastLoad`]: the last run's load, kept so that a run naming the same servers as the one
//! before, for the same client, with none of their tool lists changed, gets the very same
//! [`LoadedTools`] back: no map is built and no name copied, whatever the number of servers.
//! With a [`Watch`] it is answered before any server is looked up ([`LastLoad::fresh`]): while
//! none of the connections it listed has ended and the pool's change count reads the same,
//! nothing a lookup would find can differ.

use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use tokio_util::sync::CancellationToken;

use crate::calls::LoadedTools;

/// The last load without a narrowing (one, whatever the client: a bound on what it keeps).
#[derive(Default)]
pub(super) struct LastLoad {
    kept: Mutex<Option<Kept>>,
}

/// What a load was asked and what it answered.
struct Kept {
    /// The `servers` of the run, as given.
    servers: Vec<String>,
    /// The client's sandbox key (`Caller::sandbox`), `None` without one.
    caller: Option<String>,
    /// The tool list of each of `servers`, in their order (compared by pointer: a list is
    /// replaced, never changed in place).
    lists: Vec<Arc<Vec<Tool>>>,
    /// The answer.
    loaded: LoadedTools,
    /// What tells, without a lookup, that the answer still holds.
    watch: Option<Watch>,
}

/// The pool's change count when a load began, and the end signals of the connections that
/// answered it (a connection's `closed` and `stop` tokens, in `servers`' order).
pub(super) struct Watch {
    /// `UpstreamPool::changes` read before the load.
    pub changes: u64,
    /// Each connection's `(closed, stop)`: either cancelled means it ended or is ending.
    pub ends: Vec<(CancellationToken, CancellationToken)>,
}

impl LastLoad {
    /// The kept answer when the last load was of the same `servers` for the same `caller`
    /// and each server's tool list is still the one it had (`lists`, in `servers`' order).
    pub(super) fn get(
        &self,
        servers: &[String],
        caller: Option<&str>,
        lists: &[Arc<Vec<Tool>>],
    ) -> Option<LoadedTools> {
        let kept = self.kept.lock().expect("last load lock");
        let k = kept.as_ref()?;
        let same = k.caller.as_deref() == caller
            && k.servers.as_slice() == servers
            && k.lists.len() == lists.len()
            && k.lists.iter().zip(lists).all(|(a, b)| Arc::ptr_eq(a, b));
        same.then(|| k.loaded.clone())
    }

    /// The kept answer, before any lookup, when the last load was of the same `servers` for
    /// the same `caller`, had a [`Watch`] whose change count is `changes`, and none of whose
    /// connections has ended.
    pub(super) fn fresh(
        &self,
        servers: &[String],
        caller: Option<&str>,
        changes: u64,
    ) -> Option<LoadedTools> {
        let kept = self.kept.lock().expect("last load lock");
        let k = kept.as_ref()?;
        let w = k.watch.as_ref()?;
        let same = w.changes == changes
            && k.caller.as_deref() == caller
            && k.servers.as_slice() == servers
            && w.ends
                .iter()
                .all(|(closed, stop)| !closed.is_cancelled() && !stop.is_cancelled());
        same.then(|| k.loaded.clone())
    }

    /// Keeps `loaded` as the answer for `servers` of `caller` with `lists` (replacing the
    /// last), with `watch` when the load could tell what would change it.
    pub(super) fn keep(
        &self,
        servers: &[String],
        caller: Option<&str>,
        lists: Vec<Arc<Vec<Tool>>>,
        loaded: LoadedTools,
        watch: Option<Watch>,
    ) {
        let mut kept = self.kept.lock().expect("last load lock");
        // The same names again (their lists changed): the kept copy of them serves.
        let servers = match kept.take() {
            Some(k) if k.servers.as_slice() == servers => k.servers,
            _ => servers.to_vec(),
        };
        *kept = Some(Kept {
            servers,
            caller: caller.map(str::to_string),
            lists,
            loaded,
            watch,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Arc<Vec<Tool>> {
        Arc::new(
            names
                .iter()
                .map(|n| {
                    serde_json::from_value(
                        serde_json::json!({"name": n, "inputSchema": {"type": "object"}}),
                    )
                    .expect("a tool")
                })
                .collect(),
        )
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_same_servers_with_unchanged_lists_get_the_very_same_answer() {
        let last = LastLoad::default();
        let (a, b) = (list(&["x"]), list(&["y"]));
        let servers = names(&["a", "b"]);
        assert!(last.get(&servers, None, &[a.clone(), b.clone()]).is_none());
        let loaded = LoadedTools::default();
        last.keep(
            &servers,
            None,
            vec![a.clone(), b.clone()],
            loaded.clone(),
            None,
        );
        let hit = last.get(&servers, None, &[a.clone(), b.clone()]);
        assert!(hit.is_some_and(|h| Arc::ptr_eq(&h, &loaded)));
    }

    #[test]
    fn a_changed_tool_list_other_servers_or_another_client_miss() {
        let last = LastLoad::default();
        let (a, b) = (list(&["x"]), list(&["y"]));
        let servers = names(&["a", "b"]);
        last.keep(
            &servers,
            Some("c1"),
            vec![a.clone(), b.clone()],
            LoadedTools::default(),
            None,
        );
        // A server's tool list replaced (equal content, another list): rebuilt.
        assert!(last
            .get(&servers, Some("c1"), &[a.clone(), list(&["y"])])
            .is_none());
        // Other servers, fewer, or another order.
        assert!(last
            .get(&names(&["a", "c"]), Some("c1"), &[a.clone(), b.clone()])
            .is_none());
        assert!(last
            .get(&names(&["a"]), Some("c1"), std::slice::from_ref(&a))
            .is_none());
        assert!(last
            .get(&names(&["b", "a"]), Some("c1"), &[b.clone(), a.clone()])
            .is_none());
        // Another client, or none.
        assert!(last
            .get(&servers, Some("c2"), &[a.clone(), b.clone()])
            .is_none());
        assert!(last.get(&servers, None, &[a.clone(), b.clone()]).is_none());
        assert!(last.get(&servers, Some("c1"), &[a, b]).is_some());
    }

    fn watch(changes: u64, n: usize) -> (Watch, Vec<CancellationToken>) {
        let closed: Vec<CancellationToken> = (0..n).map(|_| CancellationToken::new()).collect();
        let ends = closed
            .iter()
            .map(|c| (c.clone(), CancellationToken::new()))
            .collect();
        (Watch { changes, ends }, closed)
    }

    #[test]
    fn fresh_answers_until_a_connection_ends_or_the_pool_changes() {
        let last = LastLoad::default();
        let (a, b) = (list(&["x"]), list(&["y"]));
        let servers = names(&["a", "b"]);
        assert!(last.fresh(&servers, None, 7).is_none());
        let loaded = LoadedTools::default();
        let (w, closed) = watch(7, 2);
        last.keep(&servers, Some("c1"), vec![a, b], loaded.clone(), Some(w));
        let hit = last.fresh(&servers, Some("c1"), 7);
        assert!(hit.is_some_and(|h| Arc::ptr_eq(&h, &loaded)));
        // The pool changed (a list cached, a client's handle made or taken out).
        assert!(last.fresh(&servers, Some("c1"), 8).is_none());
        // Other names, another client.
        assert!(last.fresh(&names(&["a"]), Some("c1"), 7).is_none());
        assert!(last.fresh(&servers, Some("c2"), 7).is_none());
        // One connection ended.
        closed[1].cancel();
        assert!(last.fresh(&servers, Some("c1"), 7).is_none());
    }

    #[test]
    fn without_a_watch_only_the_looked_up_answer_serves() {
        let last = LastLoad::default();
        let a = list(&["x"]);
        let servers = names(&["a"]);
        last.keep(
            &servers,
            None,
            vec![a.clone()],
            LoadedTools::default(),
            None,
        );
        assert!(last.fresh(&servers, None, 0).is_none());
        assert!(last.get(&servers, None, &[a]).is_some());
    }
}
