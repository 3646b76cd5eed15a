//! `load`: the servers a run names, started if needed, and their tool lists as the exec frame
//! carries them (one `docs::proxy_entry` per tool, serialized once per tool list).

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::time::Instant;

use super::UpstreamHostCalls;
use crate::calls::{Caller, LoadError, LoadedTools, Narrowing};
use crate::upstream::docs;

/// A server's tool list and its exec-frame entries.
pub(super) type ProxyEntries = (Arc<Vec<Tool>>, Arc<RawValue>);

impl UpstreamHostCalls {
    /// Starts (if needed) the servers a run names (`caller`'s own processes of `"perClient"`
    /// ones); their entries are rebuilt only when a server's tool list changed (the processes
    /// of one server share their list). A run with a `narrowing` gets only the tools inside it
    /// (built for that run, not kept). A run naming the same servers as the last one, for the
    /// same client, with no tool list changed, gets the last answer back (`last_load.rs`):
    /// before any server is looked up while none of their connections ended and the pool's
    /// change count reads the same, else after the lookups.
    pub(super) async fn load_servers(
        &self,
        servers: &[String],
        narrowing: Option<&Narrowing>,
        caller: Option<&Caller>,
        deadline: Instant,
    ) -> Result<LoadedTools, LoadError> {
        let key = caller.map(|c| c.sandbox.as_str());
        let changes = self.pool.changes();
        if narrowing.is_none() {
            if let Some(same) = self.last_load.fresh(servers, key, changes) {
                return Ok(same);
            }
        }
        let lists = self
            .pool
            .load_lists_signed_in(servers, caller, deadline)
            .await
            .map_err(|e| LoadError::Backend(Box::new(e)))?;
        // A server that needs sign-in does not fail the run: it is left out of the tool
        // entries (the sandbox's proxy of it sends every call to the host, which answers
        // `AuthRequiredError` naming `login`), and such a load is not kept.
        if lists.iter().any(Option::is_none) {
            return Ok(Arc::new(
                servers
                    .iter()
                    .zip(lists)
                    .filter_map(|(server, tools)| {
                        let tools = tools?;
                        let inside: Vec<&Tool> = tools
                            .iter()
                            .filter(|t| narrowing.is_none_or(|n| n.allows(server, &t.name)))
                            .collect();
                        Some((server.clone(), proxy_entries(inside)))
                    })
                    .collect(),
            ));
        }
        let lists: Vec<Arc<Vec<Tool>>> = lists.into_iter().flatten().collect();
        if let Some(n) = narrowing {
            return Ok(Arc::new(
                servers
                    .iter()
                    .zip(lists)
                    .map(|(server, tools)| {
                        let inside: Vec<&Tool> =
                            tools.iter().filter(|t| n.allows(server, &t.name)).collect();
                        (server.clone(), proxy_entries(inside))
                    })
                    .collect(),
            ));
        }
        let watch = |lists: &[Arc<Vec<Tool>>]| {
            let lives = self.pool.lives_listing(servers, caller, lists)?;
            let ends = lives
                .iter()
                .map(|l| (l.closed.clone(), l.stop.clone()))
                .collect();
            Some(super::last_load::Watch { changes, ends })
        };
        if let Some(same) = self.last_load.get(servers, key, &lists) {
            self.last_load
                .keep(servers, key, lists.clone(), same.clone(), watch(&lists));
            return Ok(same);
        }
        let loaded: LoadedTools = {
            let mut entries = self.proxy_entries.lock().expect("proxy entries lock");
            Arc::new(
                servers
                    .iter()
                    .zip(&lists)
                    .map(|(server, tools)| {
                        let json = match entries.get(server) {
                            Some((list, json)) if Arc::ptr_eq(list, tools) => json.clone(),
                            _ => {
                                let json = proxy_entries(tools.iter());
                                entries.insert(server.clone(), (tools.clone(), json.clone()));
                                json
                            }
                        };
                        (server.clone(), json)
                    })
                    .collect(),
            )
        };
        let w = watch(&lists);
        self.last_load.keep(servers, key, lists, loaded.clone(), w);
        Ok(loaded)
    }
}

/// A tool list as the exec frame carries it: one `docs::proxy_entry` per tool, serialized once.
fn proxy_entries<'a>(tools: impl IntoIterator<Item = &'a Tool>) -> Arc<RawValue> {
    let list: Vec<Value> = tools.into_iter().map(docs::proxy_entry).collect();
    let text = serde_json::to_string(&list).expect("JSON values serialize");
    Arc::from(RawValue::from_string(text).expect("serde_json wrote valid JSON"))
}
