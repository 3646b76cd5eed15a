"""The functions of `mcp.runtime` (GUIDE.md, "The sandbox API"; ARCHITECTURE.md, "MCP proxying
over the frame protocol"). Owns no I/O: calls go through the protocol.CallTable given to `bind`.

Every helper works both as a plain call and awaited, with the names, call styles and shapes the
Python bridge documents (`runtime.discovered_servers()` and `await runtime.list_servers()`), and
ours (`await runtime.discovered_servers()`, `runtime.list_servers_sync()`). One mechanism,
`_helper`, does this for all of them: when the call site awaits the call at once (the caller's
next instruction is GET_AWAITABLE), the helper returns a coroutine, so the event loop keeps
running while the host answers; otherwise it waits for the host and returns the value in a form
that can also be awaited (values.ready). The `_sync` twins always wait."""
import dis
import functools
import sys
from collections.abc import Mapping

from . import skills as _skills
from . import values
from .errors import BridgeCallError

# The host methods sandbox code may call (ARCHITECTURE.md, "Host methods"): the one list on this
# side; HostMethod::ALL in src/bridge/dispatch/host_method.rs is the other, and a Rust test holds them equal.
HOST_METHODS = (
    "call_tool",
    "list_servers",
    "discovered_servers",
    "list_tools",
    "query_tool_docs",
    "stubs",
    "save_skill",
    "list_skills",
    "load_skill",
    "search_tool_docs",
    "describe_server",
    "list_loaded_server_metadata",
    "capability_summary",
    "ping",
    "reset",
)

_calls = None  # the protocol.CallTable, set by bind()
_clear = None  # () -> the names removed from the user's namespace, set by bind_reset()
_cell_lines = None  # code object -> its cell's source lines or None, set by bind_sources()
_AWAITED_SITES = {}  # (code, instruction offset) -> the call there is awaited at once
_MAX_SITES = 4096


def bind(calls):
    """Route every helper through `calls` (a protocol.CallTable)."""
    global _calls
    _calls = calls


def bind_reset(clear):
    """`reset` empties the user's namespace with `clear()` (returns the names removed)."""
    global _clear
    _clear = clear


def bind_sources(lines):
    """`save_skill` finds a function's cell with `lines(code)` (its source lines, or None)."""
    global _cell_lines
    _cell_lines = lines


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


# -- one mechanism for every helper -------------------------------------------------------------

def _awaited_at(frame):
    """True when the call that `frame` is making is awaited at once (`await helper(...)`)."""
    code, offset = frame.f_code, frame.f_lasti
    key = (code, offset)
    hit = _AWAITED_SITES.get(key)
    if hit is None:
        hit = False
        for ins in dis.get_instructions(code):
            if ins.offset > offset:
                hit = ins.opname == "GET_AWAITABLE"
                break
        if len(_AWAITED_SITES) >= _MAX_SITES:
            _AWAITED_SITES.clear()
        _AWAITED_SITES[key] = hit
    return hit


async def _call_async(method, params, where, shape):
    return values.ready(shape(await host().call(method, params, where)))


def _same(value):
    return value


def _helper(method, shape=_same):
    """Decorator: the decorated function turns its arguments into (params, (server, tool)), or
    (params, (server, tool), shape) when the result's shape depends on them; the result is the
    helper (plain call or awaited) and, as `.sync`, its always-blocking twin."""

    if method not in HOST_METHODS:
        raise ValueError("%r is not in HOST_METHODS" % (method,))

    def prepare(build, args, kwargs):
        call = build(*args, **kwargs)
        return call if len(call) == 3 else (call[0], call[1], shape)

    def decorate(build):
        @functools.wraps(build)
        def helper(*args, **kwargs):
            params, where, fit = prepare(build, args, kwargs)
            try:
                awaited = _awaited_at(sys._getframe(1))
            except Exception:  # noqa: BLE001 - no caller frame to read: answer plainly
                awaited = False
            if awaited:
                return _call_async(method, params, where, fit)
            return values.ready(fit(host().call_sync(method, params, where)))

        @functools.wraps(build)
        def sync(*args, **kwargs):
            params, where, fit = prepare(build, args, kwargs)
            return values.ready(fit(host().call_sync(method, params, where)))

        sync.__name__ = sync.__qualname__ = build.__name__ + "_sync"
        sync.__doc__ = "Blocking `%s` (the same result; can be awaited too)." % build.__name__
        helper.sync = sync
        return helper

    return decorate


# -- the helpers ----------------------------------------------------------------------------------

_NOWHERE = (None, None)


def _names(reply):
    return tuple(reply) if isinstance(reply, list) else reply


@_helper("ping", lambda reply: reply.get("value") if isinstance(reply, dict) else reply)
def ping(value=None):
    """Send `value` to the bridge and back; returns it. Measures the round trip."""
    return {"value": value}, _NOWHERE


def _server_names(reply):
    servers = reply.get("servers", []) if isinstance(reply, dict) else []
    return tuple(s.get("name") for s in servers if isinstance(s, dict))


def _server_details(reply):
    return tuple(reply.get("servers", [])) if isinstance(reply, dict) else ()


@_helper("discovered_servers")
def discovered_servers(detailed=False):
    """Names of every configured server, as a tuple. `detailed=True` gives a tuple of dicts:
    name, description, transport, source, disabled, state. Config problems: config_problems()."""
    return {}, _NOWHERE, _server_details if detailed else _server_names


@_helper("discovered_servers",
         lambda reply: list(reply.get("errors", [])) if isinstance(reply, dict) else [])
def config_problems():
    """Problems found in the server configuration: [{"source", "message"}] (empty when none)."""
    return {}, _NOWHERE


@_helper("list_servers", _names)
def list_servers():
    """Names of all configured servers (loaded or not), sorted, as a tuple."""
    return {}, _NOWHERE


@_helper("list_tools")
def list_tools(server):
    """The tools of `server`: [{"name", "alias", "description"}]."""
    return {"server": server}, (server, None)


@_helper("query_tool_docs")
def query_tool_docs(server, tool=None, detail="summary"):
    """Docs of one tool (by name or alias) or of all of `server`'s: [{"server", "tool",
    "toolAlias", "description"}]; detail="full" adds "input_schema" and a Python "signature"."""
    return {"server": server, "tool": tool, "detail": detail}, (server, tool)


@_helper("stubs")
def stubs(server):
    """Typed Python stubs of `server`'s tools, as text: one `async def` per tool with typed
    parameters (enums as Literal, objects as TypedDict) and return type (a TypedDict from the
    tool's output schema; str for a text-only tool), its description as the docstring."""
    return {"server": server}, (server, None)


def _saved(reply):
    if isinstance(reply, dict) and reply.get("state") != "approved":
        sys.stderr.write("note: skill %r is kept %s; it runs in later runs once the user approved "
                         "this text: mcp-code-bridge skills --approve %s\n"
                         % (reply.get("name"), reply.get("state"), reply.get("name")))
    return reply


@_helper("save_skill", _saved)
def save_skill(fn, name=None):
    """Keep `fn` (a function defined in a cell) as the skill `name` (its own name by default):
    its source plus the cell's imports it uses. Later runs call it as `skills.<name>(...)` once
    the user approved that text (`mcp-code-bridge skills --approve NAME`). Returns {"name",
    "digest", "state"}; a name it reads that cannot be kept is refused now."""
    text, is_async, description = _skills.keep(fn, name, _cell_lines or (lambda code: None))
    params = {"name": fn.__name__ if name is None else name, "source": text,
              "is_async": is_async, "description": description}
    return params, _NOWHERE


@_helper("list_skills")
def list_skills():
    """The kept skills: [{"name", "digest", "state": "approved"|"pending"|"changed",
    "description", "is_async"}]."""
    return {}, _NOWHERE


def load_skill(name):
    """The function of the approved skill `name` (blocking; `skills.<name>` calls this)."""
    reply = host().call_sync("load_skill", {"name": _skills.check_name(name)}, _NOWHERE)
    return reply


def _search_results(reply):
    """The hits of a search reply; servers it could not search are named on stderr."""
    if not isinstance(reply, dict):
        return reply
    gaps = [g for g in reply.get("not_indexed") or () if isinstance(g, dict)]
    if gaps:
        sys.stderr.write("warning: search_tool_docs could not search %s\n" % "; ".join(
            "%s (%s)" % (g.get("server"), g.get("reason")) for g in gaps))
    return list(reply.get("results") or ())


@_helper("search_tool_docs", _search_results)
def search_tool_docs(query, limit=5, detail="summary"):
    """Search the tools of ALL configured servers: [{"server", "tool", "toolAlias",
    "description", "score"}], best first."""
    return {"query": query, "limit": limit, "detail": detail}, _NOWHERE


@_helper("describe_server")
def describe_server(name):
    """One server: name, alias, transport, source, state, server_info, instructions and tools
    [{"name", "alias", "description", "input_schema"}]."""
    return {"name": name}, (name, None)


@_helper("list_loaded_server_metadata", _names)
def list_loaded_server_metadata():
    """The servers loaded for this run, as a tuple of {"name", "alias", "tools", ...}."""
    return {}, _NOWHERE


@_helper("capability_summary")
def capability_summary():
    """A short text: the helpers and the configured servers with their tool counts."""
    return {}, _NOWHERE


@_helper("call_tool")
def call_tool(server, tool, args=None):
    """Call `tool` of loaded `server` (real names) with the dict `args`; returns its result."""
    params = {"server": server, "tool": tool, "arguments": tool_arguments("call_tool", args)}
    return params, (server, tool)


def _cleared(_reply):
    if _clear is None:
        raise BridgeCallError("the sandbox has no namespace to reset")
    return _clear()


@_helper("reset", _cleared)
def reset():
    """Forget every variable, function and import of earlier calls, on purpose: the namespace is
    emptied now (a run_typescript runtime is ended, its names with it) and the snapshot kept for
    an idle stop is dropped, so nothing comes back later. Returns Python's names removed, as a
    tuple."""
    return {}, _NOWHERE


ping_sync = ping.sync
discovered_servers_sync = discovered_servers.sync
config_problems_sync = config_problems.sync
list_servers_sync = list_servers.sync
list_tools_sync = list_tools.sync
query_tool_docs_sync = query_tool_docs.sync
stubs_sync = stubs.sync
save_skill_sync = save_skill.sync
list_skills_sync = list_skills.sync
search_tool_docs_sync = search_tool_docs.sync
describe_server_sync = describe_server.sync
list_loaded_server_metadata_sync = list_loaded_server_metadata.sync
capability_summary_sync = capability_summary.sync
call_tool_sync = call_tool.sync
reset_sync = reset.sync

EXPORTS = (ping, ping_sync, discovered_servers, discovered_servers_sync, config_problems,
           config_problems_sync, list_servers, list_servers_sync, list_tools, list_tools_sync,
           query_tool_docs, query_tool_docs_sync, stubs, stubs_sync, save_skill, save_skill_sync,
           list_skills, list_skills_sync, search_tool_docs, search_tool_docs_sync,
           describe_server, describe_server_sync, list_loaded_server_metadata,
           list_loaded_server_metadata_sync, capability_summary, capability_summary_sync,
           call_tool, call_tool_sync, reset, reset_sync)
