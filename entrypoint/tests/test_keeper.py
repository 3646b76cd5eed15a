"""The snapshot and progress frames through the real entrypoint (keeper.py, __main__.py): `save_namespace` ->
`snapshot` chunks + `saved`, `restore_namespace` chunks -> `restored`, `runtime.reset()`, and `progress`
polls answered with the running cell's output."""
import base64
import time
import unittest

from entrypoint import keeper
from entrypoint.tests import Sandbox

SETUP = ("import json as j\nimport threading\nscale = 3\ndef times(x):\n    return x * scale\n"
         "gen = (i for i in range(3))\nlock = threading.Lock()\nblob = b'z' * 300_000\n")


def save(sb, save_id, limit=1 << 20, chunk=65536):
    """Ask `sb` for a snapshot: (bytes, the `saved` frame, how many chunk frames came)."""
    sb.send({"t": "save_namespace", "id": save_id, "limit": limit, "chunk": chunk})
    data, chunks = b"", 0
    while True:
        frame = sb.recv()
        if frame["t"] == "snapshot":
            assert frame["id"] == save_id, frame
            data += base64.b64decode(frame["data"])
            chunks += 1
            continue
        assert frame["t"] == "saved", frame
        return data, frame, chunks


def restore(sb, restore_id, blob, chunk=100_000, as_host=True):
    """Send `blob` to `sb` as a restore: the `restored` frame. `as_host`: the fields in the
    host's order (read without the JSON decoder), else in another order (read as JSON)."""
    for start in range(0, len(blob), chunk):
        data = base64.b64encode(blob[start:start + chunk]).decode()
        if as_host:
            sb.send({"t": "restore_namespace", "id": restore_id, "data": data, "done": False})
        else:
            sb.send({"data": data, "id": restore_id, "t": "restore_namespace"})
    sb.send({"t": "restore_namespace", "id": restore_id, "data": "", "done": True})
    frame = sb.recv()
    assert frame["t"] == "restored" and frame["id"] == restore_id, frame
    return frame


class SnapshotFramesTest(unittest.TestCase):
    def setUp(self):
        self.sandboxes = []

    def tearDown(self):
        for sb in self.sandboxes:
            self.assertEqual(sb.close(), 0, sb.stderr)

    def sandbox(self):
        sb = Sandbox()
        sb.boot()
        self.sandboxes.append(sb)
        return sb

    def test_a_namespace_saved_in_one_sandbox_comes_back_in_the_next(self):
        old = self.sandbox()
        self.assertTrue(old.run(SETUP)["ok"])
        blob, saved, chunks = save(old, 100, chunk=65536)
        self.assertEqual(saved, {"t": "saved", "id": 100, "bytes": len(blob), "names": 7})
        self.assertGreater(chunks, 4, "the snapshot comes in chunks of the size asked for")
        new = self.sandbox()
        report = restore(new, 101, blob)
        self.assertEqual(report["names"], ["j", "threading", "scale", "times", "blob"])
        self.assertEqual(sorted(name for name, _ in report["failed"]), ["gen", "lock"])
        result = new.run("scale = 10\nprint(times(2), j.dumps(len(blob)))")
        self.assertEqual(result["stdout"], "20 300000\n", result)

    def test_restore_frames_in_any_field_order_are_read(self):
        old = self.sandbox()
        old.run("v = list(range(50_000))")
        blob = save(old, 1)[0]
        for as_host in (True, False):
            report = restore(self.sandbox(), 2, blob, chunk=30_000, as_host=as_host)
            self.assertEqual((report["names"], report["failed"]), (["v"], []), as_host)
        line = b'{"t":"restore_namespace","id":7,"data":"QQ==","done":true}'
        self.assertEqual(keeper.restore_frame(line),
                         {"t": "restore_namespace", "id": 7, "data": b"QQ==", "done": True})
        for other in (b'{"t":"restore_namespace","id":"7","data":"","done":true}',
                      b'{"t":"restore_namespace","id":7,"done":true,"data":""}',
                      b'{"t":"restore_namespace","id":7,"data":"QQ==","done":null}'):
            self.assertIsNone(keeper.restore_frame(other), other)

    def test_the_limit_leaves_the_largest_names_out_and_an_empty_namespace_sends_nothing(self):
        sb = self.sandbox()
        self.assertEqual(save(sb, 5)[1:], ({"t": "saved", "id": 5, "bytes": 0, "names": 0}, 0))
        sb.run("small = 1\nbig = b'b' * 2_000_000")
        blob, saved, _ = save(sb, 6, limit=1 << 20)
        self.assertLessEqual(len(blob), 1 << 20)
        report = restore(self.sandbox(), 7, blob)
        self.assertEqual(report["names"], ["small"])
        self.assertIn("MCP_BRIDGE_SNAPSHOT_MAX", dict(report["failed"])["big"])

    def test_reset_clears_the_namespace_after_the_host_answers(self):
        sb = self.sandbox()
        sb.run("a = 1\nimport json")
        calls = []

        def host(sandbox, call):
            calls.append(call["method"])
            sandbox.send({"t": "reply", "id": call["id"], "ok": True,
                          "value": {"snapshot_dropped": True}})

        result = sb.run("from mcp import runtime\nremoved = runtime.reset()\nprint(sorted(removed), "
                        "sorted(k for k in globals() if not k.startswith('__')))", on_call=host)
        self.assertEqual(result["stdout"], "['a', 'json', 'runtime'] ['mcp_servers', 'removed']\n",
                         result)
        rt = "__import__('mcp.runtime').runtime"
        result = sb.run("x = 1\nfirst = await %s.reset()\ny = 2\nprint(first, %s.reset_sync())"
                        % (rt, rt), on_call=host)
        self.assertEqual(result["stdout"], "('removed', 'x') ('first', 'y')\n", result)
        self.assertEqual(calls, ["reset", "reset", "reset"])


class ProgressFramesTest(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()
        self.sb.boot()

    def tearDown(self):
        self.assertEqual(self.sb.close(), 0, self.sb.stderr)

    def test_a_poll_is_answered_with_the_running_cells_output_so_far(self):
        eid = self.sb.start_exec("import sys, time\nfor i in range(30):\n    print('line', i)\n"
                                 "    print('err', i, file=sys.stderr)\n    time.sleep(0.05)")
        time.sleep(0.5)
        self.sb.send({"t": "progress", "id": eid, "tail": 30})
        frame = self.sb.recv()
        self.assertEqual(frame["t"], "output", frame)
        self.assertEqual(frame["id"], eid)
        self.assertLessEqual(len(frame["stdout"]), 30)
        self.assertRegex(frame["stdout"], r"line \d+\n$")
        self.assertRegex(frame["stderr"], r"err \d+\n$")
        self.assertGreater(frame["stdout_total"], 30)
        self.assertIn(eid, self.sb.started, "`started` goes out before any output frame")
        result = self.sb.wait_result(eid)
        self.assertTrue(result["ok"])
        # A poll for an exec that is over is not answered.
        self.sb.send({"t": "progress", "id": eid, "tail": 30})
        self.assertTrue(self.sb.run("print('next')")["ok"])

    def test_an_exec_without_polls_sends_no_output_frames(self):
        result = self.sb.run("import time\nprint('a')\ntime.sleep(0.3)\nprint('b')")
        self.assertEqual(result["stdout"], "a\nb\n")


if __name__ == "__main__":
    unittest.main()
