//! The capabilities resource: the sandbox helper summary and how to load servers.

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

## Discovery (`from mcp import runtime`; each has a `_sync` twin)
- `discovered_servers()`, `list_servers()`, `list_tools(server)`
- `query_tool_docs(server, tool=None, detail=\"summary\"|\"full\")`
- `search_tool_docs(query, limit=5)`: fuzzy search across all configured servers
- `describe_server(name)`, `list_loaded_server_metadata()`, `capability_summary()`
- `call_tool(server, tool, args)`
";
