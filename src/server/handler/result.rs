//! A run's report as the tool result the client sees.

use rmcp::model::{CallToolResult, ContentBlock};

use super::BridgeServer;
use crate::format;
use crate::report::RunReport;
use crate::server::files;

impl BridgeServer {
    /// `report` as a tool result: the rendered text, then a picture's image content and a
    /// `resource_link` per delivered file, `isError`, and `structuredContent` only when
    /// `MCP_BRIDGE_STRUCTURED_CONTENT` asks for it (Claude Code shows the model only the
    /// structured JSON when it is present: anthropics/claude-code#54450, #79944), and never
    /// with a picture: Claude Code would drop the image (anthropics/claude-code#54737). The
    /// structured JSON lists the files, so links survive there.
    pub(super) fn result(&self, report: &RunReport) -> CallToolResult {
        let text = format::render(report, self.settings.output_mode);
        let mut content = vec![ContentBlock::text(text)];
        content.extend(files::blocks(report));
        let mut result = if report.is_error() {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        if self.settings.structured_content && !files::has_pictures(report) {
            result.structured_content = Some(format::structured(report));
        }
        result
    }
}
