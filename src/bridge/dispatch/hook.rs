//! [`CallHook`]: the seam a policy layer (allow lists, approvals, audit, budgets) plugs into.
//! The dispatcher calls it for every sandbox → host request it parsed: before routing, with
//! the typed request, and after, with the typed outcome. No policy lives here.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::{CallContext, CallError, HostMethod, HostRequest};

/// Watches (and may refuse) every host request; installed with
/// [`super::Dispatcher::with_hook`]. Both methods run on the request's own task: keep them
/// short, and never block.
pub trait CallHook: Send + Sync + 'static {
    /// Called before `request` is routed. An `Err` refuses it: the sandbox gets that error
    /// and the request goes nowhere (`after` still hears of it).
    ///
    /// # Errors
    /// The refusal, raised in the sandbox as an exception of its kind.
    fn before(&self, ctx: &CallContext, request: &HostRequest) -> Result<(), CallError> {
        let _ = (ctx, request);
        Ok(())
    }

    /// Called once the request was answered (or refused by `before`).
    fn after(&self, ctx: &CallContext, answered: &Answered<'_>) {
        let _ = (ctx, answered);
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
}

impl Answered<'_> {
    /// Bytes of the outcome's value as JSON (0 for an error); measured only when asked.
    pub fn bytes(&self) -> usize {
        let Ok(value) = self.outcome else {
            return 0;
        };
        let mut counter = Counter(0);
        // Writing to a counter cannot fail, and a JSON value always serializes.
        let _ = serde_json::to_writer(&mut counter, value);
        counter.0
    }
}

/// Counts the bytes written to it.
struct Counter(usize);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
