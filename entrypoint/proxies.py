"""Server proxies built from the exec frame's "tools" (ARCHITECTURE.md, "MCP proxying over the frame
protocol"): `alias`, `ServerProxy` (`await mcp_github.create_issue(repo=...)` → host `call_tool`),
and `ServerDict`, the `mcp_servers` mapping. One proxy per server name lives for the whole process
and is updated in place when the server's tool list changes. Knows nothing about namespaces or
modules (sandbox_api.py binds them)."""
import difflib
import inspect
import re

from . import runtime

_NON_IDENT = re.compile(r"[^A-Za-z0-9_]")
REPR_TOOLS = 12  # tool names shown in a proxy's repr


def alias(name):
    """The Python identifier for a server or tool name: every character outside [A-Za-z0-9_]
    becomes `_`, and a leading `_` is added when it starts with a digit (`my-server.v2` →
    `my_server_v2`, `2fa` → `_2fa`)."""
    text = _NON_IDENT.sub("_", name)
    return "_" + text if text[:1].isdigit() else text


def _tool_function(server, tool, name, owner):
    """The async function calling `tool` of `server`; `name` is its alias, `owner` e.g. mcp_x."""
    caller = "%s.%s" % (owner, name)
    where = (server, tool)

    async def call(arguments=None, /, **kwargs):
        if arguments is None:
            merged = kwargs
        else:
            merged = runtime.tool_arguments(caller, arguments)
            merged.update(kwargs)
        params = {"server": server, "tool": tool, "arguments": merged}
        # Straight to the call table: each coroutine layer costs on every await.
        return await runtime.host().call("call_tool", params, where)

    call.__name__, call.__qualname__ = name, caller
    describe(call, server, tool, None)
    return call


_BUILTIN_TYPES = {t.__name__: t for t in (str, int, float, bool, dict, list)}


class _TypeName:
    """An annotation shown as its text (`list[str]`, `Literal["a", "b"]`) by inspect and help."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _annotation(text):
    if not isinstance(text, str):
        return inspect.Parameter.empty
    return _BUILTIN_TYPES.get(text) or _TypeName(text)


def _signature(spec):
    """An inspect.Signature from a tool entry's "params" ([[name, type, required, default?]])
    and "returns"; None when the entry has none or a name is not a Python identifier."""
    params = spec.get("params")
    if not isinstance(params, list):
        return None
    out = []
    for p in params:
        if not (isinstance(p, list) and len(p) >= 3 and isinstance(p[0], str)):
            return None
        default = inspect.Parameter.empty if p[2] is True else (p[3] if len(p) > 3 else None)
        try:
            out.append(inspect.Parameter(p[0], inspect.Parameter.KEYWORD_ONLY, default=default,
                                         annotation=_annotation(p[1])))
        except (ValueError, TypeError):  # e.g. "page-size": not expressible as a parameter
            return None
    return inspect.Signature(out, return_annotation=_annotation(spec.get("returns")))


def describe(fn, server, tool, spec):
    """Give a tool's proxy function its real signature and help text from its entry `spec`
    ({"doc", "params", "returns"}), or a generic text when there is none."""
    how = ("Call tool %r of MCP server %r (async): `await %s(arg=...)`; returns its result."
           % (tool, server, fn.__qualname__))
    spec = spec if isinstance(spec, dict) else {}
    doc = spec.get("doc")
    fn.__doc__ = ("%s\n\n%s" % (doc.strip(), how)) if isinstance(doc, str) and doc.strip() else (
        how + "\nParameters: mcp.runtime.query_tool_docs(%r, %r, detail=\"full\")." % (server, tool))
    sig = _signature(spec)
    if sig is None:
        fn.__dict__.pop("__signature__", None)
    else:
        fn.__signature__ = sig


class ServerProxy:
    """The tools of one MCP server as async methods named by tool alias. Unknown names raise
    AttributeError listing the tools; `dir()` lists the tool aliases. When the host announced no
    tool list (tools=None), any public name is sent to the host as a tool name."""

    def __init__(self, server):
        self._mcp_server = server
        self._mcp_alias = alias(server)
        self._mcp_tools = None  # real tool names, None when unknown
        self._mcp_functions = {}  # tool alias -> async function
        self._mcp_real = {}  # real tool name -> async function
        self._mcp_version = 0  # counts updates: what was built from the proxy is stale when it moved

    def _mcp_update(self, tools, specs=None):
        """Set the tool list (real names, or None when unknown) and, from `specs` ({name: tool
        entry}), each function's signature and help; keeps functions that still apply. When
        two tools share an alias, the first keeps it; the other is reachable by its real name
        with getattr(proxy, "real.name")."""
        tools = None if tools is None else list(dict.fromkeys(tools))
        old, functions, real = self._mcp_real, {}, {}
        for tool in tools or ():
            fn = old.get(tool) or _tool_function(self._mcp_server, tool, alias(tool),
                                                 "mcp_" + self._mcp_alias)
            if specs is not None:
                describe(fn, self._mcp_server, tool, specs.get(tool))
            real[tool] = fn
            functions.setdefault(fn.__name__, fn)
        self._mcp_tools, self._mcp_functions, self._mcp_real = tools, functions, real
        self._mcp_version += 1

    def _mcp_exports(self):
        """{tool alias: async function}, for the mcp.servers.<alias> module."""
        return dict(self._mcp_functions)

    def __getattr__(self, name):  # only reached when normal lookup fails
        state = self.__dict__
        if name.startswith("__") or "_mcp_functions" not in state:
            raise AttributeError(name)
        fn = state["_mcp_functions"].get(name) or state["_mcp_real"].get(name)
        if fn is not None:
            return fn
        if state["_mcp_tools"] is None and not name.startswith("_"):
            fn = state["_mcp_real"][name] = _tool_function(
                state["_mcp_server"], name, alias(name), "mcp_" + state["_mcp_alias"])
            return fn
        listed = ", ".join(sorted(state["_mcp_functions"])) or "(none)"
        near = difflib.get_close_matches(alias(name), list(state["_mcp_functions"]), n=1, cutoff=0.8)
        hint = " (did you mean %r?)" % near[0] if near else ""
        raise AttributeError("MCP server %r has no tool %r%s; its tools: %s (tools the operator's "
                             "rules or this run's allowed_tools refuse are not listed: "
                             "runtime.call_tool names the rule)"
                             % (state["_mcp_server"], name, hint, listed))

    def __dir__(self):
        return sorted(self._mcp_functions)

    def __repr__(self):
        if self._mcp_tools is None:
            return "<MCP server %r (mcp_%s): tool list not announced>" % (
                self._mcp_server, self._mcp_alias)
        names = sorted(self._mcp_functions)
        shown = ", ".join(names[:REPR_TOOLS])
        if len(names) > REPR_TOOLS:
            shown += ", ... (%d more)" % (len(names) - REPR_TOOLS)
        return "<MCP server %r (mcp_%s): %d tool%s: %s>" % (
            self._mcp_server, self._mcp_alias, len(names), "" if len(names) == 1 else "s",
            shown or "(none)")


class ServerDict(dict):
    """`mcp_servers`: the proxies of the servers loaded for the current run, by server name."""

    def __missing__(self, key):
        raise KeyError("MCP server %r is not loaded in this run (loaded: %s); name it in "
                       "run_python's `servers`" % (key, ", ".join(sorted(self)) or "none"))


class Registry:
    """Every proxy made in this process, by server name, and the servers of the last exec."""

    def __init__(self):
        self.proxies = {}
        self._last = None  # (sorted server names, ServerDict, the frame's "servers") of the last exec
        self._given = []  # the last exec frame's "servers" list (what `true` stands for)

    def load(self, tools, servers=()):
        """The ServerDict for one exec frame: `servers` (the exec's server names) and `tools`
        ({server: [tool entry, ...]}, the servers whose tool list is new to this sandbox; `true`
        or no entry means unchanged since it was last sent). A server loaded without a tool list
        ever announced gets a permissive proxy. Malformed entries are skipped. Only servers in
        `tools` are rebuilt: with none and the same servers as the last exec, this is a copy of
        the last exec's ServerDict; with none and the very same "servers" list, one list
        comparison in C decides (no per-server work in Python). `servers` is `true` when the
        host sends the same list as in the last exec frame (not sent again)."""
        if servers is True:
            servers = self._given
        else:
            self._given = servers
        last = self._last
        if not tools and last is not None and type(servers) is list and servers == last[2]:
            return ServerDict(last[1])
        changed, names = {}, set()
        if isinstance(tools, dict):
            for server, entries in tools.items():
                if not (isinstance(server, str) and server):
                    continue
                if entries is True and server in self.proxies:  # unchanged since last sent
                    names.add(server)
                elif isinstance(entries, list):
                    changed[server] = {n: t for n, t in ((_tool_name(t), t) for t in entries)
                                       if n}
        for server in servers if isinstance(servers, list) else ():
            if isinstance(server, str) and server:
                names.add(server)
        names.update(changed)
        order = sorted(names)
        given = list(servers) if type(servers) is list else []
        if not changed and last is not None and last[0] == order:
            self._last = (order, last[1], given)
            return ServerDict(last[1])
        loaded = ServerDict()
        for server in order:
            proxy = self.proxies.get(server)
            if proxy is None:
                proxy = self.proxies[server] = ServerProxy(server)
                if server not in changed:  # no tool list announced: permissive
                    proxy._mcp_update(None)
            if server in changed:
                entries = changed[server]
                proxy._mcp_update(list(entries), entries)
            loaded[server] = proxy
        self._last = (order, loaded, given)
        return ServerDict(loaded)


def _tool_name(entry):
    """A tool name from the frame (a string; a {"name": ...} object is accepted too)."""
    if isinstance(entry, dict):
        entry = entry.get("name")
    return entry if isinstance(entry, str) and entry else None


def by_alias(loaded):
    """{server alias: proxy} of a ServerDict; on an alias clash the first name (sorted) wins."""
    result = {}
    for server in sorted(loaded):
        result.setdefault(alias(server), loaded[server])
    return result
