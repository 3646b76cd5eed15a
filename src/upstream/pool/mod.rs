//! [`UpstreamPool`]: every configured server by name, their warm clients, and the tool cache.
//! No formatting and no policy: `host/` decides what a sandbox may ask for.
//!
//! A server is one process shared by every run, whoever the client. A `"perClient": true`
//! server asked for by a run with a [`Caller`] (`serve --http`) is that client's own process
//! instead (`per_client.rs`), made on the client's first use, closed by
//! [`UpstreamPool::release_caller`] or shutdown; the tool cache and search stay shared (one
//! definition, one list). Likewise a remote server whose entry lacks `"sharedCredentials": true`,
//! asked for by a caller with an identity (a token of the tokens file): that caller's own handle,
//! whose token store is scoped to the caller (`TokenFile::for_caller`) and whose sign-in comes
//! back to the gateway's public callback; the shared handle only ever holds the operator's
//! sign-in. Runs without a caller (stdio `run`, `exec`) always get the shared one.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rmcp::model::Tool;
use tokio::time::Instant;

use super::cache::ToolCache;
use super::client::{Live, Upstream, UpstreamTasks};
use super::per_client::PerClient;
use super::sign_ins::CallerSignIns;
use super::UpstreamError;
use crate::calls::Caller;
use crate::config::{ServerSpec, Servers};

/// Servers indexed at once by the background indexer.
const INDEX_PARALLELISM: usize = 4;

/// All configured servers and their clients.
pub struct UpstreamPool {
    servers: Arc<Servers>,
    upstreams: BTreeMap<String, Arc<Upstream>>,
    tasks: UpstreamTasks,
    cache: ToolCache,
    /// Set once the first indexing pass is over: the servers it could not index, with why.
    indexed: tokio::sync::OnceCell<Arc<Vec<(String, String)>>>,
    /// The clients' own processes of `"perClient"` servers, and callers' own handles of
    /// remote servers.
    per_client: PerClient,
    /// Where callers' sign-ins come back to, when the gateway has a public URL.
    public_callback: Option<super::oauth::public::PublicCallback>,
    /// The sign-ins of callers' own handles, one per caller identity and server.
    caller_sign_ins: CallerSignIns,
}

impl UpstreamPool {
    /// A pool for `servers`, caching tool lists under `state_dir`, with tasks of its own and
    /// the call lane on. Starts nothing.
    pub fn new(servers: Arc<Servers>, state_dir: &Path) -> Self {
        Self::with_tasks(servers, state_dir, UpstreamTasks::detached())
    }

    /// A pool whose tasks go on `tasks` (the bridge's tracker; shutdown through its token).
    /// Starts nothing.
    pub fn with_tasks(servers: Arc<Servers>, state_dir: &Path, tasks: UpstreamTasks) -> Self {
        let tasks = UpstreamTasks {
            ct: tasks.ct.child_token(),
            tokens: Some(super::oauth::store::TokenFile::new(state_dir)),
            ..tasks
        };
        let upstreams = servers
            .specs
            .iter()
            .map(|s| {
                let up = Upstream::with_tasks(Arc::new(s.clone()), tasks.clone());
                (s.name.clone(), Arc::new(up))
            })
            .collect();
        let per_client = PerClient::new(Self::per_client_cap(
            &servers,
            crate::config::MAX_SANDBOXES.default as usize,
        ));
        UpstreamPool {
            servers,
            upstreams,
            tasks,
            cache: ToolCache::new(state_dir),
            indexed: tokio::sync::OnceCell::new(),
            per_client,
            public_callback: None,
            caller_sign_ins: CallerSignIns::default(),
        }
    }

    /// The same pool for at most `clients` clients at once (`MCP_BRIDGE_MAX_SANDBOXES`; the
    /// default is that setting's): per-client processes are held at most `clients` times the
    /// number of `"perClient"` servers.
    pub fn with_max_clients(mut self, clients: usize) -> Self {
        self.per_client = PerClient::new(Self::per_client_cap(&self.servers, clients));
        self
    }

    /// The same pool with callers' sign-ins coming back to the gateway's public callback
    /// (`MCP_BRIDGE_PUBLIC_URL`).
    pub fn with_public_callback(
        mut self,
        public: Option<super::oauth::public::PublicCallback>,
    ) -> Self {
        self.public_callback = public;
        self
    }

    /// The gateway's public callback, when there is one (`serve --http` routes it).
    pub fn public_callback(&self) -> Option<&super::oauth::public::PublicCallback> {
        self.public_callback.as_ref()
    }

    fn per_client_cap(servers: &Servers, clients: usize) -> usize {
        let marked = servers
            .specs
            .iter()
            .filter(|s| s.per_client || s.per_caller_identity())
            .count();
        clients.saturating_mul(marked)
    }

    /// Per-client processes held now (made, whether started or not), over all clients.
    pub fn per_client_count(&self) -> usize {
        self.per_client.count()
    }

    /// The configuration the pool was built from.
    pub fn servers(&self) -> &Servers {
        &self.servers
    }

    /// The server named `name`.
    ///
    /// # Errors
    /// [`UpstreamError::UnknownServer`] listing the configured names.
    pub fn get(&self, name: &str) -> Result<&Arc<Upstream>, UpstreamError> {
        self.upstreams
            .get(name)
            .ok_or_else(|| UpstreamError::UnknownServer {
                name: name.to_string(),
                available: self.servers.names(),
            })
    }

    /// The handle a run of `caller` uses for `shared` (a handle of [`UpstreamPool::get`]):
    /// `shared` itself, or, for a `"perClient"` server and a run with a caller, the caller's
    /// own (made now if it has none; its process starts on first connect).
    ///
    /// # Errors
    /// [`UpstreamError::TooManyClients`] when the caller has none and the most are held.
    pub fn for_caller(
        &self,
        shared: &Arc<Upstream>,
        caller: Option<&Caller>,
    ) -> Result<Arc<Upstream>, UpstreamError> {
        match caller {
            Some(c) if Self::own_handle(&shared.spec, c) => self
                .per_client
                .get_or_make(&c.sandbox, &shared.spec.name, || {
                    let own = shared.sibling(self.caller_tasks(&shared.spec, c));
                    match c.identity.as_deref() {
                        Some(key) if shared.spec.per_caller_identity() => {
                            own.signing_through(self.caller_sign_ins.of(key, &shared.spec.name))
                        }
                        _ => own,
                    }
                })
                .map_err(|()| UpstreamError::TooManyClients {
                    server: shared.spec.name.clone(),
                    cap: self.per_client.cap(),
                }),
            _ => Ok(shared.clone()),
        }
    }

    /// Whether `caller` gets a handle of its own of `spec`'s server: a `"perClient"` server,
    /// or a remote one reached with each caller's own sign-in when the caller has an identity.
    fn own_handle(spec: &ServerSpec, caller: &Caller) -> bool {
        spec.per_client || (caller.identity.is_some() && spec.per_caller_identity())
    }

    /// The tasks of `caller`'s own handle of `spec`'s server: for a remote server reached with
    /// the caller's own sign-in, the token store scoped to the caller, and the gateway's
    /// public callback; else the pool's.
    fn caller_tasks(&self, spec: &ServerSpec, caller: &Caller) -> UpstreamTasks {
        let mut tasks = self.tasks.clone();
        if let Some(key) = caller
            .identity
            .as_deref()
            .filter(|_| spec.per_caller_identity())
        {
            tasks.tokens = tasks.tokens.map(|t| t.for_caller(key, &caller.token));
            tasks.login.public = self.public_callback.clone();
        }
        tasks
    }

    /// The handle of `name` a run of `caller` uses ([`UpstreamPool::for_caller`]).
    ///
    /// # Errors
    /// Unknown server, or [`UpstreamError::TooManyClients`].
    pub fn upstream(
        &self,
        name: &str,
        caller: Option<&Caller>,
    ) -> Result<Arc<Upstream>, UpstreamError> {
        self.for_caller(self.get(name)?, caller)
    }

    /// The handle of `name` that shows what `caller` has: its own of a `"perClient"` server when
    /// it has one, else the shared one. Makes nothing.
    ///
    /// # Errors
    /// [`UpstreamError::UnknownServer`].
    pub fn peek(
        &self,
        name: &str,
        caller: Option<&Caller>,
    ) -> Result<Arc<Upstream>, UpstreamError> {
        let shared = self.get(name)?;
        let own = caller
            .filter(|c| Self::own_handle(&shared.spec, c))
            .and_then(|c| self.per_client.get(&c.sandbox, name));
        Ok(own.unwrap_or_else(|| shared.clone()))
    }

    /// Closes `caller_sandbox`'s own processes of `"perClient"` servers (each gets the grace
    /// to exit before its process group is killed, all at once) and waits for them. Called when
    /// the client's sandbox is forgotten; a later run of that client starts afresh.
    pub async fn release_caller(&self, caller_sandbox: &str) {
        let own = self.per_client.take(caller_sandbox);
        futures::future::join_all(own.iter().map(|u| u.shutdown())).await;
    }

    /// Connects `name` (starting it if needed) and refreshes its cache entry.
    ///
    /// # Errors
    /// Unknown server or start failure.
    pub async fn connect(&self, name: &str, deadline: Instant) -> Result<Live, UpstreamError> {
        self.connect_up(self.get(name)?, deadline).await
    }

    /// Connects `up` (starting it if needed) and refreshes its server's cache entry.
    async fn connect_up(&self, up: &Upstream, deadline: Instant) -> Result<Live, UpstreamError> {
        let live = up.connect(deadline).await?;
        if !self
            .cache
            .get(&up.spec)
            .is_some_and(|c| Arc::ptr_eq(&c, &live.tools))
        {
            self.cache.put(&up.spec, live.tools.clone());
        }
        Ok(live)
    }

    /// Loads every server in `names` concurrently; returns their tool lists.
    ///
    /// A server already connected, whose cache entry is its current list, is answered at once
    /// (the warm path of every run): only the others go through [`UpstreamPool::connect`],
    /// whose future is the whole start (kilobytes each), so a run naming many warm servers
    /// costs little more than one naming a few.
    ///
    /// # Errors
    /// The first server that is unknown or fails to start.
    pub async fn load(
        &self,
        names: &[String],
        deadline: Instant,
    ) -> Result<BTreeMap<String, Arc<Vec<Tool>>>, UpstreamError> {
        self.load_for(names, None, deadline).await
    }

    /// [`UpstreamPool::load`] for a run of `caller`: its own processes of `"perClient"`
    /// servers ([`UpstreamPool::for_caller`]).
    ///
    /// # Errors
    /// The first server that is unknown, fails to start, or cannot have a process for `caller`.
    pub async fn load_for(
        &self,
        names: &[String],
        caller: Option<&Caller>,
        deadline: Instant,
    ) -> Result<BTreeMap<String, Arc<Vec<Tool>>>, UpstreamError> {
        let lists = self.load_lists(names, caller, deadline).await?;
        Ok(names.iter().cloned().zip(lists).collect())
    }

    /// [`UpstreamPool::load_for`] as a list: the tool list of each of `names`, in their order
    /// (a name given twice has its list twice). Makes no map and copies no name.
    ///
    /// # Errors
    /// The first server that is unknown, fails to start, or cannot have a process for `caller`.
    pub async fn load_lists(
        &self,
        names: &[String],
        caller: Option<&Caller>,
        deadline: Instant,
    ) -> Result<Vec<Arc<Vec<Tool>>>, UpstreamError> {
        self.load_lists_signed_in(names, caller, deadline)
            .await?
            .into_iter()
            .zip(names)
            .map(|(list, name)| {
                list.ok_or_else(|| UpstreamError::AuthRequired {
                    server: name.clone(),
                })
            })
            .collect()
    }

    /// [`UpstreamPool::load_lists`], with `None` for a server that needs sign-in: a run
    /// loads its other servers, and a call to that one says how to sign in.
    ///
    /// # Errors
    /// The first server that is unknown, fails to start for another reason, or cannot have
    /// a process for `caller`.
    pub async fn load_lists_signed_in(
        &self,
        names: &[String],
        caller: Option<&Caller>,
        deadline: Instant,
    ) -> Result<Vec<Option<Arc<Vec<Tool>>>>, UpstreamError> {
        let ups: Vec<Result<Arc<Upstream>, UpstreamError>> =
            names.iter().map(|n| self.upstream(n, caller)).collect();
        let mut found: Vec<Option<Result<Arc<Vec<Tool>>, UpstreamError>>> = ups
            .iter()
            .map(|up| match up {
                Ok(up) => self.warm(up).map(Ok),
                Err(err) => Some(Err(err.clone())),
            })
            .collect();
        let cold: Vec<usize> = (0..names.len()).filter(|i| found[*i].is_none()).collect();
        if !cold.is_empty() {
            let started = futures::future::join_all(cold.iter().map(|i| {
                let up = ups[*i].as_ref().expect("a handle: errors were found above");
                self.connect_up(up, deadline)
            }))
            .await;
            for (i, r) in cold.into_iter().zip(started) {
                found[i] = Some(r.map(|live| live.tools));
            }
        }
        found
            .into_iter()
            .map(
                |r| match r.expect("every name was looked up or connected") {
                    Ok(list) => Ok(Some(list)),
                    Err(UpstreamError::AuthRequired { .. }) => Ok(None),
                    Err(e) => Err(e),
                },
            )
            .collect()
    }

    /// A reading that changes whenever what [`UpstreamPool::load_lists`] answers for the same
    /// names and caller may change other than by a connection closing: a tool list cached
    /// or dropped, a client's own handle made or taken out.
    pub fn changes(&self) -> u64 {
        self.cache.changes().wrapping_add(self.per_client.changes())
    }

    /// The open connections of `names` for `caller`, in order, when each is up and lists
    /// exactly `lists` (`None` otherwise): while none of them closes and
    /// [`UpstreamPool::changes`] reads the same, a load of the same names answers `lists`.
    pub fn lives_listing(
        &self,
        names: &[String],
        caller: Option<&Caller>,
        lists: &[Arc<Vec<Tool>>],
    ) -> Option<Vec<Arc<Live>>> {
        names
            .iter()
            .zip(lists)
            .map(|(n, list)| {
                let up = self.peek(n, caller).ok()?;
                up.spec.consent.permits().then_some(())?;
                let live = up.live_handle()?;
                Arc::ptr_eq(&live.tools, list).then_some(live)
            })
            .collect()
    }

    /// The tools of `up` when it is connected and its cache entry is that list; `None` when
    /// it must go through [`UpstreamPool::connect_up`] (not started, closed, refused, or its
    /// cache entry to refresh).
    fn warm(&self, up: &Upstream) -> Option<Arc<Vec<Tool>>> {
        // A server without consent is never connected; `connect` words the refusal.
        if !up.spec.consent.permits() {
            return None;
        }
        let live = up.live_tools()?;
        let cached = self.cache.get(&up.spec)?;
        Arc::ptr_eq(&cached, &live).then_some(live)
    }

    /// Closes every connection (the clients' own too), all at once: starts in progress are abandoned, each server
    /// gets a short grace to exit before its process group is killed (see `owner.rs`).
    pub async fn shutdown(&self) {
        self.tasks.ct.cancel();
        let own = self.per_client.take_all();
        futures::future::join_all(self.upstreams.values().chain(&own).map(|u| u.shutdown())).await;
    }
}

mod tools;

#[cfg(test)]
mod tests;
