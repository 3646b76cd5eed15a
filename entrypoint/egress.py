"""The sandbox's way out (ARCHITECTURE.md, "The sandbox's way out"), when the boot frame offers
an egress socket (`MCP_BRIDGE_NETWORK_ALLOW`). Before confinement the entrypoint connects to
the bridge's socket (`connect`); after it, `start` binds a TCP port on the sandbox's own
loopback and runs a relay thread that carries every connection made to it over that one unix
connection, in frames (`kind: u8, stream: u32, len: u32`, then the bytes), and points
HTTP_PROXY/HTTPS_PROXY at it. All checking is the bridge's: sandbox code may talk to the port,
or even to the unix connection's fd, and reaches nothing the bridge's proxy refuses."""
import os
import select
import socket
import struct
import sys
import threading

from . import channel

OPEN, DATA, EOF, CLOSE = 1, 2, 3, 4
HEAD = struct.Struct(">BII")
MAX_PAYLOAD = 32 * 1024  # the bridge refuses larger frames (src/egress/mux.rs)
MAX_STREAMS = 64  # the bridge's bound on live streams
MAX_HELD = 4 << 20  # bytes held for one connection whose reader is slow; then it is cut
MAX_UP = 1 << 20  # bytes waiting for the bridge; past it connections are not read
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")

state = {"proxy": None, "why": None}


def connect(offer):
    """(fd, None) for the connected egress socket, or (None, reason). Before confinement."""
    return channel.connect_with(offer, "egress", lambda token: token.encode("ascii") + b"\n")


def start(fd):
    """Binds 127.0.0.1:<free port>, starts the relay on `fd`, sets the proxy variables;
    returns the proxy URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(MAX_STREAMS)
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
    relay = Relay(listener, up)
    threading.Thread(target=relay.run, name="mcp-egress-relay", daemon=True).start()
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]
    for name in PROXY_VARS:
        os.environ[name] = url
    for name in ("NO_PROXY", "no_proxy"):
        os.environ.pop(name, None)
    state["proxy"] = url
    packages = os.environ.get("MCP_BRIDGE_PACKAGES")
    if packages and packages not in sys.path:
        sys.path.append(packages)  # python3 -I ignores PYTHONPATH; pip installs here
    return url


class _Conn:
    __slots__ = ("sock", "held", "eof_in", "closed_in", "read_done")

    def __init__(self, sock):
        self.sock = sock
        self.held = bytearray()  # from the bridge, not yet written to the client
        self.eof_in = False  # the bridge will send no more
        self.closed_in = False  # the bridge is done with the stream
        self.read_done = False  # the client will send no more


class Relay:
    """One thread: accepts on the loopback port, moves bytes between each connection and the
    bridge. Never blocks on a write: what cannot be written yet is held (bounded)."""

    def __init__(self, listener, up):
        self.listener, self.up = listener, up
        listener.setblocking(False)
        up.setblocking(False)
        self.conns = {}
        self.next_id = 1
        self.up_out = bytearray()
        self.up_in = bytearray()

    def frame(self, kind, sid, payload=b""):
        self.up_out += HEAD.pack(kind, sid, len(payload)) + payload

    def run(self):
        try:
            while self.step():
                pass
        finally:
            for conn in self.conns.values():
                conn.sock.close()
            self.listener.close()
            self.up.close()

    def step(self):
        readers = [self.up]
        if len(self.conns) < MAX_STREAMS:
            readers.append(self.listener)
        writers = [self.up] if self.up_out else []
        for conn in self.conns.values():
            if not conn.read_done and len(self.up_out) < MAX_UP:
                readers.append(conn.sock)
            if conn.held:
                writers.append(conn.sock)
        readable, writable, _ = select.select(readers, writers, [])
        by_sock = {c.sock: sid for sid, c in self.conns.items()}
        for sock in writable:
            if sock is self.up:
                try:
                    n = self.up.send(self.up_out)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return False
                del self.up_out[:n]
            elif sock in by_sock:
                self.write_client(by_sock[sock])
        for sock in readable:
            if sock is self.up:
                if not self.read_up():
                    return False
            elif sock is self.listener:
                self.accept()
            elif sock in by_sock and by_sock[sock] in self.conns:
                self.read_client(by_sock[sock])
        return True

    def accept(self):
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        sid = self.next_id
        self.next_id = (self.next_id % 0xFFFFFFFF) + 1
        self.conns[sid] = _Conn(sock)
        self.frame(OPEN, sid)

    def read_client(self, sid):
        conn = self.conns[sid]
        try:
            data = conn.sock.recv(MAX_PAYLOAD)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(sid)
            return
        if data:
            self.frame(DATA, sid, data)
        else:
            conn.read_done = True
            self.frame(EOF, sid)

    def write_client(self, sid):
        conn = self.conns[sid]
        try:
            n = conn.sock.send(conn.held)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(sid)
            return
        del conn.held[:n]
        self.settle(sid)

    def settle(self, sid):
        """After the bridge's EOF/CLOSE, once everything held is written: half close or close."""
        conn = self.conns.get(sid)
        if conn is None or conn.held:
            return
        if conn.closed_in:
            conn.sock.close()
            del self.conns[sid]
        elif conn.eof_in:
            try:
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def drop(self, sid):
        conn = self.conns.pop(sid, None)
        if conn is not None:
            conn.sock.close()
            self.frame(CLOSE, sid)

    def read_up(self):
        try:
            data = self.up.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not data:
            return False  # the bridge is gone: so is the way out
        self.up_in += data
        while len(self.up_in) >= HEAD.size:
            kind, sid, length = HEAD.unpack_from(self.up_in)
            if len(self.up_in) < HEAD.size + length:
                break
            payload = bytes(self.up_in[HEAD.size:HEAD.size + length])
            del self.up_in[:HEAD.size + length]
            conn = self.conns.get(sid)
            if conn is None:
                continue
            if kind == DATA:
                conn.held += payload
                if len(conn.held) > MAX_HELD:
                    self.drop(sid)
                    continue
                self.write_client(sid)
            elif kind == EOF:
                conn.eof_in = True
                self.settle(sid)
            elif kind == CLOSE:
                conn.closed_in = True
                conn.eof_in = True
                self.settle(sid)
        return True
