"""The sandbox's relay (entrypoint/egress.py): a connection to its loopback port becomes an OPEN
frame, its bytes DATA frames; the bridge's DATA reaches the client, its EOF half-closes and its
CLOSE closes; the proxy variables point at the port."""
import os
import socket
import struct
import threading
import unittest

from entrypoint import egress

HEAD = struct.Struct(">BII")


def read_frame(sock):
    head = b""
    while len(head) < HEAD.size:
        chunk = sock.recv(HEAD.size - len(head))
        if not chunk:
            return None
        head += chunk
    kind, sid, length = HEAD.unpack(head)
    payload = b""
    while len(payload) < length:
        payload += sock.recv(length - len(payload))
    return kind, sid, payload


class RelayTest(unittest.TestCase):
    def setUp(self):
        self.saved = {k: os.environ.get(k) for k in egress.PROXY_VARS + ("NO_PROXY", "no_proxy")}
        self.bridge, up = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.bridge.settimeout(10)
        self.url = egress.start(up.detach())

    def tearDown(self):
        self.bridge.close()
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_a_connection_is_carried_both_ways_and_closed_by_the_bridge(self):
        for name in egress.PROXY_VARS:
            self.assertEqual(os.environ[name], self.url)
        port = int(self.url.rsplit(":", 1)[1])
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.sendall(b"GET http://x.test/ HTTP/1.1\r\n\r\n")
        kind, sid, _ = read_frame(self.bridge)
        self.assertEqual(kind, egress.OPEN)
        got = b""
        while b"\r\n\r\n" not in got:
            kind, fsid, payload = read_frame(self.bridge)
            self.assertEqual((kind, fsid), (egress.DATA, sid))
            got += payload
        self.assertTrue(got.startswith(b"GET http://x.test/"))
        reply = b"HTTP/1.1 403 Forbidden\r\n\r\n" + b"x" * 100_000
        for at in range(0, len(reply), egress.MAX_PAYLOAD):
            part = reply[at:at + egress.MAX_PAYLOAD]
            self.bridge.sendall(HEAD.pack(egress.DATA, sid, len(part)) + part)
        self.bridge.sendall(HEAD.pack(egress.EOF, sid, 0) + HEAD.pack(egress.CLOSE, sid, 0))
        body = b""
        while chunk := client.recv(65536):
            body += chunk
        self.assertEqual(body, reply)
        client.close()

    def test_the_bridge_going_away_ends_the_relay(self):
        port = int(self.url.rsplit(":", 1)[1])
        self.bridge.close()
        done = threading.Event()

        def refused():
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                except OSError:
                    done.set()
                    return
                threading.Event().wait(0.05)

        refused()
        self.assertTrue(done.is_set(), "the relay's port still accepts after the bridge left")


if __name__ == "__main__":
    unittest.main()
