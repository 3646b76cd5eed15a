"""The `mcp` package that sandbox code imports (CONTRACT.md section 3): `mcp.runtime` helpers
(async, each with a blocking `_sync` twin) that call host methods over the frame channel, and the
`mcp.servers` package under which per-server proxy modules (`mcp.servers.<alias>`) are published.
The modules live only in sys.modules (no files) and are re-published before every exec, so sandbox
code that deletes or replaces them cannot break the next call. Owns no I/O: it uses the CallTable
given to `install`."""
import sys
import types

from .protocol import BridgeCallError

_calls = None  # the protocol.CallTable, set by install()
_modules = {}  # dotted name -> module object we publish in sys.modules


def _host():
    if _calls is None:
        raise BridgeCallError("the sandbox is not connected to the bridge")
    return _calls


async def call_host(method, params=None):
    """Call host `method` with a JSON-able dict of params; returns the reply value."""
    return await _host().call(method, params)


def call_host_sync(method, params=None):
    """Blocking `call_host` (works in plain code and inside a running event loop)."""
    return _host().call_sync(method, params)


# -- mcp.runtime helpers: one async function + a `_sync` twin per host method ----------------

async def ping(value=None):
    """Send `value` to the bridge and back; returns it. Measures the round trip."""
    return _echoed(await call_host("ping", {"value": value}))


def ping_sync(value=None):
    """Blocking `ping`."""
    return _echoed(call_host_sync("ping", {"value": value}))


def _echoed(reply):
    return reply.get("value") if isinstance(reply, dict) else reply


RUNTIME_EXPORTS = (ping, ping_sync)


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
    module.__all__ = sorted(set(getattr(module, "__all__", ())) | {f.__name__ for f in functions})


def install(calls):
    """Build the `mcp` modules and bind them to `calls` (a protocol.CallTable)."""
    global _calls
    _calls = calls
    root = _module("mcp", "The MCP bridge API: `from mcp import runtime`.", package=True)
    root.BridgeCallError = BridgeCallError
    runtime = _module("mcp.runtime", "Discovery and host helpers (async + _sync twins).")
    _export(runtime, RUNTIME_EXPORTS)
    _module("mcp.servers", "One module per loaded server: mcp.servers.<alias>.", package=True)
    publish()


def server_module(alias, attributes, doc=None):
    """Create or update `mcp.servers.<alias>` with `attributes` (name -> object); returns it."""
    mod = _module("mcp.servers." + alias, doc or "Tools of MCP server %r." % alias)
    mod.__dict__.update(attributes)
    mod.__all__ = sorted(k for k in mod.__dict__ if not k.startswith("_"))
    publish()
    return mod


def publish():
    """(Re)install every module in sys.modules and as attributes of its parent package."""
    for name, mod in _modules.items():
        if sys.modules.get(name) is not mod:
            sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent in _modules:
            setattr(_modules[parent], child, mod)


def prepare_exec(namespace, servers):
    """Called by the runner before each exec with the exec frame's `servers` list. Today it only
    re-publishes the modules; server proxies (`mcp_<alias>`, `mcp_servers`) will be bound here."""
    publish()
