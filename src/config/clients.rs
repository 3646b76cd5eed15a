//! Where the common MCP clients keep their server lists (read only with
//! `MCP_BRIDGE_IMPORT_CLIENT_CONFIGS=1`): Claude Code, Claude Desktop, Cursor, VS Code, Windsurf.

use std::path::{Path, PathBuf};

/// The client config files read with `MCP_BRIDGE_IMPORT_CLIENT_CONFIGS=1`, in priority order.
pub fn client_config_files(home: Option<&Path>, cwd: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(cwd) = cwd {
        out.push(cwd.join(".mcp.json")); // Claude Code, project scope
        out.push(cwd.join(".cursor/mcp.json"));
        out.push(cwd.join(".vscode/mcp.json"));
    }
    if let Some(h) = home {
        out.push(h.join(".claude.json")); // Claude Code, user scope
        out.push(h.join(".config/Claude/claude_desktop_config.json"));
        out.push(h.join("Library/Application Support/Claude/claude_desktop_config.json"));
        out.push(h.join(".cursor/mcp.json"));
        out.push(h.join(".config/Code/User/mcp.json"));
        out.push(h.join("Library/Application Support/Code/User/mcp.json"));
        out.push(h.join(".codeium/windsurf/mcp_config.json"));
    }
    out
}
