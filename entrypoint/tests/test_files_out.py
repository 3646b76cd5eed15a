"""Files out through the real entrypoint: `file` frames go out after the cell, before its
result; the runner's `after` step, and what happens when it fails or the cell was interrupted."""
import base64
import signal
import threading
import unittest

from entrypoint.capture import Capture
from entrypoint.runner import ExecState, Runner
from entrypoint.tests import Sandbox


class EntrypointFilesTest(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()
        self.sb.boot()

    def tearDown(self):
        self.sb.close()

    def test_outbox_files_go_before_the_result_and_only_once(self):
        code = ("from mcp import runtime\nimport os\n"
                "open(os.path.join(runtime.OUTBOX, 'a.txt'), 'w').write('hello')\n"
                "print(runtime.save(b'\\x00\\x01', 'raw.bin'))")
        result = self.sb.run(code)
        self.assertTrue(result["ok"], result)
        self.assertTrue(result["stdout"].endswith("/out/raw.bin\n"), result["stdout"])
        got = {f["name"]: base64.b64decode(f["data"]) for f in self.sb.file_frames}
        self.assertEqual(got, {"a.txt": b"hello", "raw.bin": b"\x00\x01"})
        self.assertTrue(all(f["exec"] == 1 and f["end"] for f in self.sb.file_frames))
        self.sb.file_frames.clear()
        self.assertTrue(self.sb.run("x = 1")["ok"])
        self.assertEqual(self.sb.file_frames, [])

    def test_display_is_a_builtin_and_runtime_helpers_exist(self):
        result = self.sb.run("from mcp.runtime import save, display as d\n"
                             "display({'a': 1})\nd('text')\nprint(display is not None)")
        self.assertEqual(result["stdout"], "{'a': 1}\ntext\nTrue\n", result)


class RunnerAfterTest(unittest.TestCase):
    def setUp(self):
        self.calls = []
        self.state = ExecState()
        self.runner = Runner(self.state, Capture("<stdout>"), Capture("<stderr>"))
        self.runner.after = self.calls.append

    def tearDown(self):
        self.runner.close()

    def run_code(self, exec_id, code):
        return self.runner.run({"t": "exec", "id": exec_id, "code": code})

    def test_after_runs_for_every_finished_exec(self):
        self.assertTrue(self.run_code(1, "x = 1")["ok"])
        self.assertFalse(self.run_code(2, "1/0")["ok"])
        self.assertEqual(self.calls, [1, 2], "files of a cell that raised still go")

    def test_after_is_skipped_for_an_interrupted_exec(self):
        """The host waits only a moment for an interrupted exec's result: its files wait for
        the next exec."""
        main = threading.get_ident()
        previous = signal.signal(signal.SIGINT, self.state.on_sigint)
        timer = threading.Timer(0.2, self.state.request_interrupt, (6, main))
        timer.start()
        try:
            result = self.run_code(6, "import time\ntime.sleep(10)")
        finally:
            timer.join()
            signal.signal(signal.SIGINT, previous)
        self.assertTrue(result["interrupted"], result)
        self.assertEqual(self.calls, [])
        self.assertTrue(self.run_code(7, "x = 1")["ok"])
        self.assertEqual(self.calls, [7])

    def test_a_failing_after_step_keeps_the_outcome_and_says_so(self):
        def broken(exec_id):
            raise OSError("disk on fire")

        self.runner.after = broken
        result = self.run_code(5, "print('hi')")
        self.assertTrue(result["ok"], result)
        self.assertEqual(result["stdout"], "hi\n")
        self.assertIn("files could not be sent", result["stderr"])
        self.assertIn("disk on fire", result["stderr"])


if __name__ == "__main__":
    unittest.main()
