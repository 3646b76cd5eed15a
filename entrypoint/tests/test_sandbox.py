"""End to end through the real path: `python3 -I -c <boot.py>`, the boot frame, frames on stdio."""
import json
import os
import subprocess
import sys
import time
import unittest

from entrypoint.tests import Sandbox, boot_source, encode, entrypoint_files


class SandboxCase(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()
        self.ready = self.sb.boot()

    def tearDown(self):
        self.assertEqual(self.sb.close(), 0, self.sb.stderr)

    def assert_ok(self, result, stdout=None):
        self.assertTrue(result["ok"], result["error"])
        if stdout is not None:
            self.assertEqual(result["stdout"], stdout)


class BootTest(SandboxCase):
    def test_ready_frame(self):
        posture = self.ready.pop("posture")
        self.assertEqual(self.ready, {"t": "ready", "v": 1, "channel": "stdio",
                                      "python": "%d.%d.%d" % sys.version_info[:3]})
        self.assertEqual(posture["uid"], os.getuid())

    def test_every_output_line_is_a_frame_and_stray_writes_go_to_stderr(self):
        result = self.sb.run("import os, subprocess, sys\n"
                             "os.write(1, b'stray-fd1\\n')\n"
                             "sys.__stdout__.write('stray-dunder\\n'); sys.__stdout__.flush()\n"
                             "subprocess.run(['sh', '-c', 'echo stray-child'])\n"
                             "print('captured')\n"
                             "print(repr(sys.stdin.read()))")
        self.assert_ok(result, "captured\n''\n")
        self.sb.close()
        for line in self.sb.raw_lines:
            json.loads(line)
        for word in ("stray-fd1", "stray-dunder", "stray-child"):
            self.assertIn(word, self.sb.stderr)

    def test_the_package_is_in_memory_and_code_runs_unprivileged_paths(self):
        result = self.sb.run("import sys\nm = sys.modules['_mcp_bridge.runner']\n"
                             "print(m.__file__, m.__spec__.origin)")
        self.assert_ok(result, "<_mcp_bridge/runner.py> <_mcp_bridge/runner.py>\n")

    def test_malformed_and_unknown_frames_are_ignored(self):
        self.sb.send_raw(b"this is not json\n\xff\xfe\n[1]\n{}\n\n")
        self.sb.send({"t": "bogus", "id": 1})
        self.sb.send({"t": "reply", "id": 12345, "ok": True, "value": 1})
        self.sb.send({"t": "exec", "id": "nope", "code": "print(1)"})
        self.sb.send({"t": "interrupt", "id": 999})
        self.assert_ok(self.sb.run("print('fine')"), "fine\n")
        self.assertEqual(self.sb.close(), 0)
        self.assertIn("unknown frame type 'bogus'", self.sb.stderr)
        self.assertIn("malformed frame", self.sb.stderr)


class BootEdgeTest(unittest.TestCase):
    def spawn(self, data):
        proc = subprocess.run([sys.executable, "-I", "-c", boot_source()], input=data,
                              capture_output=True, timeout=30)
        return proc.returncode, proc.stdout, proc.stderr.decode()

    def boot_frame(self, **extra):
        frame = {"t": "boot", "v": 1, "package": "_mcp_bridge", "files": entrypoint_files()}
        frame.update(extra)
        return encode(frame)

    def test_bad_boot_frames_exit_2_with_a_message(self):
        for data in (b"", b"garbage\n", b'{"t":"boot","v":2}\n', b"{\"t\":\"boot\"",
                     self.boot_frame(files={"__init__.py": ""})):
            code, out, err = self.spawn(data)
            self.assertEqual(code, 2, (data[:50], err))
            self.assertEqual(out, b"")
            self.assertIn("mcp-bridge boot:", err)

    def test_large_boot_frame_and_bytes_after_it_are_kept(self):
        files = entrypoint_files()
        files["zz_padding.py"] = "# " + "p" * 300000 + "\n"
        data = (encode({"t": "boot", "v": 1, "package": "_mcp_bridge", "files": files})
                + encode({"t": "exec", "id": 1, "code": "print('early')", "output_limit": 100}))
        code, out, err = self.spawn(data)  # stdin then closes: EOF means exit 0
        self.assertEqual(code, 0, err)
        frames = [json.loads(line) for line in out.splitlines()]
        # A quick exec sends no `started`: its result implies it (see ack.py).
        self.assertEqual([f["t"] for f in frames], ["ready", "result"])
        self.assertEqual(frames[1]["stdout"], "early\n")

    def test_started_is_sent_for_slow_execs_and_before_any_call(self):
        files = entrypoint_files()
        data = (encode({"t": "boot", "v": 1, "package": "_mcp_bridge", "files": files})
                + encode({"t": "exec", "id": 1, "code": "import time; time.sleep(0.2)"})
                + encode({"t": "exec", "id": 2, "code": "from mcp import runtime\nruntime.ping_sync(1)"}))
        proc = subprocess.Popen([sys.executable, "-I", "-c", boot_source()], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdin.write(data)
        proc.stdin.flush()
        seen = []
        for line in proc.stdout:
            frame = json.loads(line)
            seen.append((frame["t"], frame.get("id")))
            if frame["t"] == "call":
                proc.stdin.write(encode({"t": "reply", "id": frame["id"], "ok": True, "value": 1}))
                proc.stdin.flush()
            if frame["t"] == "result" and frame["id"] == 2:
                break
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()
        proc.stderr.close()
        kinds = [k for k, _ in seen]
        self.assertEqual(seen[1:3], [("started", 1), ("result", 1)], seen)
        # exec 2: `started` precedes its first call, although it comes within the delay.
        self.assertEqual(kinds[3:5], ["started", "call"], seen)

    def test_eof_exits_0(self):
        sb = Sandbox()
        sb.boot()
        sb.proc.stdin.close()
        self.assertEqual(sb.proc.wait(10), 0)
        sb.close()


class CallTest(SandboxCase):
    def test_ping_async_and_sync(self):
        result = self.sb.run("from mcp import runtime\n"
                             "print(await runtime.ping({'a': [1, 'ü']}))\n"
                             "print(runtime.ping_sync(7))\n"
                             "import mcp.runtime\nprint(mcp.runtime.ping_sync() is None)")
        self.assert_ok(result, "{'a': [1, 'ü']}\n7\nTrue\n")

    def test_ping_sync_inside_a_running_event_loop(self):
        result = self.sb.run("import asyncio\nfrom mcp import runtime\n"
                             "async def inner():\n    return runtime.ping_sync('from-loop')\n"
                             "print(await inner())")
        self.assert_ok(result, "from-loop\n")

    def test_50_concurrent_pings_answered_in_reverse_order(self):
        exec_id = self.sb.start_exec(
            "import asyncio\nfrom mcp import runtime\n"
            "async def one(i):\n    return await runtime.ping(i)\n"  # awaited at once: async
            "r = await asyncio.gather(*[one(i) for i in range(50)])\n"
            "print(r == list(range(50)))")
        calls = [self.sb.recv() for _ in range(50)]  # all 50 are in flight before any reply
        self.assertTrue(all(c["t"] == "call" and c["method"] == "ping" and c["exec"] == exec_id
                            for c in calls), calls)
        self.assertEqual(len({c["id"] for c in calls}), 50)
        for call in reversed(calls):
            self.sb.send({"t": "reply", "id": call["id"], "ok": True, "value": call["params"]})
        self.assert_ok(self.sb.wait_result(exec_id), "True\n")

    def test_error_reply_raises_bridge_call_error(self):
        def refuse(sb, call):
            sb.send({"t": "reply", "id": call["id"], "ok": False, "error": "ping refused"})

        result = self.sb.wait_result(self.sb.start_exec(
            "from mcp import runtime\nimport mcp\ntry:\n    runtime.ping_sync(1)\n"
            "except mcp.BridgeCallError as e:\n    print('caught', e)\nawait runtime.ping(2)"),
            on_call=refuse)
        self.assertFalse(result["ok"])
        self.assertEqual(result["stdout"], "caught ping refused\n")
        self.assertIn('line 7, in <module>\n    await runtime.ping(2)\n', result["error"])
        self.assertTrue(result["error"].endswith("mcp.BridgeCallError: ping refused\n"),
                        result["error"])
        self.assertNotIn("_mcp_bridge", result["error"])

    def test_mcp_modules_survive_hostile_code(self):
        self.assert_ok(self.sb.run("import sys\nfor k in [k for k in sys.modules if k == 'mcp' "
                                   "or k.startswith('mcp.')]:\n    del sys.modules[k]\n"
                                   "sys.stdout = None\nsys.modules['__main__'] = None"))
        result = self.sb.run("from mcp import runtime\nfrom mcp.runtime import ping_sync\n"
                             "import mcp.servers\nprint(ping_sync('back'))")
        self.assert_ok(result, "back\n")

    def test_pickle_sees_user_classes(self):
        self.assert_ok(self.sb.run("import pickle\nclass P:\n    v = 3\n"
                                   "print(pickle.loads(pickle.dumps(P())).v)"), "3\n")


class ReplyPathTest(SandboxCase):
    def test_replies_reach_async_sync_and_mixed_calls(self):
        # Async calls are answered while the loop reads the channel itself; `_sync` calls made
        # from a coroutine block the loop, so the reader thread answers those (without waiting
        # for the loop to look stalled: each must take well under the 100 ms total below).
        code = ("from mcp import runtime\nimport asyncio, time\n"
                "a = [await runtime.ping(i) for i in range(300)]\n"
                "b = await asyncio.gather(*[runtime.ping(i) for i in range(300)])\n"
                "t = time.monotonic()\n"
                "c = [runtime.ping_sync(i) for i in range(20)]\n"
                "slow = time.monotonic() - t\n"
                "d = await runtime.ping('after')\n"
                "print(a == b == list(range(300)), c == list(range(20)), d, slow < 0.1)")
        self.assert_ok(self.sb.run(code, timeout=30), "True True after True\n")
        self.assert_ok(self.sb.run("from mcp import runtime\nprint(runtime.ping_sync('sync'))"),
                       "sync\n")

    def test_an_exec_frame_arriving_during_an_async_exec_runs_next(self):
        first = self.sb.start_exec("import asyncio\nawait asyncio.sleep(0.3)\nx = 1")
        second = self.sb.start_exec("print(x + 1)")  # read by the first exec's event loop
        self.assert_ok(self.sb.wait_result(first, timeout=10))
        self.assert_ok(self.sb.wait_result(second, timeout=10), "2\n")


class InterruptTest(SandboxCase):
    def interrupt_after_start(self, code, expect_line):
        self.assert_ok(self.sb.run("kept = 'survived'"))
        exec_id = self.sb.start_exec(
            "from mcp import runtime\nruntime.ping_sync('started')\n" + code)
        call = self.sb.recv()
        self.assertEqual(call["params"], {"value": "started"})
        self.sb.send({"t": "reply", "id": call["id"], "ok": True, "value": call["params"]})
        time.sleep(0.2)
        t0 = time.monotonic()
        self.sb.send({"t": "interrupt", "id": exec_id})
        result = self.sb.wait_result(exec_id, on_call=lambda sb, c: None, timeout=10)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertFalse(result["ok"])
        self.assertTrue(result["interrupted"], result)
        self.assertIn("KeyboardInterrupt", result["error"])
        lines = expect_line if isinstance(expect_line, tuple) else (expect_line,)
        self.assertTrue(any('File "<run_python>", line %d' % n in result["error"] for n in lines),
                        result["error"])
        self.assertNotIn("_mcp_bridge", result["error"])
        self.assert_ok(self.sb.run("print(kept)"), "survived\n")
        self.assert_ok(self.sb.run("import asyncio\nawait asyncio.sleep(0.01)\nprint('next')"),
                       "next\n")

    def test_busy_loop(self):
        self.interrupt_after_start("while True:\n    pass", (3, 4))  # 3.9 reports the `pass`

    def test_time_sleep(self):
        self.interrupt_after_start("import time\ntime.sleep(100)", 4)

    def test_asyncio_sleep(self):
        self.interrupt_after_start("import asyncio\nawait asyncio.sleep(100)", 4)

    def test_blocked_sync_call(self):
        self.interrupt_after_start("runtime.ping_sync('never answered')", 3)

    def test_blocked_async_call(self):
        self.interrupt_after_start("await runtime.ping('never answered')", 3)

    def test_sync_code_blocking_inside_a_coroutine(self):
        # The event loop reads frames while it waits in select; blocked here, it cannot: the
        # reader thread must take over to deliver the interrupt.
        self.interrupt_after_start("import asyncio, time\nawait asyncio.sleep(0)\ntime.sleep(100)",
                                   5)

    def test_sync_call_waiting_inside_a_coroutine(self):
        self.interrupt_after_start("import asyncio\nawait asyncio.sleep(0)\n"
                                   "runtime.ping_sync('never answered')", 5)

    def test_late_interrupt_does_not_hit_the_next_exec(self):
        first = self.sb.start_exec("x = 1")
        self.assert_ok(self.sb.wait_result(first))
        self.sb.send({"t": "interrupt", "id": first})
        result = self.sb.run("import time\ntime.sleep(0.3)\nprint(x)")
        self.assert_ok(result, "1\n")
        self.assertFalse(result["interrupted"])

    def test_interrupt_of_a_queued_exec_stops_it_before_it_runs(self):
        first = self.sb.start_exec("import time\ntime.sleep(0.5)\nbefore = 1")
        queued = self.sb.start_exec("ran = True")
        self.sb.send({"t": "interrupt", "id": queued})  # arrives while `queued` waits
        self.assert_ok(self.sb.wait_result(first, timeout=10))
        result = self.sb.wait_result(queued, timeout=10)
        self.assertFalse(result["ok"])
        self.assertTrue(result["interrupted"], result)
        self.assertIn("KeyboardInterrupt", result["error"])
        self.assert_ok(self.sb.run("print(before, 'ran' in globals())"), "1 False\n")

    def test_interrupt_before_the_exec_frame_arrives(self):
        self.sb.send({"t": "interrupt", "id": 77})
        self.sb.send({"t": "exec", "id": 77, "code": "ran = True"})
        self.assertTrue(self.sb.wait_result(77, timeout=10)["interrupted"])
        self.sb._next_id = 77  # ids keep growing, as the host's do
        self.assert_ok(self.sb.run("print('ran' in globals())"), "False\n")

    def test_interrupt_storm_always_yields_one_result_per_exec(self):
        for i in range(40):
            exec_id = self.sb.start_exec("total = sum(range(%d))" % (i * 5000))
            for _ in range(i % 4):
                self.sb.send({"t": "interrupt", "id": exec_id})
            time.sleep(0.002 * (i % 3))
            self.sb.send({"t": "interrupt", "id": exec_id})
            result = self.sb.wait_result(exec_id, timeout=10)
            self.assertTrue(result["ok"] or result["interrupted"], result)
        busy = self.sb.start_exec("while True:\n    pass")
        time.sleep(0.1)
        for _ in range(20):
            self.sb.send({"t": "interrupt", "id": busy})
        self.assertTrue(self.sb.wait_result(busy, timeout=10)["interrupted"])
        self.assert_ok(self.sb.run("print('alive')"), "alive\n")

    def test_shutdown_during_an_exec_exits_0(self):
        self.sb.start_exec("while True:\n    pass")
        time.sleep(0.2)
        # tearDown sends shutdown and expects exit code 0


if __name__ == "__main__":
    unittest.main()
