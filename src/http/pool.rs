//! [`WarmPool`]: started, unassigned sandboxes kept ready so that a new client's first call
//! does not wait for a container to start (`MCP_BRIDGE_WARM_POOL`; 0 turns it off). Each is
//! made with its own slot and prewarmed (which also imports `MCP_BRIDGE_PRELOAD`'s modules);
//! taking one starts a replacement in the background. The hub owns it.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::app::{MadeSandbox, SandboxMaker};
use crate::ids::random_id;

/// An unassigned sandbox: its slot key and the sandbox.
pub struct Pooled {
    /// The slot key it was made for (its containers' label, its snapshot's name).
    pub slot: String,
    /// The sandbox.
    pub made: MadeSandbox,
}

/// The warm pool.
pub struct WarmPool {
    target: usize,
    ready: Mutex<VecDeque<Pooled>>,
}

impl WarmPool {
    /// A pool keeping `target` sandboxes ready (none made yet: see [`WarmPool::fill`]).
    pub fn new(target: usize) -> Self {
        WarmPool {
            target,
            ready: Mutex::new(VecDeque::new()),
        }
    }

    /// A sandbox from the pool, if one is ready; the caller refills.
    pub fn take(&self) -> Option<Pooled> {
        self.lock().pop_front()
    }

    /// Makes and prewarms sandboxes until `target` are in the pool. Making one is cheap (an
    /// actor); its container starts in the actor's own task.
    pub fn fill(&self, maker: &SandboxMaker) {
        let mut ready = self.lock();
        while ready.len() < self.target {
            let slot = random_id();
            let made = maker.make(&slot);
            made.sandbox.prewarm();
            ready.push_back(Pooled { slot, made });
        }
    }

    /// Keeps the unassigned sandboxes from being stopped as idle.
    pub fn touch(&self) {
        for p in self.lock().iter() {
            p.made.sandbox.touch();
        }
    }

    /// Stops every unassigned sandbox (the hub is closing).
    pub fn drain(&self) {
        for p in self.lock().drain(..) {
            p.made.ct.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pooled>> {
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }
}
