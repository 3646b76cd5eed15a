//! [`RunScope`]: what one `run_python` call carries to every host call its code makes: its
//! id and its code's hash (for the audit log), the narrowing its `allowed_tools` argument
//! asked for, how to ask the user for approval (the MCP face's [`Asker`](super::ask::Asker),
//! none under `exec` or a client that cannot be asked), the client it came from, and its
//! tallies (calls made, result bytes, approvals given for the rest of the run). Made by
//! whoever starts the run; read by the policy hook.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ask::Asker;
use crate::config::Pattern;
use crate::ids::{random_id, sha256_hex};

/// Entries of `allowed_tools` a run may pass at most.
pub const MAX_ALLOWED_TOOLS: usize = 256;

/// One run's scope; shared by the calls its code makes.
pub struct RunScope {
    /// A random id, 16 hex digits, naming the run in the audit log and in approval state.
    pub id: String,
    /// SHA-256 of the code, hex.
    pub code_sha256: String,
    /// The `allowed_tools` argument: calls may only go to tools it matches. `None`: no
    /// narrowing.
    pub narrowing: Option<Narrowing>,
    /// How to ask the user; `None` when nobody can be asked (calls that need approval fail
    /// closed).
    pub asker: Option<Arc<dyn Asker>>,
    /// What the run has used so far.
    pub tally: Tally,
    /// Downstream servers' questions relayed for this run: one at a time, bounded.
    pub questions: super::relay::QuestionGate,
    /// The run's waits for a person, which do not count against its timeout.
    pub waits: super::person_wait::PersonWaits,
    /// Cancelled once the run has ended, however it ended: what still waits for it (a
    /// server's question out to the user) gives up.
    pub finished: CancellationToken,
    /// When the run arrived.
    pub arrived: Instant,
    /// Who asked, when the bridge serves many clients (`serve --http`); `None` for stdio `run`
    /// and `exec` (one client).
    pub caller: Option<Arc<Caller>>,
    /// Cancelled when the policy stops the run ([`RunScope::stop`]); the sandbox actor then
    /// interrupts the code as on a timeout.
    pub stopped: CancellationToken,
    /// Why the run was stopped: the first reason given to [`RunScope::stop`].
    stop_reason: OnceLock<String>,
    /// How a server that needs sign-in is signed in to during the run.
    pub sign_in: SignInWay,
    /// Set by the policy hook once it heard of the run's end (lines of calls answered later
    /// are written at once).
    pub ended: AtomicBool,
    /// The run's tool calls, for the result's trace (`trace.rs`).
    pub trace: super::trace::Trace,
    /// The run's code, for its audit line (`MCP_BRIDGE_AUDIT_CODE=1`); `None` otherwise.
    pub audited_code: Option<String>,
    /// The `_meta` entries of the W3C trace context the request carried, passed on to
    /// downstream calls (made once per run).
    pub trace_meta: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

/// How a run signs in to a server that needs it (`upstream/sign_in.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInWay {
    /// Through the run's [`Asker`] (the client), when there is one (`run`, `serve`).
    Ask,
    /// The link is opened here, as `login` opens it (`exec` with `$BROWSER` or a desktop
    /// opener).
    Open,
    /// Not at all (`exec` with no way to open a link).
    Nobody,
}

/// The client a run came from under `serve --http`: the token it authenticated with and the
/// sandbox it runs in. Rate limits and the audit log are kept per token; servers marked
/// `"perClient": true` get one process per sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The token's name (from the tokens file; `local` on loopback without tokens).
    pub token: String,
    /// The client's sandbox: a key unique in this bridge process (never the handle itself).
    pub sandbox: String,
    /// The token's upstream identity key (`store::caller_key`): the caller's own sign-ins to
    /// remote servers are kept under it. `None` for the loopback `local` caller without a
    /// tokens file, who is the operator and uses the operator's sign-ins.
    pub identity: Option<String>,
}

impl RunScope {
    /// A scope for `code`, with a fresh random id.
    pub fn new(code: &str, narrowing: Option<Narrowing>, asker: Option<Arc<dyn Asker>>) -> Self {
        RunScope {
            id: random_id(),
            code_sha256: sha256_hex(code.as_bytes()),
            narrowing,
            asker,
            tally: Tally::default(),
            questions: Default::default(),
            waits: Default::default(),
            finished: CancellationToken::new(),
            arrived: Instant::now(),
            caller: None,
            stopped: CancellationToken::new(),
            stop_reason: OnceLock::new(),
            ended: AtomicBool::new(false),
            sign_in: SignInWay::Ask,
            trace: Default::default(),
            trace_meta: None,
            audited_code: None,
        }
    }

    /// This scope, signing in to servers `way` (`exec`: [`SignInWay::Open`] or
    /// [`SignInWay::Nobody`]).
    pub fn signing_in(mut self, way: SignInWay) -> Self {
        self.sign_in = way;
        self
    }

    /// Whether a server that needs sign-in can be signed in to during this run.
    pub fn can_sign_in(&self) -> bool {
        match self.sign_in {
            SignInWay::Ask => self.asker.is_some(),
            SignInWay::Open => true,
            SignInWay::Nobody => false,
        }
    }

    /// Stops the run: `reason` (the first one given) is its error; the code is interrupted.
    pub fn stop(&self, reason: impl Into<String>) {
        let _ = self.stop_reason.set(reason.into());
        self.stopped.cancel();
    }

    /// Why the run was stopped, when it was.
    pub fn stop_reason(&self) -> Option<&str> {
        self.stop_reason.get().map(String::as_str)
    }

    /// This scope, passing on `context` to the downstream calls it makes.
    pub fn with_trace_context(
        mut self,
        context: Option<super::trace_context::TraceContext>,
    ) -> Self {
        self.trace_meta = context.map(|c| Arc::new(c.to_meta()));
        self
    }

    /// This scope, its code kept for the run's audit line when `code` is given
    /// (`MCP_BRIDGE_AUDIT_CODE=1`).
    pub fn with_audited_code(mut self, code: Option<&str>) -> Self {
        self.audited_code = code.map(str::to_string);
        self
    }

    /// This scope, for a run from `caller`.
    pub fn with_caller(mut self, caller: Option<Arc<Caller>>) -> Self {
        self.caller = caller;
        self
    }

    /// A scope with no narrowing and nobody to ask (tests, `doctor`).
    pub fn plain(code: &str) -> Arc<Self> {
        Arc::new(RunScope::new(code, None, None))
    }
}

impl std::fmt::Debug for RunScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunScope")
            .field("id", &self.id)
            .field("narrowing", &self.narrowing)
            .field("can_ask", &self.asker.is_some())
            .field("caller", &self.caller)
            .finish_non_exhaustive()
    }
}

/// What a run has used: counted by the policy hook, read for budgets and the audit line.
#[derive(Debug, Default)]
pub struct Tally {
    /// Tool calls admitted.
    pub calls: AtomicU64,
    /// Tool calls refused (by a rule, a limit, or the user).
    pub refused: AtomicU64,
    /// Bytes of tool results received.
    pub result_bytes: AtomicU64,
    /// Bytes of tool arguments sent.
    pub argument_bytes: AtomicU64,
    /// `(server, tool)` pairs the user approved for the rest of this run.
    pub approved_for_run: Mutex<HashSet<(String, String)>>,
    /// What the run used of each server, for the run budgets (`policy::Limits`): one entry per
    /// configured server it called, so bounded by the config.
    pub budgets: Mutex<RunBudgets>,
    /// Told when a call gives back what it reserved of a result-byte budget, so calls waiting
    /// for room look again.
    pub released: Notify,
}

/// A run's use counted against its budgets ([`Tally::budgets`]).
#[derive(Debug, Default)]
pub struct RunBudgets {
    /// Tool calls the limits admitted, over all servers.
    pub calls: u64,
    /// Per server: tool calls admitted and result bytes received.
    pub servers: HashMap<String, ServerUse>,
    /// Result bytes reserved by the calls in flight, against the run's result-byte budget.
    pub reserved_bytes: u64,
    /// Per `(server, tool)`: the largest result received from it so far (the estimate of its
    /// next). Bounded by the policy (`policy::reserve`: tool names come from the sandbox); a
    /// tool past its bound has no estimate.
    pub largest_result: HashMap<(String, String), u64>,
}

/// A run's use of one server.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ServerUse {
    /// Tool calls admitted.
    pub calls: u64,
    /// Bytes of tool results received.
    pub result_bytes: u64,
    /// Result bytes reserved by this server's calls in flight, against its budget.
    pub reserved_bytes: u64,
}

impl Tally {
    /// Adds `n` to `counter`, returning the new total.
    pub fn add(counter: &AtomicU64, n: u64) -> u64 {
        counter.fetch_add(n, Ordering::Relaxed).saturating_add(n)
    }

    /// The value of `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// The `allowed_tools` argument of one run: `server.tool` entries with `*` wildcards. It can
/// only narrow what the operator's config allows; it never widens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowing {
    entries: Vec<(Pattern, Pattern)>,
}

impl Narrowing {
    /// Parses `allowed_tools` entries (`server.tool`, the first `.` splits them).
    ///
    /// # Errors
    /// A message naming the first bad entry.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        if entries.len() > MAX_ALLOWED_TOOLS {
            return Err(format!(
                "'allowed_tools' has {} entries; at most {MAX_ALLOWED_TOOLS}",
                entries.len()
            ));
        }
        let parsed = entries
            .iter()
            .map(|e| match e.split_once('.') {
                Some((s, t)) if !s.is_empty() && !t.is_empty() && e.len() <= 512 => {
                    Ok((Pattern::new(s), Pattern::new(t)))
                }
                _ => Err(format!(
                    "'allowed_tools' entries are \"server.tool\" (wildcards allowed), not {:?}",
                    crate::shown::Shown(e).to_string()
                )),
            })
            .collect::<Result<_, _>>()?;
        Ok(Narrowing { entries: parsed })
    }

    /// Whether `server.tool` is inside the narrowing.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        self.entries
            .iter()
            .any(|(s, t)| s.matches(server) && t.matches(tool))
    }

    /// The entries as written, for messages.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .entries
            .iter()
            .map(|(s, t)| format!("{s}.{t}"))
            .collect();
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_parses_server_dot_tool_with_wildcards() {
        let n = Narrowing::parse(&["gh.get_*".into(), "*.read".into()]).expect("valid");
        assert!(n.allows("gh", "get_issue"));
        assert!(n.allows("fs", "read"));
        assert!(!n.allows("gh", "delete_repo"));
        assert!(!n.allows("fs", "read_all"));
        for bad in ["gh", ".tool", "gh.", ""] {
            assert!(Narrowing::parse(&[bad.to_string()]).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..=MAX_ALLOWED_TOOLS).map(|i| format!("s.t{i}")).collect();
        assert!(Narrowing::parse(&many).is_err());
    }

    struct Nobody;

    #[async_trait::async_trait]
    impl Asker for Nobody {
        async fn ask(&self, _: super::super::ask::Question, _: Instant) -> super::super::Answer {
            super::super::Answer::Unavailable("test".into())
        }
    }

    #[test]
    fn a_run_signs_in_through_its_client_or_by_opening_the_link_else_not_at_all() {
        let asker: Arc<dyn Asker> = Arc::new(Nobody);
        assert!(
            !RunScope::new("", None, None).can_sign_in(),
            "nobody to ask"
        );
        assert!(RunScope::new("", None, Some(asker.clone())).can_sign_in());
        let exec = |way| RunScope::new("", None, Some(asker.clone())).signing_in(way);
        assert!(exec(SignInWay::Open).can_sign_in());
        assert!(
            !exec(SignInWay::Nobody).can_sign_in(),
            "exec with no way to open a link does not ask on its terminal"
        );
    }
}
