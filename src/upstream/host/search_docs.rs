//! `search_tool_docs`: a ranked search over every known tool list, waiting (until shortly
//! before the run's deadline) for the first indexing pass, and saying which servers it cannot
//! see yet and why. The index is rebuilt only when a tool list changed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::Tool;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::{visible, UpstreamHostCalls};
use crate::calls::{CallContext, Detail};
use crate::upstream::docs;
use crate::upstream::search::{self, Entry};

/// The `server` of skills among search hits.
pub const SKILLS_SERVER: &str = "skills";

/// How long before a run's deadline a search stops waiting for indexing.
const INDEX_WAIT_MARGIN: Duration = Duration::from_secs(1);

/// The search index over every known tool list, with the lists it was built from.
pub(super) struct SearchIndex {
    /// The tool lists, by server (identity is the cache key).
    lists: Vec<(String, Arc<Vec<Tool>>)>,
    /// Per index entry: (server, its tools, position in them).
    refs: Vec<(String, Arc<Vec<Tool>>, usize)>,
    index: search::Index,
}

impl UpstreamHostCalls {
    /// `search_tool_docs`: the `limit` best matches for `query`, each with a score in (0, 1),
    /// and the servers the search could not see.
    pub(super) async fn search_tool_docs(
        &self,
        ctx: &CallContext,
        query: &str,
        limit: usize,
        detail: Detail,
    ) -> Value {
        let not_indexed = self.wait_for_index(ctx.deadline).await;
        let index = self.search_index().await;
        // A narrowed run ranks everything and keeps the best it may see.
        let ranked = match &ctx.run.narrowing {
            None => index.index.rank(query, limit),
            Some(_) => index.index.rank(query, index.refs.len()),
        };
        let mut found: Vec<(f64, Value)> = ranked
            .into_iter()
            .filter(|(i, _)| {
                let (server, tools, t) = &index.refs[*i];
                visible(ctx, server, &tools[*t].name)
            })
            .take(limit)
            .map(|(i, score)| {
                let (server, tools, t) = &index.refs[i];
                (score, docs::doc(server, &tools[*t], detail))
            })
            .collect();
        found.extend(self.search_skills(ctx, query, limit).await);
        found.sort_by(|a, b| b.0.total_cmp(&a.0));
        found.truncate(limit);
        let results: Vec<Value> = found
            .into_iter()
            .map(|(score, mut d)| {
                // Shown in (0, 1), order kept: a ranking score has no upper bound.
                let shown = score / (1.0 + score);
                d["score"] = json!((shown * 1000.0).round() / 1000.0);
                d
            })
            .collect();
        json!({"results": results, "not_indexed": not_indexed})
    }

    /// The approved skills of the run's owner matching `query`, as docs of the server
    /// [`SKILLS_SERVER`] with their ranking scores (none when skills are not kept or the store
    /// cannot be read: the search of tools goes on).
    async fn search_skills(
        &self,
        ctx: &CallContext,
        query: &str,
        limit: usize,
    ) -> Vec<(f64, Value)> {
        let Some(store) = self.skills.clone() else {
            return Vec::new();
        };
        let owner = super::skills::owner(ctx);
        let listed = tokio::task::spawn_blocking(move || store.list(owner.as_deref())).await;
        let Ok(Ok(kept)) = listed else {
            return Vec::new();
        };
        let approved: Vec<_> = kept
            .into_iter()
            .filter(|s| s.state() == crate::skills::SkillState::Approved)
            .collect();
        let entries: Vec<Entry> = approved
            .iter()
            .map(|s| Entry {
                server: SKILLS_SERVER.to_string(),
                tool: s.name.clone(),
                description: s.description.clone(),
            })
            .collect();
        search::rank(&entries, query, limit)
            .into_iter()
            .map(|(i, score)| {
                let s = &approved[i];
                let call = if s.is_async {
                    "await skills."
                } else {
                    "skills."
                };
                let doc = json!({
                    "server": SKILLS_SERVER, "serverAlias": SKILLS_SERVER,
                    "tool": s.name, "toolAlias": s.name, "name": s.name,
                    "description": s.description,
                    "usage": format!("import skills; {call}{}(...)", s.name),
                });
                (score, doc)
            })
            .collect()
    }

    /// The index over the tools known now, rebuilt only when a tool list changed.
    async fn search_index(&self) -> Arc<SearchIndex> {
        let known = self.pool.known_tools();
        let mut slot = self.search.lock().await;
        if let Some(ix) = slot.as_ref() {
            let same = ix.lists.len() == known.len()
                && ix
                    .lists
                    .iter()
                    .zip(&known)
                    .all(|((a, x), (b, y))| a == b && Arc::ptr_eq(x, y));
            if same {
                return ix.clone();
            }
        }
        let mut refs = Vec::new();
        let mut entries = Vec::new();
        for (server, tools) in &known {
            for (i, t) in tools.iter().enumerate() {
                refs.push((server.clone(), tools.clone(), i));
                entries.push(Entry {
                    server: server.clone(),
                    tool: t.name.to_string(),
                    description: t.description.as_deref().unwrap_or("").to_string(),
                });
            }
        }
        let ix = Arc::new(SearchIndex {
            lists: known,
            refs,
            index: search::Index::build(&entries),
        });
        *slot = Some(ix.clone());
        ix
    }

    /// Waits for the first indexing pass (starting it if nobody has: `exec`), until shortly
    /// before `deadline`; returns the configured servers whose tools a search cannot see yet,
    /// as `{"server", "reason"}`.
    async fn wait_for_index(&self, deadline: Instant) -> Vec<Value> {
        let pool = &self.pool;
        let until = deadline.checked_sub(INDEX_WAIT_MARGIN).unwrap_or(deadline);
        let failures = tokio::time::timeout_at(until, pool.ensure_indexed())
            .await
            .ok();
        let known: HashSet<String> = pool
            .known_tools()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let mut gaps = Vec::new();
        for spec in &pool.servers().specs {
            if known.contains(&spec.name) {
                continue;
            }
            let failed = failures
                .as_ref()
                .and_then(|f| f.iter().find(|(n, _)| *n == spec.name));
            let reason = match failed {
                Some((_, why)) => format!("could not be started: {why}"),
                None if !spec.consent.permits() => "not approved: nothing of it is started".into(),
                None if spec.disabled => "disabled: indexed once a run loads it".into(),
                None => "indexing is not finished yet".into(),
            };
            gaps.push(json!({"server": spec.name, "reason": reason}));
        }
        gaps
    }
}
