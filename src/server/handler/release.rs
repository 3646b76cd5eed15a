//! `release` with empty code: a client's sandbox let go without a run.

use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::ErrorData;

use super::{BridgeServer, Target};
use crate::report::{RunReport, RunStatus};
use crate::server::router::Who;

/// What a result says once its sandbox was released.
pub(super) const RELEASED: &str =
    "The sandbox was released: its variables and files are gone, and its \
     handle no longer works; leave out `sandbox` to start a new one";

impl BridgeServer {
    /// `release` with empty code: the client's sandbox (`handle`, or its session's) goes, no
    /// run. Under stdio `run` there is nothing to release: said, not an error.
    ///
    /// # Errors
    /// The router's error for a handle that is not the caller's (as for a run).
    pub(super) fn release_only(
        &self,
        who: Option<&Who>,
        handle: Option<&str>,
    ) -> Result<CallToolResult, ErrorData> {
        let Target::Many(tie) = &self.target else {
            return Ok(CallToolResult::success(vec![ContentBlock::text(
                "nothing to release: this bridge has one sandbox (release is for serve --http)",
            )]));
        };
        let Some(who) = who else {
            return Err(ErrorData::invalid_request(
                "the request did not come through the HTTP front",
                None,
            ));
        };
        if who.session.is_none() && handle.is_none() {
            let report = RunReport::failed(
                RunStatus::Error,
                "release needs the sandbox's handle: pass sandbox=\"sbx_...\" with release=true",
            );
            return Ok(self.result(&report));
        }
        if who.session.is_some() && handle.is_some() {
            let report = RunReport::failed(
                RunStatus::Error,
                "this MCP session has its own sandbox: leave out `sandbox` (release=true alone \
                 releases the session's)",
            );
            return Ok(self.result(&report));
        }
        tie.router().release(who, handle)?;
        Ok(CallToolResult::success(vec![ContentBlock::text(RELEASED)]))
    }
}
