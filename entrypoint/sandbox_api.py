"""The `mcp` package that sandbox code imports (CONTRACT.md section 3), published as modules that
live only in sys.modules (no files): `mcp` and `mcp.runtime` (the helpers of runtime.py and the
exceptions of errors.py), and `mcp.servers.<alias>`, one per server proxy (proxies.py). Before every
exec it binds the exec's servers (`mcp_<alias>`, `mcp_servers`) and re-publishes the modules, so
sandbox code that deletes or replaces them cannot break the next call. Owns no I/O."""
import importlib.abc
import sys
import types

from . import errors, proxies, runtime

_modules = {}  # dotted name -> module object we publish in sys.modules
_registry = proxies.Registry()
_loaded = proxies.ServerDict()  # the current exec's servers


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
    _export(rt, runtime.EXPORTS)
    _module("mcp.servers", "One module per loaded server: `from mcp.servers.<alias> import *`.",
            package=True)
    publish()


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


def publish():
    """(Re)install every module in sys.modules and as attributes of its parent package."""
    for name, mod in _modules.items():
        if sys.modules.get(name) is not mod:
            sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent in _modules:
            setattr(_modules[parent], child, mod)
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


def prepare_exec(namespace, frame):
    """Called by the runner before each exec: builds the proxies of the exec frame's servers
    ("tools": {server: [tool, ...]}) and binds `mcp_<alias>`, `mcp_servers` and the
    `mcp.servers.<alias>` modules. Proxies of servers loaded earlier stay in the namespace (the
    host refuses calls to servers the current run did not load)."""
    global _loaded
    _loaded = _registry.load(frame.get("tools"), frame.get("servers"))
    for alias, proxy in proxies.by_alias(_loaded).items():
        namespace["mcp_" + alias] = proxy
        server_module(alias, proxy)
    namespace["mcp_servers"] = _loaded
    publish()
