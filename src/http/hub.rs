//! [`Hub`]: the client sandboxes of `serve --http`, the [`SandboxRouter`] the MCP face asks.
//! One sandbox per 2025-11-25 MCP session; under 2026-07-28, one per handle, minted by the
//! first `run_python` without one and bound to the token that minted it. It enforces the
//! sandbox limits (`MCP_BRIDGE_MAX_SANDBOXES`, `MCP_BRIDGE_SANDBOXES_PER_TOKEN`) on the awake
//! sandboxes: at a limit, the least recently used idle one (of that token, or of anyone) is
//! put to sleep (its container stopped, its namespace saved, brought back by its next run)
//! and only when every one is running code is a new one refused. Sleeping sandboxes are
//! bounded too ([`SLEEPING_PER_AWAKE`] times each limit; past it the least recently used is
//! forgotten). It hands out warm pool sandboxes, forgets a client's sandbox (removing its
//! container and snapshot) when the client releases it, its session ends, its token is
//! revoked or rotated, or it went unused for `MCP_BRIDGE_SANDBOX_TTL`, and counts the runs in
//! flight so that a drain can wait for them. A sandbox's container stops
//! earlier when idle (`MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT`) and comes back with its variables:
//! the sandbox actor does that.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ErrorCode;
use rmcp::ErrorData;
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::handle;
use super::pool::{Pooled, WarmPool};
use super::room::{lru_idle, sleepers_past, Standing};
use crate::app::{MadeSandbox, SandboxMaker};
use crate::calls::Caller;
use crate::config::ServeSettings;
use crate::ids::random_id;
use crate::outbox::Outbox;
use crate::server::{Routed, SandboxRouter, Who};

/// JSON-RPC error code of a refusal for a limit (the implementation-defined server range).
pub const LIMIT_CODE: ErrorCode = ErrorCode(-32000);
/// Sleeping sandboxes kept at most, per token and in all, as a multiple of the awake limits
/// (`MCP_BRIDGE_SANDBOXES_PER_TOKEN`, `MCP_BRIDGE_MAX_SANDBOXES`): each holds an actor and a
/// snapshot on disk.
pub const SLEEPING_PER_AWAKE: usize = 4;

/// What a client's sandbox is found by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// A 2025-11-25 session of a token.
    Session(Arc<str>, String),
    /// A 2026-07-28 handle.
    Handle(String),
}

/// One client's sandbox.
struct Slot {
    token: Arc<str>,
    caller: Arc<Caller>,
    made: MadeSandbox,
    last_used: Instant,
    /// Runs in flight.
    busy: usize,
    /// Counts against the limits; false once put to sleep to make room (its container
    /// stopped, its namespace saved for its next run).
    awake: bool,
}

/// Called with a slot's key when its sandbox is forgotten (per-client servers close).
pub type OnRelease = Arc<dyn Fn(&str) + Send + Sync>;

/// The client sandboxes.
pub struct Hub {
    maker: SandboxMaker,
    settings: ServeSettings,
    slots: Mutex<HashMap<Key, Slot>>,
    pool: WarmPool,
    closing: AtomicBool,
    inflight: AtomicUsize,
    idle: Notify,
    on_release: Mutex<Option<OnRelease>>,
}

/// Held while a run goes on.
struct Lease {
    hub: Arc<Hub>,
    key: Key,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(slot) = self.hub.lock().get_mut(&self.key) {
            slot.busy = slot.busy.saturating_sub(1);
            slot.last_used = Instant::now();
        }
        if self.hub.inflight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.hub.idle.notify_waiters();
        }
    }
}

impl Hub {
    /// A hub making sandboxes with `maker`, within `settings`' limits; fills the warm pool.
    pub fn new(maker: SandboxMaker, settings: ServeSettings) -> Arc<Self> {
        let pool = WarmPool::new(settings.warm_pool);
        pool.fill(&maker);
        Arc::new(Hub {
            maker,
            settings,
            slots: Mutex::new(HashMap::new()),
            pool,
            closing: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            idle: Notify::new(),
            on_release: Mutex::new(None),
        })
    }

    /// Calls `f` with each forgotten sandbox's key (the upstream pool closes that client's
    /// own server processes).
    pub fn on_release(&self, f: OnRelease) {
        *self.on_release.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Client sandboxes now (the pool not counted).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no client has a sandbox.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tells the release hook about the sandboxes put to sleep: their `perClient` server
    /// processes close (a woken sandbox starts its own again), so sleepers hold none.
    fn slept(&self, sandboxes: Vec<String>) {
        if let Some(hook) = self.hook() {
            for sandbox in sandboxes {
                hook(&sandbox);
            }
        }
    }

    fn hook(&self) -> Option<OnRelease> {
        self.on_release
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops `slots`' sandboxes (container removed, snapshot deleted) and tells the release
    /// hook.
    fn end(&self, slots: Vec<Slot>) {
        let hook = self.hook();
        for slot in slots {
            tracing::info!(token = %crate::shown::Shown(&slot.token), sandbox = %slot.caller.sandbox, "client sandbox released");
            slot.made.ct.cancel();
            if let Some(hook) = &hook {
                hook(&slot.caller.sandbox);
            }
        }
    }

    /// Forgets the sandboxes unused for `MCP_BRIDGE_SANDBOX_TTL` and keeps the pool's from
    /// being stopped as idle; returns how many were forgotten.
    pub fn reap(&self) -> usize {
        let ttl = self.settings.sandbox_ttl;
        let now = Instant::now();
        let gone: Vec<Slot> = {
            let mut slots = self.lock();
            let old: Vec<Key> = slots
                .iter()
                .filter(|(_, s)| s.busy == 0 && now.duration_since(s.last_used) >= ttl)
                .map(|(k, _)| k.clone())
                .collect();
            old.iter().filter_map(|k| slots.remove(k)).collect()
        };
        let n = gone.len();
        self.end(gone);
        self.pool.touch();
        n
    }

    /// How often [`Hub::reap`] should run.
    pub fn reap_every(&self) -> Duration {
        (self.settings.sandbox_ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// Forgets the sandboxes (and handles) of the tokens `ended` (removed, or given another
    /// secret, by a reload of the tokens file).
    pub fn revoke(&self, ended: &HashSet<Arc<str>>) -> usize {
        let gone: Vec<Slot> = {
            let mut slots = self.lock();
            let old: Vec<Key> = slots
                .iter()
                .filter(|(_, s)| ended.contains(&s.token))
                .map(|(k, _)| k.clone())
                .collect();
            old.iter().filter_map(|k| slots.remove(k)).collect()
        };
        let n = gone.len();
        self.end(gone);
        n
    }

    /// Refuses new runs from now on, then waits up to `limit` for the runs in flight; true
    /// when none is left.
    pub async fn drain(&self, limit: Duration) -> bool {
        self.closing.store(true, Ordering::Release);
        self.pool.drain();
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.idle.notified();
            if self.inflight.load(Ordering::Acquire) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.inflight.load(Ordering::Acquire) == 0;
            }
        }
    }

    /// Runs in flight.
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::Acquire)
    }

    /// Room for one more awake sandbox of `token`: at a limit, the least recently used idle
    /// awake sandbox (of `token` for its own limit, of anyone for the total) is put to sleep.
    /// Notes in `room` the sandboxes put to sleep, and the sleeping ones forgotten for good
    /// (past their bound), to release once the lock is let go.
    ///
    /// # Errors
    /// The limit's refusal, when every sandbox it counts is running code.
    fn make_room(
        &self,
        slots: &mut HashMap<Key, Slot>,
        token: &Arc<str>,
        key: &Key,
        room: &mut Room,
    ) -> Result<(), ErrorData> {
        let per_token = self.settings.sandboxes_per_token;
        let mine = slots
            .values()
            .filter(|s| s.awake && &s.token == token)
            .count();
        if mine >= per_token && !put_to_sleep(slots, Some(token), room) {
            return Err(limit(
                "MCP_BRIDGE_SANDBOXES_PER_TOKEN",
                per_token,
                "every sandbox this token may hold is running code; try again when one \
                 finishes, or release one (run_python with its `sandbox` and release=true)",
            ));
        }
        let total = self.settings.max_sandboxes;
        let awake = slots.values().filter(|s| s.awake).count();
        if awake >= total && !put_to_sleep(slots, None, room) {
            return Err(limit(
                "MCP_BRIDGE_MAX_SANDBOXES",
                total,
                "every client sandbox the bridge may hold is running code; try again when \
                 one finishes",
            ));
        }
        room.forgotten.extend(forget_sleepers(
            slots,
            token,
            key,
            per_token.saturating_mul(SLEEPING_PER_AWAKE),
            total.saturating_mul(SLEEPING_PER_AWAKE),
        ));
        Ok(())
    }
}

/// What making room did, acted on once the lock is let go.
#[derive(Default)]
struct Room {
    /// The sandbox ids put to sleep.
    slept: Vec<String>,
    /// The sleeping slots forgotten for good.
    forgotten: Vec<Slot>,
}

impl Standing for Slot {
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

/// Puts the least recently used idle awake sandbox (of `token`, or of anyone) to sleep; false
/// when every one is running code.
fn put_to_sleep(slots: &mut HashMap<Key, Slot>, token: Option<&Arc<str>>, room: &mut Room) -> bool {
    let Some(slot) = lru_idle(slots, token).and_then(|k| slots.get_mut(&k)) else {
        return false;
    };
    slot.awake = false;
    slot.made.sandbox.evict();
    room.slept.push(slot.caller.sandbox.clone());
    tracing::info!(token = %crate::shown::Shown(&slot.token), sandbox = %slot.caller.sandbox, "client sandbox put to sleep to make room");
    true
}

/// Removes the sleeping sandboxes past their bounds ([`sleepers_past`]); returns them.
fn forget_sleepers(
    slots: &mut HashMap<Key, Slot>,
    token: &Arc<str>,
    keep: &Key,
    per_token: usize,
    total: usize,
) -> Vec<Slot> {
    sleepers_past(slots, token, keep, per_token, total)
        .iter()
        .filter_map(|k| slots.remove(k))
        .collect()
}

/// A limit refusal: the code, a message naming the setting, and the setting as data.
fn limit(setting: &str, value: usize, why: &str) -> ErrorData {
    ErrorData::new(
        LIMIT_CODE,
        format!("{why} ({setting}={value})"),
        Some(json!({"limit": setting, "value": value})),
    )
}

/// The refusal of a handle that is not one of this token's live sandboxes: the same for a
/// forged, expired or another token's handle, so that nothing tells them apart.
fn unknown_handle() -> ErrorData {
    ErrorData::invalid_params(
        "unknown or expired sandbox handle; leave out `sandbox` to start a new sandbox",
        None,
    )
}

#[async_trait::async_trait]
impl SandboxRouter for Arc<Hub> {
    async fn route(&self, who: &Who, handle: Option<&str>) -> Result<Routed, ErrorData> {
        if self.closing.load(Ordering::Acquire) {
            return Err(ErrorData::new(
                LIMIT_CODE,
                "the bridge is shutting down; no new runs",
                None,
            ));
        }
        let (key, minted) = match (&who.session, handle) {
            (Some(session), _) => (Key::Session(who.token.clone(), session.clone()), None),
            (None, Some(h)) if handle::well_formed(h) => (Key::Handle(h.to_string()), None),
            (None, Some(_)) => return Err(unknown_handle()),
            (None, None) => {
                let h = handle::mint();
                (Key::Handle(h.clone()), Some(h))
            }
        };
        let mut took_from_pool = false;
        let mut room = Room::default();
        let routed = {
            let mut slots = self.lock();
            if let Some(slot) = slots.get(&key) {
                if slot.token != who.token {
                    return Err(unknown_handle());
                }
                if !slot.awake {
                    // Asleep: it wakes (its next run restores its namespace) if there is room.
                    self.make_room(&mut slots, &who.token, &key, &mut room)?;
                    if let Some(slot) = slots.get_mut(&key) {
                        slot.awake = true;
                    }
                }
            }
            if !slots.contains_key(&key) {
                if matches!(key, Key::Handle(_)) && minted.is_none() {
                    return Err(unknown_handle());
                }
                self.make_room(&mut slots, &who.token, &key, &mut room)?;
                let Pooled { slot, made } = match self.pool.take() {
                    Some(p) => {
                        took_from_pool = true;
                        p
                    }
                    None => {
                        let slot = random_id();
                        let made = self.maker.make(&slot);
                        Pooled { slot, made }
                    }
                };
                let caller = Arc::new(Caller {
                    token: who.token.to_string(),
                    sandbox: slot,
                    identity: who.identity.as_deref().map(str::to_string),
                });
                tracing::info!(token = %crate::shown::Shown(&who.token), sandbox = %caller.sandbox, pooled = took_from_pool, "client sandbox assigned");
                slots.insert(
                    key.clone(),
                    Slot {
                        token: who.token.clone(),
                        caller,
                        made,
                        last_used: Instant::now(),
                        busy: 0,
                        awake: true,
                    },
                );
            }
            let slot = slots.get_mut(&key).expect("present");
            if slot.token != who.token {
                return Err(unknown_handle());
            }
            slot.busy += 1;
            slot.last_used = Instant::now();
            self.inflight.fetch_add(1, Ordering::AcqRel);
            Routed {
                sandbox: slot.made.sandbox.clone(),
                outbox: slot.made.outbox.clone(),
                caller: slot.caller.clone(),
                minted,
                lease: Box::new(Lease {
                    hub: self.clone(),
                    key,
                }),
            }
        };
        self.slept(room.slept);
        self.end(room.forgotten);
        if took_from_pool {
            self.pool.fill(&self.maker);
        }
        Ok(routed)
    }

    fn release(&self, who: &Who, handle: Option<&str>) -> Result<(), ErrorData> {
        let key = match (&who.session, handle) {
            (Some(session), None) => Key::Session(who.token.clone(), session.clone()),
            (None, Some(h)) => Key::Handle(h.to_string()),
            _ => return Err(unknown_handle()),
        };
        let gone = {
            let mut slots = self.lock();
            match slots.get(&key) {
                Some(slot) if slot.token == who.token => slots.remove(&key),
                _ => return Err(unknown_handle()),
            }
        };
        self.end(gone.into_iter().collect());
        Ok(())
    }

    fn outboxes(&self, who: &Who) -> Vec<Arc<Outbox>> {
        let slots = self.lock();
        match &who.session {
            Some(session) => slots
                .get(&Key::Session(who.token.clone(), session.clone()))
                .map(|s| vec![s.made.outbox.clone()])
                .unwrap_or_default(),
            None => slots
                .iter()
                .filter(|(k, s)| matches!(k, Key::Handle(_)) && s.token == who.token)
                .map(|(_, s)| s.made.outbox.clone())
                .collect(),
        }
    }

    fn session_ended(&self, token: &str, session: &str) {
        let gone = self
            .lock()
            .remove(&Key::Session(Arc::from(token), session.to_string()));
        if let Some(slot) = gone {
            self.end(vec![slot]);
        }
    }
}
