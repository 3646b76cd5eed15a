//! [`PerClient`]: the processes of `"perClient": true` servers, one per client sandbox
//! ([`Caller::sandbox`](crate::calls::Caller)) and server, each an [`Upstream`] of its own,
//! made on the client's first use of the server (its process starts as any server's does, on
//! first connect). At most a fixed number over all clients: past it a new one is refused, not
//! made. Taken out when the client is released or the pool shuts down; closing them is the
//! pool's work.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::client::Upstream;

/// The per-client handles, by client sandbox, then server name.
pub(super) struct PerClient {
    held: Mutex<Held>,
    /// Handles held at most, over all clients.
    cap: usize,
    /// Bumped whenever a handle is made or taken out ([`PerClient::changes`]).
    changes: AtomicU64,
}

#[derive(Default)]
struct Held {
    by_client: HashMap<String, BTreeMap<String, Arc<Upstream>>>,
    count: usize,
}

impl PerClient {
    /// None yet, at most `cap`.
    pub(super) fn new(cap: usize) -> Self {
        PerClient {
            held: Mutex::new(Held::default()),
            cap,
            changes: AtomicU64::new(0),
        }
    }

    /// Handles held at most.
    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// How many handles are held, over all clients.
    pub(super) fn count(&self) -> usize {
        self.held.lock().expect("per-client lock").count
    }

    /// How many times a handle was made or taken out: equal readings mean every client has
    /// the handles it had.
    pub(super) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// `client`'s handle of `server`, if it has one.
    pub(super) fn get(&self, client: &str, server: &str) -> Option<Arc<Upstream>> {
        let held = self.held.lock().expect("per-client lock");
        held.by_client.get(client)?.get(server).cloned()
    }

    /// `client`'s handle of `server`, made by `make` when it has none.
    ///
    /// # Errors
    /// `Err(())` when it has none and [`PerClient::cap`] handles are held already.
    pub(super) fn get_or_make(
        &self,
        client: &str,
        server: &str,
        make: impl FnOnce() -> Upstream,
    ) -> Result<Arc<Upstream>, ()> {
        let mut held = self.held.lock().expect("per-client lock");
        if let Some(up) = held.by_client.get(client).and_then(|s| s.get(server)) {
            return Ok(up.clone());
        }
        if held.count >= self.cap {
            return Err(());
        }
        let up = Arc::new(make());
        self.changes.fetch_add(1, Ordering::AcqRel);
        held.count += 1;
        held.by_client
            .entry(client.to_string())
            .or_default()
            .insert(server.to_string(), up.clone());
        Ok(up)
    }

    /// Takes out every handle of `client`.
    pub(super) fn take(&self, client: &str) -> Vec<Arc<Upstream>> {
        let mut held = self.held.lock().expect("per-client lock");
        let Some(servers) = held.by_client.remove(client) else {
            return Vec::new();
        };
        self.changes.fetch_add(1, Ordering::AcqRel);
        held.count -= servers.len();
        servers.into_values().collect()
    }

    /// Takes out every handle of every client.
    pub(super) fn take_all(&self) -> Vec<Arc<Upstream>> {
        let mut held = self.held.lock().expect("per-client lock");
        self.changes.fetch_add(1, Ordering::AcqRel);
        held.count = 0;
        std::mem::take(&mut held.by_client)
            .into_values()
            .flat_map(BTreeMap::into_values)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ServerSpec, Transport};

    fn upstream(name: &str) -> Upstream {
        let stdio = Transport::Stdio {
            command: "x".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        };
        Upstream::new(Arc::new(ServerSpec::new(name, stdio, "/x.json".as_ref())))
    }

    #[test]
    fn one_handle_per_client_and_server_at_most_the_cap_and_released_by_client() {
        let held = PerClient::new(3);
        let a1 = held.get_or_make("a", "s", || upstream("s")).expect("made");
        let made = held.changes();
        assert_ne!(made, 0, "a handle made is a change");
        let again = held
            .get_or_make("a", "s", || panic!("made twice"))
            .expect("the same");
        assert!(Arc::ptr_eq(&a1, &again));
        assert_eq!(held.changes(), made, "a handle found is none");
        held.get_or_make("a", "t", || upstream("t")).expect("made");
        let b1 = held.get_or_make("b", "s", || upstream("s")).expect("made");
        assert!(!Arc::ptr_eq(&a1, &b1));
        assert_eq!(held.count(), 3);
        // Full: a new one is refused, an existing one still found.
        assert!(held.get_or_make("c", "s", || upstream("s")).is_err());
        assert!(held.get_or_make("b", "s", || upstream("s")).is_ok());
        let before = held.changes();
        assert_eq!(held.take("a").len(), 2);
        assert_ne!(held.changes(), before, "handles taken out are a change");
        assert!(held.get("a", "s").is_none() && held.get("b", "s").is_some());
        let before = held.changes();
        assert!(held.take("a").is_empty());
        assert_eq!(held.changes(), before);
        held.get_or_make("c", "s", || upstream("s"))
            .expect("room again");
        assert_eq!(held.take_all().len(), 2);
        assert_eq!(held.count(), 0);
    }
}
