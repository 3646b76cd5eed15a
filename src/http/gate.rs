//! [`Gate`] and [`Conn`]: a connection of `serve --http` before and after it is admitted. A
//! connection is admitted by its first request with a good token (or, with no tokens file, at
//! accept, when it is this user's own). Until then it costs a slot nobody vouched for, so each
//! peer ([`PeerKey`]: a local user on loopback, an IPv4 address, an IPv6 /64) may hold at most
//! `MCP_BRIDGE_HTTP_CONNECTIONS_PER_PEER` of them (more are closed at accept), and each is
//! closed `MCP_BRIDGE_HTTP_UNAUTH_TIMEOUT` after it opened unless admitted by then.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Who a connection's unadmitted slots are counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerKey {
    /// A local user on loopback (any `127.x.y.z` source address is theirs to pick, their uid
    /// is not).
    User(u32),
    /// A loopback connection whose owner the kernel did not name: all of them one peer, never
    /// one per `127.x.y.z` source address (a local user may pick any of those).
    Loopback,
    /// A remote address: IPv4 as it is, IPv6 by its /64 (one site's prefix).
    Addr(IpAddr),
}

impl PeerKey {
    /// The key of a connection from `peer`, whose owner on loopback is `uid` when known.
    pub fn of(peer: IpAddr, uid: Option<u32>) -> PeerKey {
        let ip = peer.to_canonical();
        match (ip, uid) {
            (ip, Some(uid)) if ip.is_loopback() => PeerKey::User(uid),
            (ip, None) if ip.is_loopback() => PeerKey::Loopback,
            (IpAddr::V6(v6), _) if !v6.is_loopback() => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                PeerKey::Addr(IpAddr::from(octets))
            }
            (ip, _) => PeerKey::Addr(ip),
        }
    }
}

/// The unadmitted connections of each peer, each peer capped.
pub struct Gate {
    per_peer: usize,
    open: Mutex<HashMap<PeerKey, usize>>,
}

impl Gate {
    /// A gate letting each peer hold at most `per_peer` unadmitted connections.
    pub fn new(per_peer: usize) -> Arc<Self> {
        Arc::new(Gate {
            per_peer,
            open: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PeerKey, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more unadmitted connection of `key`; `None` when it holds its cap.
    pub fn enter(self: &Arc<Self>, key: PeerKey) -> Option<Ticket> {
        let mut open = self.lock();
        let n = open.entry(key).or_insert(0);
        if *n >= self.per_peer {
            return None;
        }
        *n += 1;
        Some(Ticket {
            gate: self.clone(),
            key,
        })
    }

    /// Unadmitted connections `key` holds now.
    #[cfg(test)]
    pub fn held(&self, key: PeerKey) -> usize {
        self.lock().get(&key).copied().unwrap_or(0)
    }
}

/// One unadmitted connection's place at the gate, given back when dropped.
pub struct Ticket {
    gate: Arc<Gate>,
    key: PeerKey,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.gate.lock();
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// One connection, as its requests see it.
pub struct Conn {
    own_user: bool,
    admitted: AtomicBool,
    ticket: Mutex<Option<Ticket>>,
}

impl Conn {
    /// A connection admitted at accept (with no tokens file: this user's own).
    pub fn own() -> Self {
        Conn {
            own_user: true,
            admitted: AtomicBool::new(true),
            ticket: Mutex::new(None),
        }
    }

    /// A connection holding `ticket` until a request of it is admitted.
    pub fn unadmitted(ticket: Ticket) -> Self {
        Conn {
            own_user: false,
            admitted: AtomicBool::new(false),
            ticket: Mutex::new(Some(ticket)),
        }
    }

    /// True when it comes from this user's own process (asked only with no tokens file).
    pub fn own_user(&self) -> bool {
        self.own_user
    }

    /// Marks it admitted (a request of it passed): its place at the gate is given back and
    /// the unadmitted connections' time limit no longer applies.
    pub fn admit(&self) {
        if !self.admitted.swap(true, Ordering::AcqRel) {
            self.ticket.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }

    /// True once a request of it was admitted.
    pub fn admitted(&self) -> bool {
        self.admitted.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn peers_are_users_on_loopback_and_addresses_elsewhere() {
        assert_eq!(PeerKey::of(ip("127.0.0.2"), Some(7)), PeerKey::User(7));
        assert_eq!(PeerKey::of(ip("::1"), Some(7)), PeerKey::User(7));
        assert_eq!(
            PeerKey::of(ip("::ffff:127.0.0.1"), Some(7)),
            PeerKey::User(7)
        );
        // An owner not told: every loopback source address is the one peer.
        assert_eq!(PeerKey::of(ip("127.0.0.2"), None), PeerKey::Loopback);
        assert_eq!(PeerKey::of(ip("127.9.8.7"), None), PeerKey::Loopback);
        assert_eq!(PeerKey::of(ip("::1"), None), PeerKey::Loopback);
        assert_eq!(
            PeerKey::of(ip("10.1.2.3"), Some(7)),
            PeerKey::Addr(ip("10.1.2.3"))
        );
        assert_eq!(
            PeerKey::of(ip("::ffff:10.1.2.3"), None),
            PeerKey::Addr(ip("10.1.2.3"))
        );
        assert_eq!(
            PeerKey::of(ip("2001:db8:1:2:aaaa::1"), None),
            PeerKey::of(ip("2001:db8:1:2:bbbb::9"), None),
            "one /64 is one peer"
        );
        assert_ne!(
            PeerKey::of(ip("2001:db8:1:2::1"), None),
            PeerKey::of(ip("2001:db8:1:3::1"), None)
        );
    }

    #[test]
    fn each_peer_holds_at_most_its_cap_until_admitted() {
        let gate = Gate::new(2);
        let (a, b) = (PeerKey::User(1), PeerKey::User(2));
        let t1 = gate.enter(a).expect("first");
        let t2 = gate.enter(a).expect("second");
        assert!(gate.enter(a).is_none(), "a third from the same peer");
        let other = gate.enter(b).expect("another peer has its own count");
        drop(t1);
        assert_eq!(gate.held(a), 1);
        let conn = Conn::unadmitted(gate.enter(a).expect("a place was given back"));
        assert!(!conn.admitted() && !conn.own_user());
        assert!(gate.enter(a).is_none());
        conn.admit();
        conn.admit();
        assert!(conn.admitted());
        assert_eq!(gate.held(a), 1, "admitted: its place is given back, once");
        drop((t2, other, conn));
        assert_eq!((gate.held(a), gate.held(b)), (0, 0));
        assert!(gate.lock().is_empty(), "no empty entries are kept");
        assert!(Conn::own().admitted());
    }
}
