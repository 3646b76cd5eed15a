"""The functions of `mcp.runtime` (CONTRACT.md section 3; ARCHITECTURE.md, "MCP proxying over the
frame protocol"): one async function per host method and a blocking `_sync` twin that also works
inside a running event loop (it waits on a threading.Event the reader thread sets). Owns no I/O:
calls go through the protocol.CallTable given to `bind`."""
from collections.abc import Mapping

from .errors import BridgeCallError

_calls = None  # the protocol.CallTable, set by bind()


def bind(calls):
    """Route every helper through `calls` (a protocol.CallTable)."""
    global _calls
    _calls = calls


def host():
    """The bound protocol.CallTable; BridgeCallError when the sandbox is not connected."""
    if _calls is None:
        raise BridgeCallError("the sandbox is not connected to the bridge")
    return _calls


async def call_host(method, params=None, server=None, tool=None):
    """Call host `method` with a JSON-able dict of params; returns the reply value. `server` and
    `tool` name what the call is about (set on the exception when it fails)."""
    return await host().call(method, params, (server, tool))


def call_host_sync(method, params=None, server=None, tool=None):
    """Blocking `call_host` (works in plain code and inside a running event loop)."""
    return host().call_sync(method, params, (server, tool))


def tool_arguments(caller, args):
    """`args` (None or a mapping) as a fresh dict for `call_tool`; TypeError names `caller`."""
    if args is None:
        return {}
    if isinstance(args, Mapping):
        return dict(args)
    raise TypeError("%s() takes the tool's arguments as keyword arguments or one dict, not %s"
                    % (caller, type(args).__name__))


# -- the helpers: async + `_sync`, same names and params as the host methods ------------------

async def ping(value=None):
    """Send `value` to the bridge and back; returns it. Measures the round trip."""
    return _echoed(await call_host("ping", {"value": value}))


def ping_sync(value=None):
    """Blocking `ping`."""
    return _echoed(call_host_sync("ping", {"value": value}))


def _echoed(reply):
    return reply.get("value") if isinstance(reply, dict) else reply


async def discovered_servers():
    """Every configured server and config problem: {"servers": [...], "errors": [...]}."""
    return await call_host("discovered_servers", {})


def discovered_servers_sync():
    """Blocking `discovered_servers`."""
    return call_host_sync("discovered_servers", {})


async def list_servers():
    """Sorted names of all configured servers (loaded or not)."""
    return await call_host("list_servers", {})


def list_servers_sync():
    """Blocking `list_servers`."""
    return call_host_sync("list_servers", {})


async def list_tools(server):
    """The tools of `server`: [{"name", "description"}]."""
    return await call_host("list_tools", {"server": server}, server)


def list_tools_sync(server):
    """Blocking `list_tools`."""
    return call_host_sync("list_tools", {"server": server}, server)


async def query_tool_docs(server, tool=None, detail="summary"):
    """Docs of one tool (or all of `server`'s); detail="full" adds input_schema and signature."""
    return await call_host("query_tool_docs", {"server": server, "tool": tool, "detail": detail},
                           server, tool)


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Blocking `query_tool_docs`."""
    return call_host_sync("query_tool_docs", {"server": server, "tool": tool, "detail": detail},
                          server, tool)


async def search_tool_docs(query, limit=5, detail="summary"):
    """Fuzzy search of the tools of ALL configured servers, best first."""
    return await call_host("search_tool_docs", {"query": query, "limit": limit, "detail": detail})


def search_tool_docs_sync(query, limit=5, detail="summary"):
    """Blocking `search_tool_docs`."""
    return call_host_sync("search_tool_docs", {"query": query, "limit": limit, "detail": detail})


async def describe_server(name):
    """One server: transport, source, state, server_info, instructions and tools."""
    return await call_host("describe_server", {"name": name}, name)


def describe_server_sync(name):
    """Blocking `describe_server`."""
    return call_host_sync("describe_server", {"name": name}, name)


async def list_loaded_server_metadata():
    """The servers loaded for this run: [{"name", "alias", "server_info", "tool_count"}]."""
    return await call_host("list_loaded_server_metadata", {})


def list_loaded_server_metadata_sync():
    """Blocking `list_loaded_server_metadata`."""
    return call_host_sync("list_loaded_server_metadata", {})


async def capability_summary():
    """A short text: the helpers and the configured servers with their tool counts."""
    return await call_host("capability_summary", {})


def capability_summary_sync():
    """Blocking `capability_summary`."""
    return call_host_sync("capability_summary", {})


async def call_tool(server, tool, args=None):
    """Call `tool` of loaded `server` (real names) with the dict `args`; returns its result."""
    params = {"server": server, "tool": tool, "arguments": tool_arguments("call_tool", args)}
    return await call_host("call_tool", params, server, tool)


def call_tool_sync(server, tool, args=None):
    """Blocking `call_tool`."""
    params = {"server": server, "tool": tool, "arguments": tool_arguments("call_tool_sync", args)}
    return call_host_sync("call_tool", params, server, tool)


EXPORTS = (ping, ping_sync, discovered_servers, discovered_servers_sync, list_servers,
           list_servers_sync, list_tools, list_tools_sync, query_tool_docs, query_tool_docs_sync,
           search_tool_docs, search_tool_docs_sync, describe_server, describe_server_sync,
           list_loaded_server_metadata, list_loaded_server_metadata_sync, capability_summary,
           capability_summary_sync, call_tool, call_tool_sync)
