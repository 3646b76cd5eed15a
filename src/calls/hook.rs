//! [`CallHook`]: the seam a policy layer (allow lists, approvals, audit, budgets) plugs into.
//! The dispatcher calls it for every sandbox → host request it parsed: before routing, with
//! the typed request, and after, with the typed outcome; the sandbox actor tells it when a
//! run ends. No policy lives here.

use std::any::Any;
use std::time::Duration;

use serde_json::Value;

use super::error::CallError;
use super::host_calls::CallContext;
use super::host_method::HostMethod;
use super::request::HostRequest;
use super::run_scope::RunScope;
use crate::report::RunReport;

/// Watches (and may refuse) every host request; installed with
/// [`super::dispatcher::Dispatcher::with_hook`]. Every method runs on the request's own task: keep them
/// short; only `before` may wait (for the user's approval, by the run's deadline).
#[async_trait::async_trait]
pub trait CallHook: Send + Sync + 'static {
    /// Called before `request` is routed. A refusal in the [`Admission`] refuses it: the
    /// sandbox gets that error and the request goes nowhere (`after` still hears of it).
    async fn before(&self, ctx: &CallContext, request: &HostRequest) -> Admission {
        let _ = (ctx, request);
        Admission::go()
    }

    /// Called once the request was answered (or refused by `before`), with what `before` gave.
    fn after(&self, ctx: &CallContext, admission: Admission, answered: &Answered<'_>) {
        let _ = (ctx, admission, answered);
    }

    /// Called once a run has ended, with its report.
    fn run_ended(&self, scope: &RunScope, report: &RunReport) {
        let _ = (scope, report);
    }
}

/// What [`CallHook::before`] decided: a refusal (or none), and a note the hook keeps for its
/// own `after` (the dispatcher never looks inside).
#[derive(Default)]
pub struct Admission {
    /// The refusal, when the request must not be routed.
    pub refusal: Option<CallError>,
    /// The hook's own note, handed back to `after`.
    pub memo: Option<Box<dyn Any + Send + Sync>>,
}

impl Admission {
    /// Routes the request; no note.
    pub fn go() -> Self {
        Admission::default()
    }

    /// Refuses the request with `error`.
    pub fn refuse(error: CallError) -> Self {
        Admission {
            refusal: Some(error),
            memo: None,
        }
    }

    /// The same, carrying `memo` to `after`.
    #[must_use]
    pub fn with_memo(self, memo: impl Any + Send + Sync) -> Self {
        Admission {
            memo: Some(Box::new(memo)),
            ..self
        }
    }
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("refusal", &self.refusal)
            .field("memo", &self.memo.is_some())
            .finish()
    }
}

/// A request once answered, as [`CallHook::after`] sees it. The request itself went to its
/// handler (a tool call's arguments are moved, not copied), so what `before` needs to match
/// up is kept by the hook.
#[derive(Debug)]
pub struct Answered<'a> {
    /// The method called.
    pub method: HostMethod,
    /// The answer the sandbox gets.
    pub outcome: &'a Result<Value, CallError>,
    /// Time from routing to the answer.
    pub elapsed: Duration,
    /// Bytes of the outcome's value as JSON, when the dispatcher measured them already (a
    /// tool call's, for the run's trace).
    pub measured: Option<u64>,
}

impl Answered<'_> {
    /// Bytes of the outcome's value as JSON (0 for an error); measured only when asked, unless
    /// they were already.
    pub fn bytes(&self) -> usize {
        let Ok(value) = self.outcome else {
            return 0;
        };
        let n = self
            .measured
            .unwrap_or_else(|| super::trace::json_bytes(value));
        usize::try_from(n).unwrap_or(usize::MAX)
    }
}
