"""The `mcp` package that sandbox code imports (GUIDE.md, "Sandbox API"), published as modules that
live only in sys.modules (no files): `mcp` and `mcp.runtime` (the helpers of runtime.py and the
exceptions of errors.py), and `mcp.servers.<alias>`, one per server proxy (proxies.py). Before every
exec it binds the exec's servers (`mcp_<alias>`, `mcp_servers`) and re-publishes the modules, so
sandbox code that deletes or replaces them cannot break the next call. Owns no I/O."""
import builtins
import importlib.abc
import operator
import os
import sys
import types

from . import errors, outbox, proxies, runtime

_modules = {}  # dotted name -> module object we publish in sys.modules
_registry = proxies.Registry()
_loaded = proxies.ServerDict()  # the current exec's servers
_built = {}  # server alias -> (proxy, its version, module, the module's __dict__ as built)
_bindings = ((), {}, ())  # (server names, {"mcp_<alias>": proxy}, ((alias, proxy), ...))
_published = (-1, ())  # (len(_modules) then, ((dict, itemgetter, values), ...)): see publish()


# -- module publication -----------------------------------------------------------------------

def _module(name, doc, package=False):
    mod = _modules.get(name)
    if mod is None:
        mod = types.ModuleType(name, doc)
        if package:
            mod.__path__ = []  # a package: `import mcp.servers.x` looks up sys.modules only
        _modules[name] = mod
    return mod


def _export(module, functions):
    for fn in functions:
        fn.__module__ = module.__name__
        setattr(module, fn.__name__, fn)
    for cls in errors.EXCEPTIONS:  # keep __module__ "mcp": tracebacks read mcp.ToolError
        setattr(module, cls.__name__, cls)
    module.MCPError = errors.MCPError  # the Python bridge's name for BridgeCallError
    names = {f.__name__ for f in functions} | {c.__name__ for c in errors.EXCEPTIONS}
    names.add("MCPError")
    module.__all__ = sorted(set(getattr(module, "__all__", ())) | names)


def install(calls):
    """Build the `mcp` modules and bind them to `calls` (a protocol.CallTable)."""
    runtime.bind(calls)
    root = _module("mcp", "The MCP bridge API: `from mcp import runtime`.", package=True)
    _export(root, ())
    root.__all__ = sorted(set(root.__all__) | {"runtime", "servers"})
    rt = _module("mcp.runtime", "Discovery and host helpers (async + _sync twins).")
    _export(rt, runtime.EXPORTS + (outbox.save, display))
    rt.OUTBOX = os.environ.get("MCP_BRIDGE_OUTBOX") or outbox.DEFAULT_DIR
    _module("mcp.servers", "One module per loaded server: `from mcp.servers.<alias> import *`.",
            package=True)
    publish()


def display(*objs):
    """Show objects in the run_python result: a matplotlib figure or PIL image as a picture, a
    DataFrame as a text table, anything else as its repr (also a builtin)."""
    return builtins.display(*objs)


def server_module(alias, proxy):
    """Create or refresh `mcp.servers.<alias>`: one async function per tool of `proxy`, named by
    tool alias, and `__all__`; other names are looked up on the proxy (helpful errors)."""
    mod = _module("mcp.servers." + alias, None)
    mod.__doc__ = "Tools of MCP server %r (async functions)." % (proxy._mcp_server,)
    for name in getattr(mod, "__all__", ()):
        mod.__dict__.pop(name, None)
    functions = proxy._mcp_exports()
    mod.__dict__.update(functions)
    mod.__all__ = sorted(functions)
    mod.__getattr__ = proxy.__getattr__
    mod._proxy = proxy
    built = dict(mod.__dict__)
    built["__all__"] = list(mod.__all__)  # a copy: sandbox code may change the list in place
    _built[alias] = (proxy, proxy._mcp_version, mod, built)
    return mod


class _ServerModuleFinder(importlib.abc.MetaPathFinder):
    """Turns `import mcp.servers.<alias>` of a server that is not loaded into a clear error."""

    def find_spec(self, name, path=None, target=None):
        prefix, _, alias = name.rpartition(".")
        if prefix != "mcp.servers" or name in _modules:
            return None
        raise ModuleNotFoundError(
            "No module named %r: no loaded MCP server has the alias %r (loaded: %s); name the "
            "server in run_python's `servers`" % (name, alias, ", ".join(
                "%s -> mcp.servers.%s" % (server, proxies.alias(server))
                for server in sorted(_loaded)) or "none"), name=name)


_FINDER = _ServerModuleFinder()


def _published_intact():
    """True when every module is still in sys.modules and on its parent package, and the
    finder in sys.meta_path, as publish() left them: C-level lookups, no Python loop per module."""
    count, checks = _published
    if count != len(_modules) or _FINDER not in sys.meta_path:
        return False
    try:
        return all(get(where) == values for where, get, values in checks)
    except (KeyError, TypeError):  # a module or attribute is gone
        return False


def _publication():
    """What publish() installs, grouped by the dict it goes into: sys.modules and each parent
    package's __dict__, as (dict, itemgetter of the names, the modules)."""
    groups = {id(sys.modules): (sys.modules, [], [])}
    for name, mod in _modules.items():
        entry = groups[id(sys.modules)]
        entry[1].append(name)
        entry[2].append(mod)
        parent, _, child = name.rpartition(".")
        if parent in _modules:
            where = _modules[parent].__dict__
            entry = groups.setdefault(id(where), (where, [], []))
            entry[1].append(child)
            entry[2].append(mod)
    checks = []
    for where, keys, values in groups.values():
        get = operator.itemgetter(*keys)
        checks.append((where, get, values[0] if len(values) == 1 else tuple(values)))
    return len(_modules), tuple(checks)


def publish():
    """(Re)install every module in sys.modules and as attributes of its parent package; when
    all of them are still in place (the usual case) this only checks."""
    global _published
    if _published_intact():
        return
    for name, mod in _modules.items():
        if sys.modules.get(name) is not mod:
            sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent in _modules:
            setattr(_modules[parent], child, mod)
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
    _published = _publication()


def _bind_view(loaded):
    """({"mcp_<alias>": proxy}, ((alias, proxy), ...)) for `loaded`, kept while the exec's
    servers stay the same (proxies are never replaced, so names decide)."""
    global _bindings
    names = tuple(loaded)
    if _bindings[0] != names:
        pairs = tuple(proxies.by_alias(loaded).items())
        _bindings = (names, {"mcp_" + alias: proxy for alias, proxy in pairs}, pairs)
    return _bindings[1], _bindings[2]


def prepare_exec(namespace, frame):
    """Called by the runner before each exec: builds the proxies of the exec frame's servers
    ("servers", and "tools": {server: [tool, ...]} for those whose tool list is new) and binds
    `mcp_<alias>`, `mcp_servers` and the `mcp.servers.<alias>` modules. Only what changed is
    rebuilt: a module sandbox code left alone, of a proxy that did not change, is kept. Proxies
    of servers loaded earlier stay in the namespace (the host refuses calls to servers the
    current run did not load)."""
    global _loaded
    _loaded = _registry.load(frame.get("tools"), frame.get("servers"))
    bindings, pairs = _bind_view(_loaded)
    namespace.update(bindings)
    # A module is rebuilt unless it is exactly as server_module last built it from the same
    # proxy (sandbox code may have changed it since): one dict comparison in C per server.
    built = _built
    for alias, proxy in pairs:
        was = built.get(alias)
        if (was is None or was[0] is not proxy or was[1] != proxy._mcp_version
                or was[2].__dict__ != was[3]):
            server_module(alias, proxy)
    namespace["mcp_servers"] = _loaded
    publish()
