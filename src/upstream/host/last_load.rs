//! [`LastLoad`]: the last run's load, kept so that a run naming the same servers as the one
//! before, for the same client, with none of their tool lists changed, gets the very same
//! [`LoadedTools`] back: no map is built and no name copied, whatever the number of servers.

use std::sync::{Arc, Mutex};

use rmcp::model::Tool;

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

    /// Keeps `loaded` as the answer for `servers` of `caller` with `lists` (replacing the last).
    pub(super) fn keep(
        &self,
        servers: &[String],
        caller: Option<&str>,
        lists: Vec<Arc<Vec<Tool>>>,
        loaded: LoadedTools,
    ) {
        *self.kept.lock().expect("last load lock") = Some(Kept {
            servers: servers.to_vec(),
            caller: caller.map(str::to_string),
            lists,
            loaded,
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
        last.keep(&servers, None, vec![a.clone(), b.clone()], loaded.clone());
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
}
