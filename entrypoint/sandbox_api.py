"""The `mcp` package that sandbox code imports (GUIDE.md, "Sandbox API"), published as modules that
live only in sys.modules (no files): `mcp` and `mcp.runtime` (the helpers of runtime.py and the
exceptions of errors.py), and `mcp.servers.<alias>`, one per server proxy (proxies.py), made when
sandbox code first imports or reaches it. Before every exec it binds the exec's servers
(`mcp_<alias>`, `mcp_servers`) and re-publishes the modules, so sandbox code that deletes or
replaces them cannot break the next call; a server module is checked only while sandbox code uses
it, so an exec naming 51 servers costs what one naming one does. Owns no I/O."""
import builtins
import importlib.abc
import importlib.machinery
import operator
import os
import sys
import types

from . import errors, outbox, proxies, runtime, skills

_modules = {}  # dotted name -> module object we publish in sys.modules: mcp, its runtime, servers
_registry = proxies.Registry()
_loaded = proxies.ServerDict()  # the current exec's servers
_built = {}  # server alias -> (proxy, its version, module, the module's __dict__ as built)
_bindings = ((), {}, {})  # (server names, {"mcp_<alias>": proxy}, {alias: proxy})
_live = {}  # alias -> server module published in sys.modules and on mcp.servers (see _reach)
_package_base = {}  # mcp.servers' own __dict__ as install() left it (no server modules)
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
    servers = _module("mcp.servers", "One module per loaded server: "
                      "`from mcp.servers.<alias> import *`.", package=True)
    servers.__getattr__ = _servers_getattr
    servers.__dir__ = _servers_dir
    _package_base.clear()
    _package_base.update(servers.__dict__)
    kept = _module("skills", "The user's approved skills: `skills.<name>(...)`, "
                   "`from skills import <name>`; runtime.list_skills() lists them.")
    kept.__getattr__ = _skill
    kept.__dir__ = _skill_names
    publish()


def _skill(name):
    """`skills.<name>`: the approved skill's function, built now over this run's proxies (a
    server it needs that the run did not load is a NameError saying how to load it)."""
    if name.startswith("_"):
        raise AttributeError(name)
    reply = runtime.load_skill(name)
    names = dict(_bindings[1])
    names["mcp_servers"] = _loaded
    return skills.build(name, reply["source"], names)


def _skill_names():
    """dir(skills): the approved skills' names."""
    try:
        kept = runtime.list_skills.sync()
    except Exception:  # noqa: BLE001 - dir() must not fail
        return []
    return sorted(s["name"] for s in kept if s.get("state") == "approved")


def display(*objs):
    """Show objects in the run_python result: a matplotlib figure or PIL image as a picture, a
    DataFrame as a text table, anything else as its repr (also a builtin)."""
    return builtins.display(*objs)


def server_module(alias, proxy):
    """Create or refresh `mcp.servers.<alias>`: one async function per tool of `proxy`, named by
    tool alias, and `__all__`; other names are looked up on the proxy (helpful errors)."""
    name = "mcp.servers." + alias
    was = _built.get(alias)
    mod = was[2] if was is not None else types.ModuleType(name)
    mod.__doc__ = "Tools of MCP server %r (async functions)." % (proxy._mcp_server,)
    for key in getattr(mod, "__all__", ()):
        mod.__dict__.pop(key, None)
    functions = proxy._mcp_exports()
    mod.__dict__.update(functions)
    mod.__all__ = sorted(functions)
    mod.__getattr__ = proxy.__getattr__
    mod._proxy = proxy
    # What importlib would set on import, set here once: an import then leaves the module as
    # built (the same spec object each time), so it stays "as built" for _current().
    spec = was[4] if was is not None else importlib.machinery.ModuleSpec(name, _LOADER)
    mod.__name__, mod.__loader__, mod.__package__, mod.__spec__ = name, _LOADER, "mcp.servers", spec
    built = dict(mod.__dict__)
    built["__all__"] = list(mod.__all__)  # a copy: sandbox code may change the list in place
    _built[alias] = (proxy, proxy._mcp_version, mod, built, spec)
    return mod


def _current(alias, proxy):
    """`mcp.servers.<alias>` for `proxy`, rebuilt unless it is exactly as server_module last
    built it from the same proxy (sandbox code may have changed it since): one dict
    comparison in C."""
    was = _built.get(alias)
    if (was is None or was[0] is not proxy or was[1] != proxy._mcp_version
            or was[2].__dict__ != was[3]):
        return server_module(alias, proxy)
    return was[2]


def _proxy_of(alias):
    """The proxy whose module is `mcp.servers.<alias>`: a server of the current exec first,
    then one loaded by an earlier exec (its module stays importable, as its proxy stays
    bound); None when no server has that alias."""
    proxy = _bindings[2].get(alias)
    if proxy is None and isinstance(alias, str):
        proxy = proxies.by_alias(_registry.proxies).get(alias)
    return proxy


def _reach(alias):
    """Publish `mcp.servers.<alias>` (in sys.modules and on mcp.servers) the first time sandbox
    code imports or reaches it in an exec; None when no server has that alias. Published
    modules are checked before each exec while their server stays loaded (prepare_exec)."""
    proxy = _proxy_of(alias)
    if proxy is None:
        return None
    mod = _current(alias, proxy)
    sys.modules["mcp.servers." + alias] = mod
    _modules["mcp.servers"].__dict__[alias] = mod
    _live[alias] = mod
    return mod


def _servers_getattr(name):
    """`mcp.servers.<alias>` without an import (PEP 562): the server's module."""
    mod = _reach(name) if not name.startswith("__") else None
    if mod is None:
        raise AttributeError("module 'mcp.servers' has no attribute %r: no loaded MCP server "
                             "has that alias" % (name,))
    return mod


def _servers_dir():
    """dir(mcp.servers): its own names and the aliases of the current exec's servers."""
    return sorted(set(_modules["mcp.servers"].__dict__) | set(_bindings[2]))


class _ServerModuleLoader(importlib.abc.Loader):
    """Loads `mcp.servers.<alias>`: the server's module as built (see _reach)."""

    def create_module(self, spec):
        return _reach(spec.name.rpartition(".")[2])

    def exec_module(self, module):
        pass


_LOADER = _ServerModuleLoader()


class _ServerModuleFinder(importlib.abc.MetaPathFinder):
    """Finds `mcp.servers.<alias>` of a loaded server (its module is made on first import) and
    turns the import of one that is not loaded into a clear error."""

    def find_spec(self, name, path=None, target=None):
        prefix, _, alias = name.rpartition(".")
        if prefix != "mcp.servers" or name in _modules:
            return None
        if _proxy_of(alias) is not None:
            mod = _reach(alias)
            return mod.__spec__
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


def _republish_servers(current):
    """Before an exec: each server module sandbox code reached is checked (rebuilt if changed)
    and published again while its server is in `current` ({alias: proxy}), withdrawn
    otherwise (the next import or reach makes it again); mcp.servers keeps only its own
    names and those modules. The cost follows the modules sandbox code used, not the servers
    the exec names."""
    package = _modules["mcp.servers"].__dict__
    for alias, mod in list(_live.items()):
        name = "mcp.servers." + alias
        proxy = current.get(alias)
        if proxy is None:
            del _live[alias]
            if sys.modules.get(name) is mod:
                del sys.modules[name]
            if package.get(alias) is mod:
                del package[alias]
            continue
        mod = _live[alias] = _current(alias, proxy)
        if sys.modules.get(name) is not mod:
            sys.modules[name] = mod
        package[alias] = mod
    # The package as install() left it, plus the published modules: one comparison in C
    # (sandbox code may have added, replaced or deleted names).
    if len(package) != len(_package_base) + len(_live) or any(
            package.get(k) is not v for k, v in _package_base.items()):
        package.clear()
        package.update(_package_base)
        package.update(_live)


def _bind_view(loaded):
    """({"mcp_<alias>": proxy}, {alias: proxy}) for `loaded`, kept while the exec's servers stay
    the same (proxies are never replaced, so names decide)."""
    global _bindings
    names = tuple(loaded)
    if _bindings[0] != names:
        by = proxies.by_alias(loaded)
        _bindings = (names, {"mcp_" + alias: proxy for alias, proxy in by.items()}, by)
    return _bindings[1], _bindings[2]


def prepare_exec(namespace, frame):
    """Called by the runner before each exec: builds the proxies of the exec frame's servers
    ("servers", and "tools": {server: [tool, ...]} for those whose tool list is new) and binds
    `mcp_<alias>` and `mcp_servers`; the `mcp.servers.<alias>` modules are made when sandbox
    code imports or reaches them, and those it used are checked again here (_republish_servers).
    Only what changed is rebuilt. Proxies of servers loaded earlier stay in the namespace (the
    host refuses calls to servers the current run did not load)."""
    global _loaded
    _loaded = _registry.load(frame.get("tools"), frame.get("servers"))
    bindings, current = _bind_view(_loaded)
    namespace.update(bindings)
    namespace["mcp_servers"] = _loaded
    publish()
    _republish_servers(current)
