//! [`RunBudget`]: the connections and bytes one run may use through the proxy
//! (`MCP_BRIDGE_NETWORK_MAX_CONNECTIONS`, `MCP_BRIDGE_NETWORK_MAX_BYTES`), reset when the
//! session starts the next run. One per sandbox; its connections share it.

use std::sync::Mutex;

use super::decide::Refusal;

/// The counters of the current run.
#[derive(Debug)]
struct Counts {
    run: String,
    connections: u64,
    bytes: u64,
}

/// One sandbox's network budget; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct RunBudget {
    max_connections: u64,
    max_bytes: u64,
    counts: Mutex<Counts>,
}

impl RunBudget {
    /// A budget of `max_connections` and `max_bytes` per run.
    pub fn new(max_connections: u64, max_bytes: u64) -> RunBudget {
        RunBudget {
            max_connections,
            max_bytes,
            counts: Mutex::new(Counts {
                run: String::new(),
                connections: 0,
                bytes: 0,
            }),
        }
    }

    /// A new run begins: its id, and fresh counters.
    pub fn begin_run(&self, run: &str) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.run = run.chars().take(128).collect();
        c.connections = 0;
        c.bytes = 0;
    }

    /// Counts a new connection; returns the run's id.
    ///
    /// # Errors
    /// [`Refusal::Budget`] when the run has used its connections.
    pub fn admit(&self) -> Result<String, Refusal> {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if c.connections >= self.max_connections {
            return Err(Refusal::Budget("MCP_BRIDGE_NETWORK_MAX_CONNECTIONS"));
        }
        c.connections += 1;
        Ok(c.run.clone())
    }

    /// Counts `n` bytes moved; false when the run's bytes are used up (they are not counted).
    pub fn take(&self, n: u64) -> bool {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if c.bytes.saturating_add(n) > self.max_bytes {
            return false;
        }
        c.bytes += n;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_gets_its_own_connections_and_bytes() {
        let b = RunBudget::new(2, 100);
        b.begin_run("r1");
        assert_eq!(b.admit().expect("first"), "r1");
        assert!(b.admit().is_ok());
        assert!(matches!(b.admit(), Err(Refusal::Budget(_))));
        assert!(b.take(60) && !b.take(41) && b.take(40) && !b.take(1));
        b.begin_run("r2");
        assert_eq!(b.admit().expect("again"), "r2");
        assert!(b.take(100));
    }
}
