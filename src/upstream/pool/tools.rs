//! The tool lists of [`UpstreamPool`]: a server's tools (live, cached or by starting it), what
//! is known without starting anything, the hints a call reads, and the background index that
//! search reads, built once with [`INDEX_PARALLELISM`] starts at a time.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::Tool;
use tokio::time::Instant;

use super::{UpstreamPool, INDEX_PARALLELISM};
use crate::calls::Caller;
use crate::config::ServerSpec;
use crate::upstream::client::{Upstream, START_TIMEOUT_SECS};
use crate::upstream::error::UpstreamError;

impl UpstreamPool {
    /// The tools of `name`: live if connected, else cached, else by starting it.
    ///
    /// # Errors
    /// Unknown server or start failure.
    pub async fn tools(
        &self,
        name: &str,
        deadline: Instant,
    ) -> Result<Arc<Vec<Tool>>, UpstreamError> {
        self.tools_for(name, None, deadline).await
    }

    /// [`UpstreamPool::tools`] for a run of `caller` ([`UpstreamPool::for_caller`]): the
    /// cached list serves any client; only a start is the caller's own.
    ///
    /// # Errors
    /// Unknown server, start failure, or no process for `caller`.
    pub async fn tools_for(
        &self,
        name: &str,
        caller: Option<&Caller>,
        deadline: Instant,
    ) -> Result<Arc<Vec<Tool>>, UpstreamError> {
        let up = self.peek(name, caller)?;
        if let Some(live) = up.live_now() {
            return Ok(live.tools);
        }
        if let Some(cached) = self.cache.get(&up.spec) {
            return Ok(cached);
        }
        let up = self.upstream(name, caller)?;
        Ok(self.connect_up(&up, deadline).await?.tools)
    }

    /// Every server's tools known without starting anything (live, else cached).
    pub fn known_tools(&self) -> Vec<(String, Arc<Vec<Tool>>)> {
        self.upstreams
            .keys()
            .filter_map(|name| Some((name.clone(), self.tools_now(name)?)))
            .collect()
    }

    /// `name`'s tools known without starting anything (live, else cached).
    pub fn tools_now(&self, name: &str) -> Option<Arc<Vec<Tool>>> {
        let up = self.upstreams.get(name)?;
        up.live_now()
            .map(|l| l.tools)
            .or_else(|| self.cache.get(&up.spec))
    }

    /// `tool`'s (`destructiveHint`, `readOnlyHint`) in the cached list of `spec`; `None` when
    /// there is no cached list or it has no such tool.
    pub fn cached_hints(&self, spec: &ServerSpec, tool: &str) -> Option<(bool, bool)> {
        crate::upstream::client::tool_hints(&self.cache.get(spec)?, tool)
    }

    /// Whether `spec` has a cached tool list.
    pub fn is_cached(&self, spec: &ServerSpec) -> bool {
        self.cache.has(spec)
    }

    /// Indexes the tools of every server with no cached tool list, once per pool: the first
    /// caller (the background indexer of `run`, or the first search of `exec`) runs the pass
    /// and every later or concurrent caller waits for it. Returns the servers that could not
    /// be indexed, with the reason. A caller that stops waiting (its deadline) does not stop a
    /// pass another caller drives; a pass whose only caller went away starts again next time.
    pub async fn ensure_indexed(&self) -> Arc<Vec<(String, String)>> {
        self.indexed
            .get_or_init(|| async { Arc::new(self.index_missing().await) })
            .await
            .clone()
    }

    /// Whether the first indexing pass is over.
    pub fn is_indexed(&self) -> bool {
        self.indexed.initialized()
    }

    /// Lists the tools of every server with no cache entry, on temporary connections that are
    /// closed afterwards (so indexing does not count as loading), a few servers at a time.
    /// Returns the servers that failed, with the error.
    async fn index_missing(&self) -> Vec<(String, String)> {
        let todo: Vec<Arc<ServerSpec>> = self
            .upstreams
            .values()
            .filter(|u| Self::indexable(&u.spec))
            .filter(|u| !self.is_cached(&u.spec))
            .map(|u| u.spec.clone())
            .collect();
        if todo.is_empty() {
            return Vec::new();
        }
        tracing::info!(
            servers = todo.len(),
            "indexing the tools of servers not seen before"
        );
        let sem = Arc::new(tokio::sync::Semaphore::new(INDEX_PARALLELISM));
        let failures = futures::future::join_all(todo.into_iter().map(|spec| {
            let sem = sem.clone();
            async move {
                let _permit = sem.acquire().await;
                let temp = Upstream::with_tasks(spec.clone(), self.tasks.clone());
                let deadline = Instant::now() + Duration::from_secs(START_TIMEOUT_SECS);
                let failed = match temp.connect(deadline).await {
                    Ok(live) => {
                        // Read back from disk when a search needs it: not kept meanwhile.
                        self.cache.put_on_disk(&spec, live.tools.clone());
                        None
                    }
                    Err(err) => {
                        tracing::warn!(server = %crate::shown::Shown(&spec.name), cause = %err, "could not index server");
                        Some((spec.name.clone(), err.to_string()))
                    }
                };
                temp.shutdown().await;
                failed
            }
        }))
        .await;
        failures.into_iter().flatten().collect()
    }

    /// Whether indexing may start `spec`: disabled servers (often broken or costly to start)
    /// are indexed only once a run loads them; a project's server without the user's consent
    /// never is.
    pub fn indexable(spec: &ServerSpec) -> bool {
        spec.consent.permits() && !spec.disabled
    }
}
