"""The runner in-process: persistence, top-level await, captures, tracebacks, output limits."""
import sys
import unittest

from entrypoint.capture import Capture
from entrypoint.runner import ExecState, Runner

INTERNALS = ("runner.py", "entrypoint", "_mcp_bridge", "asyncio", "base_events")


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.runner = Runner(ExecState(), Capture("<stdout>"), Capture("<stderr>"))
        self.next_id = 0

    def tearDown(self):
        self.runner.close()

    def run_code(self, code, limit=65536):
        self.next_id += 1
        result = self.runner.run({"t": "exec", "id": self.next_id, "code": code,
                                  "servers": [], "output_limit": limit})
        self.assertEqual(result["id"], self.next_id)
        return result

    def assert_ok(self, result, stdout=None):
        self.assertTrue(result["ok"], result["error"])
        self.assertIsNone(result["error"])
        if stdout is not None:
            self.assertEqual(result["stdout"], stdout)

    def test_result_frame_shape(self):
        result = self.run_code("print('hi')")
        self.assertEqual(result, {"t": "result", "id": 1, "ok": True, "stdout": "hi\n",
                                  "stderr": "", "error": None, "stdout_dropped": 0,
                                  "stderr_dropped": 0, "interrupted": False})

    def test_state_persists_across_execs(self):
        self.assert_ok(self.run_code("x = 40\nimport json\ndef add(a, b=2):\n    return a + b\n"))
        self.assert_ok(self.run_code("print(add(x), json.dumps([x]))"), "42 [40]\n")
        self.assert_ok(self.run_code("print(__name__)"), "__main__\n")

    def test_top_level_await(self):
        code = ("import asyncio\n"
                "async def twice(v):\n    await asyncio.sleep(0.01)\n    return 2 * v\n"
                "r = await asyncio.gather(twice(1), twice(2))\nprint(r)")
        self.assert_ok(self.run_code(code), "[2, 4]\n")
        self.assert_ok(self.run_code("print(await twice(r[1]))"), "8\n")

    def test_stdout_and_stderr_are_captured_separately(self):
        result = self.run_code("import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                               "sys.stdout.write('more');")
        self.assert_ok(result, "out\nmore")
        self.assertEqual(result["stderr"], "err\n")
        self.assertIs(sys.stdout, self.runner._orig[0])  # restored after the exec

    def test_exception_gives_user_frames_only(self):
        self.assert_ok(self.run_code("def explode(n):\n    return {}['missing' + str(n)]\n"))
        result = self.run_code("a = 1\nexplode(a)\n")
        self.assertFalse(result["ok"])
        self.assertFalse(result["interrupted"])
        error = result["error"]
        self.assertTrue(error.startswith("Traceback (most recent call last):\n"), error)
        self.assertIn('File "<run_python>", line 2, in <module>\n    explode(a)\n', error)
        # the function from the earlier exec shows its own source line
        self.assertIn('File "<run_python>", line 2, in explode\n    return {}[', error)
        self.assertTrue(error.endswith("KeyError: 'missing1'\n"), error)
        for word in INTERNALS:
            self.assertNotIn(word, error)

    def test_exception_in_awaited_code_hides_asyncio_and_runner(self):
        result = self.run_code("import asyncio\nawait asyncio.sleep(0)\nraise ValueError('boom')")
        self.assertFalse(result["ok"])
        self.assertIn('line 3, in <module>\n    raise ValueError(\'boom\')', result["error"])
        for word in INTERNALS:
            self.assertNotIn(word, result["error"])

    def test_library_frames_below_user_code_are_kept(self):
        result = self.run_code("import json\njson.loads('{bad')")
        self.assertIn("json", result["error"].split("<run_python>")[-1])
        self.assertIn("JSONDecodeError", result["error"])

    def test_chained_exceptions_are_cleaned_too(self):
        result = self.run_code("try:\n    1/0\n"
                               "except Exception as e:\n    raise RuntimeError('x') from e")
        error = result["error"]
        self.assertIn("ZeroDivisionError", error)
        self.assertIn("direct cause", error)
        self.assertIn("RuntimeError: x", error)
        for word in INTERNALS:
            self.assertNotIn(word, error)

    def test_syntax_error(self):
        result = self.run_code("x = (1,\nprint(x")
        self.assertFalse(result["ok"])
        self.assertIn("SyntaxError", result["error"])
        self.assertIn("<run_python>", result["error"])
        self.assertNotIn("runner.py", result["error"])

    def test_system_exit_does_not_end_the_process(self):
        result = self.run_code("import sys\nprint('a')\nsys.exit(3)")
        self.assertFalse(result["ok"])
        self.assertEqual(result["stdout"], "a\n")
        self.assertIn("SystemExit: 3", result["error"])
        self.assertEqual(result["exit_code"], 3)
        self.assertNotIn("exit_message", result)
        self.assert_ok(self.run_code("print('still here')"), "still here\n")

    def test_system_exit_reports_the_status_python3_would_exit_with(self):
        cases = [("sys.exit()", 0, None), ("sys.exit(None)", 0, None), ("sys.exit(0)", 0, None),
                 ("raise SystemExit(7)", 7, None), ("sys.exit(256 + 7)", 7, None),
                 ("sys.exit(-1)", 255, None), ("sys.exit(True)", 1, None),
                 ("sys.exit('bad input')", 1, "bad input"),
                 ("async def f():\n    sys.exit(5)\nawait f()", 5, None)]
        for code, status, message in cases:
            with self.subTest(code=code):
                result = self.run_code("import sys\n" + code)
                self.assertFalse(result["ok"])
                self.assertEqual(result["exit_code"], status)
                self.assertEqual(result.get("exit_message"), message)
        result = self.run_code("1/0")
        self.assertNotIn("exit_code", result)  # only a SystemExit carries one

    def test_print_of_10_mb_is_cut_with_exact_dropped_count(self):
        result = self.run_code("print('x' * 10_000_000)\nimport sys\nsys.stderr.write('e' * 100);",
                               limit=65536)
        self.assert_ok(result)
        self.assertEqual(len(result["stdout"]), 65536)
        self.assertEqual(result["stdout_dropped"], 10_000_001 - 65536)
        self.assertEqual(result["stdout"], "x" * 65535 + "\n")
        self.assertEqual((result["stderr"], result["stderr_dropped"]), ("e" * 100, 0))
        small = self.run_code("print('0123456789' * 3)", limit=8)
        self.assertEqual((small["stdout"], small["stdout_dropped"]), ("012345" + "9\n", 23))

    def test_hostile_stream_replacement_does_not_leak_into_next_exec(self):
        self.assert_ok(self.run_code("import sys, io\nsys.stdout = io.StringIO()\n"
                                     "sys.stderr = None\nkeep = print"))
        self.assert_ok(self.run_code("print('visible')"), "visible\n")

    def test_event_loop_replaced_or_closed_by_user_code(self):
        self.assert_ok(self.run_code("import asyncio\nasyncio.get_event_loop().close()"))
        self.assert_ok(self.run_code("import asyncio\nawait asyncio.sleep(0)\nprint(1)"), "1\n")
        self.assert_ok(self.run_code("import asyncio\nprint(asyncio.run(asyncio.sleep(0, 5)))"),
                       "5\n")
        self.assert_ok(self.run_code("await asyncio.sleep(0)\nprint(2)"), "2\n")

    def test_code_that_stops_the_loop_leaves_no_task_behind(self):
        result = self.run_code("import asyncio\nasyncio.get_running_loop().stop()\n"
                               "await asyncio.sleep(0.05)\nprint('not reached')")
        self.assertFalse(result["ok"])
        self.assertIn("stopped before Future completed", result["error"])
        self.assert_ok(self.run_code("await asyncio.sleep(0.1)\nprint('ok')"), "ok\n")

    def test_malformed_code_field(self):
        result = self.runner.run({"t": "exec", "id": 9, "code": None})
        self.assertFalse(result["ok"])
        self.assertIn("code", result["error"])

    def test_huge_error_text_is_capped(self):
        result = self.run_code("raise ValueError('v' * 5_000_000)", limit=10000)
        self.assertLess(len(result["error"]), 11000)
        self.assertIn("characters cut", result["error"])


if __name__ == "__main__":
    unittest.main()
