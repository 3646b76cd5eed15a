"""Frame codec, line splitting, the frame writer and the pending-call table (in-process)."""
import asyncio
import contextlib
import json
import os
import threading
import unittest
from unittest import mock

from entrypoint import errors, protocol
from entrypoint.inbox import Inbox


class CodecTest(unittest.TestCase):
    def test_encode_is_one_compact_utf8_line(self):
        data = protocol.encode({"t": "result", "stdout": "a\nb\u00e9\u2028\U0001F600", "n": 1})
        self.assertTrue(data.endswith(b"\n"))
        self.assertEqual(data.count(b"\n"), 1)
        self.assertIn("é".encode(), data)  # ensure_ascii=False: raw UTF-8
        self.assertNotIn(b": ", data)
        self.assertNotIn(b", ", data)
        self.assertEqual(json.loads(data), {"t": "result", "stdout": "a\nb\u00e9\u2028\U0001F600",
                                            "n": 1})

    def test_encode_turns_lone_surrogates_into_valid_utf8(self):
        data = protocol.encode({"t": "result", "stdout": "x\udcff y \ud83d\ude00"})
        text = data.decode("utf-8")  # must not raise
        self.assertEqual(json.loads(text)["stdout"], "x\ufffd y \U0001F600")

    def test_encode_rejects_nan_and_non_json(self):
        with self.assertRaises(ValueError):
            protocol.encode({"t": "call", "params": {"x": float("nan")}})
        with self.assertRaises(TypeError):
            protocol.encode({"t": "call", "params": {"x": {1, 2}}})

    def test_encode_reports_circular_values_as_value_errors(self):
        loop = {"a": 1}
        loop["self"] = loop
        for value in (loop, [loop]):
            with self.assertRaisesRegex(ValueError, "Circular reference"):
                protocol.encode({"t": "call", "params": {"arguments": value}})
        # the encoder is reusable afterwards, also for the very object that failed
        loop.pop("self")
        self.assertEqual(json.loads(protocol.encode({"t": "x", "v": loop})), {"t": "x", "v": loop})

    def test_encode_matches_json_dumps(self):
        for value in ({"t": "x", "n": [1, -2.5, 1e300, 10**30, True, None, ""]},
                      {"t": "x", 1: "int key", 2.5: "float key", None: "null key"},
                      {"t": "x", "s": "quote\" back\\ tab\t ctl\x01 \u2028"}):
            self.assertEqual(protocol.encode(value),
                             (json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                              + "\n").encode("utf-8"))

    def test_decode_takes_surrounding_whitespace_and_refuses_extra_data(self):
        for line in (b' {"t":"reply","id":1}', b'{"t":"reply","id":1}  ', b'\t{"t":"reply","id":1}\r'):
            self.assertEqual(protocol.decode(line), {"t": "reply", "id": 1}, line)
        for bad in (b'{"t":"reply"}{"t":"reply"}', b'{"t":"reply"} x', b'{"t":"reply"'):
            with self.assertRaises(protocol.FrameError, msg=bad):
                protocol.decode(bad)

    def test_decode_round_trip(self):
        frame = {"t": "exec", "id": 7, "code": "print('ü')\n", "servers": ["github"],
                 "output_limit": 65536}
        self.assertEqual(protocol.decode(protocol.encode(frame).rstrip(b"\n")), frame)

    def test_decode_rejects_non_frames(self):
        for bad in (b"not json", b"\xff\xfe", b"[1,2]", b"{}", b'{"t":3}', b'"t"'):
            with self.assertRaises(protocol.FrameError, msg=bad):
                protocol.decode(bad)

    def test_split_lines_keeps_partial_tail(self):
        buf = bytearray()
        self.assertEqual(protocol.split_lines(buf, b""), [])
        self.assertEqual(protocol.split_lines(buf, b"\n"), [b""])
        self.assertEqual(protocol.split_lines(buf, b'{"one":1}\n'), [b'{"one":1}'])
        self.assertEqual(buf, b"")
        self.assertEqual(protocol.split_lines(buf, b'{"a":1}\n{"b"'), [b'{"a":1}'])
        self.assertEqual(protocol.split_lines(buf, b':2}\n\n{"c":3}\n'),
                         [b'{"b":2}', b"", b'{"c":3}'])
        self.assertEqual(buf, b"")

    def test_the_inbox_reads_a_pipe_after_its_leftover(self):
        # Was a test of protocol.read_lines (unused by the entrypoint, removed): the same input
        # through the reader the entrypoint uses.
        r, w = os.pipe()
        os.write(w, b'world"}\nlast')
        os.close(w)
        lines = []
        box = Inbox(r, lambda line: lines.append(line) or True, contextlib.nullcontext(),
                    b'{"t":"a"}\n{"t":"hello ')
        with mock.patch.object(protocol, "log") as log:
            while box.pump():
                pass
        log.assert_called_once()  # the unterminated "last" is reported, not returned
        os.close(r)
        self.assertEqual(lines, [b'{"t":"a"}', b'{"t":"hello world"}'])


def read_lines(fd):
    """Every line read from `fd` until EOF (the test's side of a pipe)."""
    buf, lines = bytearray(), []
    while chunk := os.read(fd, 1 << 16):
        lines.extend(protocol.split_lines(buf, chunk))
    return lines


class WriterTest(unittest.TestCase):
    def test_frames_arrive_whole_and_in_order_from_many_threads(self):
        r, w = os.pipe()
        writer = protocol.FrameWriter(w)
        big = "x" * 200000

        def produce(n):
            for i in range(20):
                writer.send({"t": "call", "id": n * 100 + i, "pad": big if i % 5 == 0 else ""})

        got = []
        reader = threading.Thread(target=lambda: got.extend(read_lines(r)))
        reader.start()
        threads = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        writer.close()
        os.close(w)
        reader.join(10)
        os.close(r)
        frames = [protocol.decode(line) for line in got]
        self.assertEqual(len(frames), 80)
        for n in range(4):
            ids = [f["id"] for f in frames if f["id"] // 100 == n]
            self.assertEqual(ids, [n * 100 + i for i in range(20)])


class CallTableTest(unittest.TestCase):
    def setUp(self):
        self.sent = []
        self.scripted = {}  # call id -> reply frame, answered from another thread once sent
        self.table = protocol.CallTable(self.on_send, lambda: 7)

    def on_send(self, frame):
        self.sent.append(frame)
        reply = self.scripted.pop(frame["id"], None)
        if reply is not None:  # answered only after the call is registered: no race
            threading.Timer(0.01, self.table.resolve, (reply,)).start()

    def reply_later(self, frame):
        self.scripted[frame["id"]] = frame

    def test_call_sync_gets_value_and_frame_shape(self):
        self.reply_later({"t": "reply", "id": 1, "ok": True, "value": {"echo": [1, 2]}})
        self.assertEqual(self.table.call_sync("ping", {"value": 3}), {"echo": [1, 2]})
        self.assertEqual(self.sent, [{"t": "call", "id": 1, "exec": 7, "method": "ping",
                                      "params": {"value": 3}}])

    def test_call_sync_error_raises_bridge_call_error(self):
        self.reply_later({"t": "reply", "id": 1, "ok": False, "error": "no such tool"})
        with self.assertRaisesRegex(protocol.BridgeCallError, "no such tool"):
            self.table.call_sync("call_tool", {})

    def test_error_kind_and_where_pick_the_exception(self):
        self.reply_later({"t": "reply", "id": 1, "ok": False, "error": "no tool x",
                          "kind": "unknown_tool"})
        with self.assertRaises(errors.UnknownToolError) as ctx:
            self.table.call_sync("call_tool", {}, ("gh", "x"))
        self.assertEqual((str(ctx.exception), ctx.exception.kind, ctx.exception.server,
                          ctx.exception.tool), ("no tool x", "unknown_tool", "gh", "x"))

        async def scenario():
            self.reply_later({"t": "reply", "id": 2, "ok": False, "error": "down",
                              "kind": "server"})
            await self.table.call("list_tools", {"server": "gh"}, ("gh", None))

        with self.assertRaises(errors.ServerError) as ctx:
            asyncio.run(scenario())
        self.assertEqual((ctx.exception.server, ctx.exception.tool), ("gh", None))

    def test_async_calls_resolve_out_of_order(self):
        async def scenario():
            tasks = [asyncio.ensure_future(self.table.call("ping", {"value": i}))
                     for i in range(10)]
            await asyncio.sleep(0)
            self.assertEqual([f["id"] for f in self.sent], list(range(1, 11)))
            for frame in reversed(self.sent):  # another thread answers, last first
                reply = {"t": "reply", "id": frame["id"], "ok": True, "value": frame["params"]}
                threading.Thread(target=self.table.resolve, args=(reply,)).start()
            return await asyncio.gather(*tasks)

        got = asyncio.run(scenario())
        self.assertEqual(got, [{"value": i} for i in range(10)])
        self.assertEqual(self.table._pending, {})

    def test_unknown_reply_ids_are_ignored(self):
        with mock.patch.object(protocol, "log") as log:
            self.table.resolve({"t": "reply", "id": 99, "ok": True, "value": 1})
            self.table.resolve({"t": "reply", "id": "x", "ok": True})
        self.assertEqual(log.call_count, 2)

    def test_close_fails_pending_and_later_calls(self):
        threading.Timer(0.05, self.table.close, ("host gone",)).start()
        with self.assertRaisesRegex(protocol.BridgeCallError, "host gone"):
            self.table.call_sync("ping")
        with self.assertRaisesRegex(protocol.BridgeCallError, "host gone"):
            self.table.call_sync("ping")

    def test_unencodable_params_raise_in_caller_and_leave_no_pending_entry(self):
        table = protocol.CallTable(lambda frame: protocol.encode(frame), lambda: 1)
        with self.assertRaises(TypeError):
            table.call_sync("ping", {"x": object()})
        self.assertEqual(table._pending, {})


if __name__ == "__main__":
    unittest.main()
