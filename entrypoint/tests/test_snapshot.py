"""The namespace snapshot (snapshot.py): what is saved and how it comes back, with cloudpickle and
with the standard pickle only, the size limit, and what cannot come back and why."""
import builtins
import importlib.machinery
import importlib.util
import sys
import threading
import types
import unittest

from entrypoint import cell, proxies, snapshot

HAS_CLOUDPICKLE = importlib.util.find_spec("cloudpickle") is not None

CELLS = """
import json as j
import os.path
scale = 3
def times(x):
    return x * scale
class Point:
    def __init__(self, x):
        self.x = x
    def norm(self):
        return times(self.x)
p = Point(2)
also_p = p
twice = lambda v: v * 2
def make_counter():
    n = [10]
    def count():
        n[0] += 1
        return n[0] + scale
    return count
counter = make_counter()
rows = [{"a": i} for i in range(100)]
"""


class Namespace:
    """A fresh `__main__` namespace published in sys.modules, as the runner does; restores the
    real `__main__` on exit."""

    def __enter__(self):
        self.saved_main = sys.modules["__main__"]
        module = types.ModuleType("__main__")
        module.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = module
        return module.__dict__

    def __exit__(self, *exc):
        sys.modules["__main__"] = self.saved_main
        return False


def save_and_restore(source, limit=1 << 20, use_cloudpickle=True, before=None):
    """Run `source` in one namespace, save it, restore into another: (namespace, names, failed)."""
    with Namespace() as ns:
        exec(source, ns)
        if before is not None:
            before(ns)
        parts, count = snapshot.save(ns, limit, use_cloudpickle=use_cloudpickle)
    blob = b"".join(parts or ())
    with Namespace() as fresh:
        names, failed = snapshot.restore(fresh, blob)
        return fresh, names, dict(failed), count


@unittest.skipUnless(HAS_CLOUDPICKLE, "cloudpickle is not installed here")
class WithCloudpickleTest(unittest.TestCase):
    def test_values_functions_classes_modules_and_aliases_come_back(self):
        ns, names, failed, count = save_and_restore(CELLS)
        self.assertEqual(failed, {})
        self.assertEqual(count, len(names))
        self.assertEqual(names, ["j", "os", "scale", "times", "Point", "p", "also_p", "twice",
                                 "make_counter", "counter", "rows"])
        self.assertIs(ns["j"], sys.modules["json"])
        self.assertIs(ns["also_p"], ns["p"], "a second name for one object stays one object")
        self.assertIsInstance(ns["p"], ns["Point"])
        self.assertEqual((ns["p"].norm(), ns["twice"](4), ns["counter"](), ns["rows"][99]),
                         (6, 8, 14, {"a": 99}))

    def test_functions_from_cells_use_the_namespace_they_come_back_into(self):
        ns, _, _, _ = save_and_restore(CELLS)
        ns["scale"] = 100  # as a later cell would
        self.assertEqual((ns["times"](2), ns["p"].norm()), (200, 200))
        self.assertIs(ns["times"].__globals__, ns)

    def test_a_function_using_an_unpicklable_global_is_still_saved(self):
        source = "import threading\nlock = threading.Lock()\ndef guarded():\n" \
                 "    with lock:\n        return 5\n"
        ns, names, failed, _ = save_and_restore(source)
        self.assertIn("guarded", names)
        self.assertIn("cannot pickle", failed["lock"])
        ns["lock"] = threading.Lock()
        self.assertEqual(ns["guarded"](), 5)

    def test_unpicklable_objects_are_named_with_the_reason(self):
        source = "import threading, socket\ngen = (i for i in range(3))\n" \
                 "lock = threading.Lock()\nsock = socket.socket()\nkept = 1\n"
        ns, names, failed, count = save_and_restore(source, before=lambda n: n["sock"].close())
        self.assertEqual(names, ["threading", "socket", "kept"])
        self.assertEqual(count, 6)
        self.assertRegex(failed["gen"], r"cannot be pickled: TypeError: .*generator")
        self.assertRegex(failed["lock"], r"cannot be pickled: TypeError: .*lock")
        self.assertRegex(failed["sock"], r"cannot be pickled: TypeError: .*socket")


class WithTheStandardPickleTest(unittest.TestCase):
    """What the fallback (no cloudpickle in the sandbox) keeps and says."""

    def test_plain_values_modules_and_cell_functions_still_come_back(self):
        ns, names, failed, _ = save_and_restore(CELLS, use_cloudpickle=False)
        for name in ("j", "os", "scale", "times", "make_counter", "counter", "rows", "twice"):
            self.assertIn(name, names)
        self.assertEqual((ns["times"](2), ns["counter"](), ns["twice"](3)), (6, 14, 6))
        self.assertIn("needs cloudpickle", failed["Point"])
        self.assertIn("p", failed)  # its class cannot be found without cloudpickle
        self.assertIn("the same object as p", failed["also_p"])

    def test_a_server_module_out_of_sys_modules_is_saved_by_its_name(self):
        # sandbox_api withdraws `mcp.servers.<alias>` from sys.modules between the execs that
        # do not use it; a name bound to it is still saved as the module, not pickled.
        mod = types.ModuleType("mcp.servers.gh")
        mod.__spec__ = importlib.machinery.ModuleSpec("mcp.servers.gh", None)
        mod.lock = threading.Lock()  # pickled by value it would fail
        ns, names, failed, _ = save_and_restore(
            "x = 1", before=lambda ns: ns.update(gh=mod))
        self.assertIn("gh", failed)  # no such module to import in this test process
        self.assertIn("ModuleNotFoundError", failed["gh"])
        self.assertNotIn("pickle", failed["gh"])

    def test_the_fallback_is_used_when_cloudpickle_cannot_be_imported(self):
        saved = sys.modules.get("cloudpickle")
        sys.modules["cloudpickle"] = None  # `import cloudpickle` now raises ImportError
        try:
            self.assertEqual(snapshot.pickler_base(), ("pickle", snapshot.pickle.Pickler))
            _, names, failed, _ = save_and_restore("class K:\n    pass\nv = 1\n")
        finally:
            if saved is None:
                del sys.modules["cloudpickle"]
            else:
                sys.modules["cloudpickle"] = saved
        self.assertEqual(names, ["v"])
        self.assertIn("needs cloudpickle", failed["K"])


class LimitsAndDamageTest(unittest.TestCase):
    def test_the_largest_names_are_left_out_until_the_rest_fits(self):
        source = "small = 'x' * 1000\nmiddle = b'm' * 400_000\nlarge = b'l' * 700_000\n" \
                 "huge = b'h' * 3_000_000\n"
        _, names, failed, count = save_and_restore(source, limit=1 << 20)
        self.assertEqual((names, count), (["small", "middle"], 4))
        self.assertRegex(failed["huge"], r"too big: .*MCP_BRIDGE_SNAPSHOT_MAX")
        self.assertRegex(failed["large"], r"left out to keep the snapshot under "
                                          r"MCP_BRIDGE_SNAPSHOT_MAX \(1.0 MiB\)")

    def test_the_snapshot_stays_under_the_limit(self):
        with Namespace() as ns:
            for i in range(40):
                ns["v%d" % i] = bytes(60_000)
            parts, _ = snapshot.save(ns, 1 << 20)
        self.assertLessEqual(sum(map(len, parts)), 1 << 20)

    def test_an_empty_namespace_saves_nothing(self):
        with Namespace() as ns:
            ns[cell.RESULT] = 1
            ns["mcp_servers"] = proxies.ServerDict()
            ns["mcp_x"] = proxies.ServerProxy("x")
            self.assertEqual(snapshot.save(ns, 1 << 20), (None, 0))

    def test_damaged_or_foreign_bytes_restore_nothing_and_say_why(self):
        with Namespace() as ns:
            ns["v"] = 1
            blob = b"".join(snapshot.save(ns, 1 << 20)[0])
        for bad, why in [(b"junk", "not one this entrypoint wrote"),
                         (blob[:-3], "cut short"),
                         (blob[:-20] + b"\x00" * 12 + blob[-8:], "damaged")]:
            with Namespace() as fresh:
                names, failed = snapshot.restore(fresh, bad)
                self.assertEqual(names, [])
                self.assertIn(why, failed[0][1])
                self.assertNotIn("v", fresh)

    def test_a_snapshot_of_another_python_restores_nothing(self):
        with Namespace() as ns:
            ns["v"] = 1
            parts, _ = snapshot.save(ns, 1 << 20)
        blob = b"".join(parts)
        real = sys.version_info
        try:
            sys.version_info = (3, 99, 0)
            with Namespace() as fresh:
                names, failed = snapshot.restore(fresh, blob)
        finally:
            sys.version_info = real
        self.assertEqual(names, [])
        self.assertIn("saved by Python", dict(failed)["v"])


class JavaScriptStateTest(unittest.TestCase):
    """The JavaScript child's bytes kept beside the pickles, counted in the limit."""

    def test_kept_as_given_with_or_without_python_names(self):
        js = b'{"v":1,"items":[],"skipped":[]}'
        for source in ("x = 1", ""):
            with Namespace() as ns:
                exec(source, ns)
                parts, _ = snapshot.save(ns, 1 << 20, use_cloudpickle=False, js=js)
            blob = b"".join(parts)
            self.assertEqual(snapshot.js_state(blob), js, source)
            with Namespace() as fresh:
                names, failed = snapshot.restore(fresh, blob)
            self.assertEqual((names, failed), (["x"] if source else [], []))
        with Namespace() as ns:
            ns["y"] = 2
            parts, _ = snapshot.save(ns, 1 << 20, use_cloudpickle=False)
        self.assertIsNone(snapshot.js_state(b"".join(parts)), "none was given")
        self.assertIsNone(snapshot.js_state(b"not a snapshot"))

    def test_its_bytes_count_in_the_limit(self):
        with Namespace() as ns:
            ns["big"] = "y" * 50_000
            parts, _ = snapshot.save(ns, 60_000, use_cloudpickle=False, js=b"j" * 40_000)
        with Namespace() as fresh:
            names, failed = snapshot.restore(fresh, b"".join(parts))
        self.assertEqual(names, [])
        self.assertIn("big", dict(failed))


class ClearTest(unittest.TestCase):
    def test_clear_removes_the_users_names_and_keeps_the_entrypoints(self):
        with Namespace() as ns:
            proxy, servers = proxies.ServerProxy("gh"), proxies.ServerDict()
            ns.update({"mcp_gh": proxy, "mcp_servers": servers, "df": 1, "_x": 2,
                       "mcp_mine": 3})
            self.assertEqual(snapshot.clear(ns), ("df", "_x", "mcp_mine"))
            self.assertIs(ns["mcp_gh"], proxy)
            self.assertIs(ns["mcp_servers"], servers)
            self.assertIs(ns["__builtins__"], builtins)


if __name__ == "__main__":
    unittest.main()
