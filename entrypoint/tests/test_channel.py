"""The socket frame channel: offered in the boot frame, frames move to the socket; any failure
keeps them on stdio with the reason in `ready`."""
import json
import os
import socket
import tempfile
import unittest

from entrypoint.tests import Sandbox, encode


class ChannelTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "frames.sock")
        self.sb = Sandbox()

    def tearDown(self):
        self.sb.close()
        self.dir.cleanup()

    def listen(self):
        """The host's side of the channel: a listening socket at self.path."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(1)
        listener.settimeout(20)
        return listener

    def test_frames_move_to_the_socket(self):
        listener = self.listen()
        self.sb.boot(channel={"path": self.path, "token": "s3cret"})
        conn, _ = listener.accept()
        conn.settimeout(20)
        lines = conn.makefile("rb")
        self.assertEqual(json.loads(lines.readline()), {"t": "hello", "token": "s3cret"})
        ready = json.loads(lines.readline())
        self.assertEqual((ready["t"], ready["channel"]), ("ready", "socket"))
        conn.sendall(encode({"t": "exec", "id": 1, "code": "from mcp import runtime\n"
                             "print(runtime.ping_sync({'x': 1}))", "servers": []}))
        kinds = []
        while True:
            frame = json.loads(lines.readline())
            kinds.append(frame["t"])
            if frame["t"] == "call":  # the host answers over the socket too
                conn.sendall(encode({"t": "reply", "id": frame["id"], "ok": True,
                                     "value": frame["params"]}))
            elif frame["t"] == "result":
                break
        self.assertTrue(frame["ok"], frame)
        self.assertEqual(frame["stdout"], "{'x': 1}\n")
        self.assertEqual(kinds[0], "started", "on the socket `started` goes out before the code runs")
        self.assertTrue(self.sb.frames.empty(), "nothing went to stdout")
        conn.sendall(encode({"t": "shutdown"}))
        self.assertEqual(self.sb.proc.wait(20), 0, self.sb.stderr)
        conn.close()
        listener.close()

    def test_host_closing_the_socket_ends_the_sandbox(self):
        listener = self.listen()
        self.sb.boot(channel={"path": self.path, "token": "t"})
        conn, _ = listener.accept()
        conn.settimeout(20)
        conn.makefile("rb").readline()
        conn.close()
        self.assertEqual(self.sb.proc.wait(20), 0, self.sb.stderr)
        listener.close()

    def test_an_unreachable_channel_keeps_frames_on_stdio(self):
        self.sb.boot(channel={"path": self.path, "token": "t"})  # nobody listens there
        ready = self.sb.recv()
        self.assertEqual((ready["t"], ready["channel"]), ("ready", "stdio"))
        self.assertIn(self.path, ready["channel_error"])
        result = self.sb.run("print(6 * 7)")
        self.assertEqual(result["stdout"], "42\n")

    def test_a_malformed_offer_keeps_frames_on_stdio(self):
        self.sb.boot(channel={"path": 7})
        ready = self.sb.recv()
        self.assertEqual((ready["channel"], ready["channel_error"]),
                         ("stdio", "malformed channel offer"))


if __name__ == "__main__":
    unittest.main()
