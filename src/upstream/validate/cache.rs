//! The compiled checks kept: by server, each valid for the one tool list it was made from, at
//! most [`MAX_CHECKS`] over all servers, the least recently used dropped first.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::Tool;

use super::check::Check;

/// Compiled checks kept at most, over all servers.
pub(super) const MAX_CHECKS: usize = 128;

/// The compiled checks, by server, with a use clock for dropping the least recently used.
#[derive(Default)]
pub(super) struct Cache {
    pub(super) servers: HashMap<String, ServerChecks>,
    /// Checks held, over all servers.
    pub(super) len: usize,
    /// Bumped on every use; a check's `used` is the clock at its last use.
    clock: u64,
}

/// The checks of one server's tools, valid for the one tool list they were made from.
pub(super) struct ServerChecks {
    /// The list the checks belong to (pointer identity is the cache key; holding it keeps the
    /// address from being reused by another list).
    tools: Arc<Vec<Tool>>,
    /// By tool: the check and when it was last used.
    checks: HashMap<String, (Arc<Check>, u64)>,
}

impl Cache {
    /// The check of `tool` made from `server`'s list `tools`, marked as used now.
    pub(super) fn get(
        &mut self,
        server: &str,
        tools: &Arc<Vec<Tool>>,
        tool: &str,
    ) -> Option<Arc<Check>> {
        let clock = self.tick();
        let s = self.servers.get_mut(server)?;
        if !Arc::ptr_eq(&s.tools, tools) {
            return None;
        }
        let (check, used) = s.checks.get_mut(tool)?;
        *used = clock;
        Some(check.clone())
    }

    /// The next value of the use clock.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Keeps `check` for `tool` of `server`'s list `tools` (the server's checks of an older
    /// list are dropped), then drops the least recently used checks past [`MAX_CHECKS`].
    pub(super) fn insert(
        &mut self,
        server: &str,
        tools: &Arc<Vec<Tool>>,
        tool: &str,
        check: Arc<Check>,
    ) {
        let clock = self.tick();
        let entry = self
            .servers
            .entry(server.to_string())
            .or_insert_with(|| ServerChecks {
                tools: tools.clone(),
                checks: HashMap::new(),
            });
        if !Arc::ptr_eq(&entry.tools, tools) {
            self.len -= entry.checks.len();
            entry.tools = tools.clone();
            entry.checks.clear();
        }
        if entry
            .checks
            .insert(tool.to_string(), (check, clock))
            .is_none()
        {
            self.len += 1;
        }
        while self.len > MAX_CHECKS {
            self.drop_least_recent();
        }
    }

    /// Drops the check used longest ago, and its server's entry when that was its last one.
    fn drop_least_recent(&mut self) {
        let oldest = self
            .servers
            .iter()
            .flat_map(|(server, s)| {
                s.checks
                    .iter()
                    .map(move |(tool, (_, used))| (*used, server, tool))
            })
            .min_by_key(|(used, _, _)| *used)
            .map(|(_, server, tool)| (server.clone(), tool.clone()));
        let Some((server, tool)) = oldest else {
            self.len = 0;
            return;
        };
        if let Some(s) = self.servers.get_mut(&server) {
            s.checks.remove(&tool);
            self.len -= 1;
            if s.checks.is_empty() {
                self.servers.remove(&server);
            }
        }
    }
}
