"""The user's namespace as bytes and back (ARCHITECTURE.md, "State that outlives the sandbox"):
`save` pickles what it can of it, bounded in size, `restore` puts it into a fresh namespace,
`clear` empties it for `runtime.reset()`. Pure: no frames, no I/O (keeper.py sends the bytes).

What is saved: every name of the namespace but dunders and the entrypoint's own bindings
(`mcp_servers`, `mcp_<alias>` proxies, the cell result). Modules are saved as their import name
and imported again; a name bound to the same object as an earlier name is saved as that name;
everything else is pickled on its own, with cloudpickle when it can be imported (functions and
classes defined in cells, lambdas, closures) and the standard pickle otherwise. Functions
defined in cells are pickled without their globals (their code, defaults and closure only) and
come back bound to the namespace they are restored into, so they see its live names, as
before, and a function using a large or unpicklable global is still saved.

When the pickles do not fit in the limit, the largest names are left out until they do; every
name left out is listed with the reason, and the restoring side reports them with its own.

The JavaScript child's state (run_typescript's names), when there is one, is kept beside them as
jscells.py wrote it, counted in the same limit.

The bytes: MAGIC, the pickles one after another, the JavaScript state, then the manifest (a
standard pickle of plain data: version, pickler, records, names left out, where the JavaScript
state is) and its length as 8 bytes, big-endian."""
import importlib
import marshal
import pickle
import sys
import time
import types

from . import cell, proxies

MAGIC = b"MCBSNAP1"
PROTOCOL = 5
# Room kept for the manifest: a fixed part, and per name.
MANIFEST_BASE = 4096
MANIFEST_PER_NAME = 512
_WHY_MAX = 300  # characters of an exception message kept in a reason

_target = [None]  # the namespace a restore is filling (for functions defined in cells)


class _TooBig(Exception):
    """A pickle grew past the bytes it was allowed."""


class _Sink:
    """Where a pickler writes: keeps the bytes, raises _TooBig past `cap` bytes."""

    def __init__(self, cap):
        self.n = 0
        self.cap = cap
        self.parts = []

    def write(self, data):
        size = memoryview(data).nbytes
        self.n += size
        if self.n > self.cap:
            raise _TooBig
        self.parts.append(bytes(data))
        return size


def pickler_base():
    """(name, Pickler class): cloudpickle's when it can be imported, else the standard one."""
    try:
        import cloudpickle  # noqa: PLC0415 - optional, and only needed when saving
    except Exception:  # noqa: BLE001 - missing or broken: the standard pickle still works
        return "pickle", pickle.Pickler
    return "cloudpickle", cloudpickle.Pickler


def _pickler_class(base, namespace):
    class Pickler(base):
        """`base`, with functions defined in cells of `namespace` pickled without globals."""

        def reducer_override(self, obj):
            if type(obj) is types.FunctionType and obj.__globals__ is namespace:
                return _reduce_cell_function(obj)
            parent = getattr(super(), "reducer_override", None)
            return NotImplemented if parent is None else parent(obj)

    return Pickler


def _reduce_cell_function(fn):
    closure = None
    if fn.__closure__ is not None:
        try:
            closure = tuple(c.cell_contents for c in fn.__closure__)
        except ValueError:
            raise pickle.PicklingError("%s has an empty closure cell" % fn.__qualname__) from None
    return _rebuild_function, (marshal.dumps(fn.__code__), fn.__name__, fn.__qualname__,
                               fn.__defaults__, fn.__kwdefaults__, closure, fn.__doc__,
                               fn.__annotations__ or None, fn.__dict__ or None, fn.__module__)


def _rebuild_function(code, name, qualname, defaults, kwdefaults, closure, doc, annotations,
                      attrs, module):
    """A function defined in a cell, bound to the namespace being restored into."""
    target = _target[0]
    if target is None:
        target = sys.modules["__main__"].__dict__
    cells = None if closure is None else tuple(types.CellType(v) for v in closure)
    fn = types.FunctionType(marshal.loads(code), target, name, defaults, cells)
    fn.__qualname__, fn.__kwdefaults__, fn.__doc__, fn.__module__ = qualname, kwdefaults, doc, module
    if annotations:
        fn.__annotations__ = annotations
    if attrs:
        fn.__dict__.update(attrs)
    return fn


def _own(name, value):
    """True for the entrypoint's own bindings, which every exec sets again."""
    if name.startswith("__") and name.endswith("__"):
        return True
    if name == cell.RESULT:
        return True
    return name.startswith("mcp_") and isinstance(value, (proxies.ServerProxy, proxies.ServerDict))


def user_items(namespace):
    """The (name, value) pairs of `namespace` that belong to the user, in definition order."""
    return [(k, v) for k, v in list(namespace.items()) if isinstance(k, str) and not _own(k, v)]


def clear(namespace):
    """Remove every user name from `namespace`; returns the names removed."""
    names = tuple(name for name, _ in user_items(namespace))
    for name in names:
        namespace.pop(name, None)
    return names


def _why(exc):
    text = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    return text if len(text) <= _WHY_MAX else text[:_WHY_MAX] + "..."


def _mib(n):
    return "%.1f MiB" % (n / 1048576.0)


def _module_name(value):
    """The import name of a module to save by name: one in sys.modules, or a server's module
    (`mcp.servers.<alias>`), which leaves sys.modules between the execs that do not use it and
    is imported again by that name (sandbox_api.py)."""
    name = getattr(value, "__name__", None)
    if not isinstance(name, str):
        return None
    if sys.modules.get(name) is value:
        return name
    spec = getattr(value, "__spec__", None)
    if name.startswith("mcp.servers.") and getattr(spec, "name", None) == name:
        return name
    return None


def _pickle_each(items, budget, limit, pickler, plain):
    """(records, skipped, pickles): each name pickled on its own, once. While the pickles held
    are over `budget`, the largest of them is left out, so what is kept is what leaving out the
    largest names until the rest fit keeps, and no more than `budget` plus one pickle is held."""
    records, skipped, pickles, sizes, seen, held = [], [], {}, {}, {}, 0
    for name, value in items:
        module = _module_name(value) if isinstance(value, types.ModuleType) else None
        if module is not None:
            records.append((name, "module", module))
            continue
        first = seen.setdefault(id(value), name)
        if first != name:
            records.append((name, "alias", first))
            continue
        if plain and isinstance(value, type) and value.__module__ == "__main__":
            skipped.append((name, "a class defined in a cell: saving it needs cloudpickle, "
                                  "which this sandbox does not have"))
            continue
        sink = _Sink(budget)
        try:
            pickler(sink, PROTOCOL).dump(value)
        except _TooBig:
            skipped.append((name, "too big: its pickle is over the snapshot limit "
                                  "(MCP_BRIDGE_SNAPSHOT_MAX, %s)" % _mib(limit)))
            continue
        except Exception as exc:  # noqa: BLE001 - whatever pickling raised is the reason
            skipped.append((name, "cannot be pickled: " + _why(exc)))
            continue
        pickles[name], sizes[name] = sink.parts, sink.n
        held += sink.n
        records.append((name, "pickle", None))
        while held > budget:
            largest = max(sizes, key=sizes.get)
            size = sizes.pop(largest)
            held -= size
            del pickles[largest]
            skipped.append((largest, "left out to keep the snapshot under "
                                     "MCP_BRIDGE_SNAPSHOT_MAX (%s): %s pickled, one of the largest"
                            % (_mib(limit), _mib(size))))
    return records, skipped, pickles


def save(namespace, limit, use_cloudpickle=True, js=None):
    """The user's names in `namespace` as snapshot bytes of at most `limit` bytes, with `js`
    (the JavaScript child's state, jscells.py's bytes, counted in the limit) kept as it is.

    Returns (parts, count): the bytes as a list of chunks (None when there is no user name and
    no JavaScript state) and how many user names there were (saved or not)."""
    items = user_items(namespace)
    if not items and not js:
        return None, 0
    js = bytes(js or b"")
    name, base = pickler_base() if use_cloudpickle else ("pickle", pickle.Pickler)
    budget = limit - len(MAGIC) - MANIFEST_BASE - MANIFEST_PER_NAME * len(items) - len(js)
    records, skipped, pickles = _pickle_each(
        items, max(0, budget), limit, _pickler_class(base, namespace), name == "pickle")
    parts, size, kept, out = [MAGIC], len(MAGIC), set(), []
    for rec_name, kind, detail in records:
        if kind == "alias" and detail not in kept:
            skipped.append((rec_name, "the same object as %s, which was not saved" % detail))
            continue
        if kind == "pickle":
            if rec_name not in pickles:
                continue  # left out (listed in skipped)
            chunk = pickles.pop(rec_name)
            length = sum(map(len, chunk))
            parts.extend(chunk)
            detail, size = (size, length), size + length
        out.append((rec_name, kind, detail))
        kept.add(rec_name)
    js_at = None
    if js:
        js_at = (size, len(js))
        parts.append(js)
    manifest = pickle.dumps({"v": 1, "python": tuple(sys.version_info[:3]), "pickler": name,
                             "taken": time.time(), "records": out, "skipped": skipped,
                             "js": js_at},
                            protocol=PROTOCOL)
    parts += [manifest, len(manifest).to_bytes(8, "big")]
    return parts, len(items)


def restore(namespace, blob):
    """Put the names saved in `blob` into `namespace`. Returns (restored names, [(name, why)]
    for the names that did not come back: left out when saving, or failing now)."""
    view = memoryview(blob)
    if len(view) < len(MAGIC) + 8 or bytes(view[:len(MAGIC)]) != MAGIC:
        return [], [("*", "the snapshot is not one this entrypoint wrote")]
    size = int.from_bytes(view[-8:], "big")
    if size > len(view) - len(MAGIC) - 8:
        return [], [("*", "the snapshot is cut short")]
    try:
        manifest = pickle.loads(view[len(view) - 8 - size:len(view) - 8])
        records, failed = list(manifest["records"]), list(manifest["skipped"])
        python = tuple(manifest["python"])
    except Exception as exc:  # noqa: BLE001 - a damaged snapshot restores nothing
        return [], [("*", "the snapshot's manifest is damaged: " + _why(exc))]
    if python != tuple(sys.version_info[:3]):
        why = "saved by Python %s, this sandbox runs %s" % (
            ".".join(map(str, python)), ".".join(map(str, sys.version_info[:3])))
        return [], failed + [(rec[0], why) for rec in records]
    restored = []
    _target[0] = namespace
    try:
        for name, kind, detail in records:
            try:
                namespace[name] = _load(namespace, restored, kind, detail, view)
            except Exception as exc:  # noqa: BLE001 - one name failing must not stop the rest
                failed.append((name, "could not be restored: " + _why(exc)))
                continue
            except SystemExit as exc:  # an object's __setstate__ may call sys.exit()
                failed.append((name, "could not be restored: its unpickling raised "
                                     "SystemExit(%r)" % (exc.code,)))
                continue
            restored.append(name)
    finally:
        _target[0] = None
    return restored, failed


def js_state(blob):
    """The JavaScript child's state `save` kept in `blob` (bytes), or None when there is none
    (or the snapshot is damaged: `restore` says so)."""
    view = memoryview(blob)
    if len(view) < len(MAGIC) + 8 or bytes(view[:len(MAGIC)]) != MAGIC:
        return None
    size = int.from_bytes(view[-8:], "big")
    if size > len(view) - len(MAGIC) - 8:
        return None
    try:
        at = pickle.loads(view[len(view) - 8 - size:len(view) - 8]).get("js")
        start, length = int(at[0]), int(at[1])
    except Exception:  # noqa: BLE001 - none, or damaged
        return None
    if start < len(MAGIC) or length < 0 or start + length > len(view) - 8 - size:
        return None
    return bytes(view[start:start + length])


def _load(namespace, restored, kind, detail, view):
    if kind == "module":
        return importlib.import_module(detail)
    if kind == "alias":
        if detail not in restored:
            raise LookupError("the same object as %s, which did not come back" % detail)
        return namespace[detail]
    start, length = detail
    return pickle.loads(view[start:start + length])
