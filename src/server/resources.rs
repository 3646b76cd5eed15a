//! The capabilities resource: the sandbox helper summary and how to load servers, plus the
//! folders shared with the sandbox.

use crate::config::Mount;

/// URI of the capabilities resource.
pub const CAPABILITIES_URI: &str = "resource://mcp-code-bridge/capabilities";

/// The capabilities document (Markdown).
pub const CAPABILITIES: &str = "# mcp-code-bridge sandbox

`run_python(code, servers=[...], timeout=seconds)` runs Python 3 in a persistent, locked-down
container: no network, read-only root, writable `/tmp` and `/workspace` (not executable).
Variables, imports and functions persist between calls until the sandbox restarts (a result
says so when it does). Top-level `await` works. pandas, numpy and matplotlib are installed.

## Using MCP servers
- Load servers per call: `servers=[\"github\"]`, then `await mcp_github.create_issue(repo=..., title=...)`
  (also `mcp_servers[\"github\"]` and `from mcp.servers.github import *`).
- Tool results come back as structured data or parsed JSON when available, else text; tool
  errors raise exceptions carrying the server's message.

## Data in and out
- Folders the user shared are mounted read-only (listed below when there are any).
- Files written under `/workspace/out` (or saved with `runtime.save(obj, \"name.csv\")`: a path,
  bytes, text, DataFrame as CSV, figure or PIL image as PNG, numpy array, else pickle) are
  copied to the user's machine after the call and linked in the result.
- `plt.show()`, a figure left open, or `display(fig_or_image)` returns the picture; `display(df)`
  prints a table.

## Discovery (`from mcp import runtime`; each has a `_sync` twin)
- `discovered_servers()`, `list_servers()`, `list_tools(server)`
- `query_tool_docs(server, tool=None, detail=\"summary\"|\"full\")`
- `stubs(server)`: the server's tools as typed Python stubs (results as TypedDicts)
- `save_skill(fn, name=None)`, `list_skills()`: keep a cell's function; once the user approved it, later runs call `skills.<name>(...)`
- `search_tool_docs(query, limit=5)`: fuzzy search across all configured servers
- `describe_server(name)`, `list_loaded_server_metadata()`, `capability_summary()`
- `call_tool(server, tool, args)`
";

/// The capabilities document with the shared folders (`MCP_BRIDGE_MOUNTS`) listed.
pub fn capabilities(mounts: &[Mount]) -> String {
    let mut text = CAPABILITIES.to_string();
    if !mounts.is_empty() {
        text.push_str("\n## Shared folders (read-only)\n");
        for m in mounts {
            text.push_str(&format!("- `{}`\n", m.inside));
        }
    }
    text
}
