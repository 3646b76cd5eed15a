"""Modules imported ahead through the real entrypoint (preload.py, __main__.py): a `preload` frame is
answered with `preloaded`, the modules land in sys.modules and not in the namespace, an exec sent
right behind it runs after the imports, what the imports print goes nowhere, and a module that
fails (missing, raising, exiting) is named while the sandbox goes on."""
import unittest

from entrypoint import preload
from entrypoint.tests import Sandbox

PROBE = ("import sys\n"
         "print(sorted(m for m in ('colorsys', 'fractions', 'this') if m in sys.modules),\n"
         "      [m for m in ('colorsys', 'fractions', 'this') if m in globals()])")


class PreloadTest(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()
        self.sb.boot()

    def tearDown(self):
        self.assertEqual(self.sb.close(), 0, self.sb.stderr)

    def test_modules_are_imported_before_the_next_exec_and_only_into_sys_modules(self):
        self.sb.send({"t": "preload", "modules": ["colorsys", "fractions", "this"]})
        exec_id = self.sb.start_exec(PROBE)  # on its way while the imports run: it waits
        answer = self.sb.recv()
        self.assertEqual(answer["t"], "preloaded", answer)
        self.assertEqual((answer["imported"], answer["failed"]), (3, []), answer)
        self.assertIsInstance(answer["ms"], int)
        result = self.sb.wait_result(exec_id)
        # `this` prints the Zen of Python as it is imported: neither the cell nor stderr gets it.
        self.assertEqual(result["stdout"], "['colorsys', 'fractions', 'this'] []\n", result)
        self.assertEqual(result["stderr"], "", result)
        self.assertNotIn("Beautiful is better than ugly", self.sb.stderr)

    def test_without_a_preload_nothing_is_imported(self):
        result = self.sb.run(PROBE)
        self.assertEqual(result["stdout"], "[] []\n", result)

    def test_a_module_that_fails_is_named_and_the_sandbox_goes_on(self):
        # venv.__main__ runs venv's command line as it is imported: it prints its usage to stderr
        # and raises SystemExit(2). encodings.mbcs raises ImportError off Windows.
        self.sb.send({"t": "preload", "modules": ["no_such_module_x", "venv.__main__",
                                                  "encodings.mbcs", "colorsys"]})
        answer = self.sb.recv()
        self.assertEqual(answer["t"], "preloaded", answer)
        self.assertEqual(answer["imported"], 1, answer)
        failed = dict(answer["failed"])
        self.assertEqual(sorted(failed), ["encodings.mbcs", "no_such_module_x", "venv.__main__"])
        self.assertTrue(failed["no_such_module_x"].startswith("ModuleNotFoundError:"), failed)
        self.assertEqual(failed["venv.__main__"], "SystemExit: 2", failed)
        self.assertTrue(failed["encodings.mbcs"].startswith("ImportError:"), failed)
        self.assertNotIn("usage: venv", self.sb.stderr)
        result = self.sb.run("import sys\nprint('colorsys' in sys.modules, 'x')")
        self.assertEqual((result["ok"], result["stdout"]), (True, "True x\n"), result)


class ModuleNamesTest(unittest.TestCase):
    def test_only_dotted_identifiers_are_kept_and_at_most_32(self):
        self.assertEqual(preload.module_names(["a.b", "1x", "a..b", "", 5, None, "x" * 300, "os",
                                               "a.b-c", "ümlaut"]),
                         ["a.b", "os", "ümlaut"])
        self.assertEqual(preload.module_names("pandas"), [])
        self.assertEqual(len(preload.module_names(["m%d" % i for i in range(40)])),
                         preload.MAX_MODULES)

    def test_a_long_reason_is_cut(self):
        self.assertEqual(len(preload.why(ImportError("x" * 10_000))), preload.MAX_WHY)
        self.assertEqual(preload.why(SystemExit(2)), "SystemExit: 2")


if __name__ == "__main__":
    unittest.main()
