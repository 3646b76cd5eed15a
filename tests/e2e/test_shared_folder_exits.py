"""A shared folder exposes files, never a way out (issue 22, point 5): MCP_BRIDGE_MOUNTS refuses
host system folders (also through a symlink) and a folder holding a socket or FIFO at startup,
and a unix socket, FIFO or device node that appears in a shared folder AFTER the bridge started
cannot be reached from sandbox code (the sandbox's seccomp and Landlock rules,
entrypoint/confine.py; the engine's device cgroup),
while the same access from the host works, so each test can fail."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import threading

import pytest


def _cli(helpers, tmp_path, mounts: str) -> list[subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    for keep in ("MCP_BRIDGE_RUNTIME", "MCP_BRIDGE_IMAGE"):
        if os.environ.get(keep):
            env[keep] = os.environ[keep]
    env.update({"MCP_BRIDGE_MOUNTS": mounts, "MCP_BRIDGE_STATE_DIR": str(tmp_path / "state")})
    return [subprocess.run([helpers.BRIDGE_BIN, *cmd], env=env, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
            for cmd in (["run"], ["exec", "print(1)"])]


def _folder(tmp_path, name):
    tmp_path.chmod(0o755)
    d = tmp_path / name
    d.mkdir()
    d.chmod(0o755)
    (d / "data.csv").write_text("x\n1\n")
    (d / "data.csv").chmod(0o644)
    return d


# Engine markers per test (engine_markers.py): `engine` where the outcome depends on the container
# engine (why, beside it; the docker pass runs these too), `host_only` where the subject is on the host.
@pytest.mark.host_only  # checked on the host at startup
@pytest.mark.parametrize("host, named", [
    ("/proc", "/proc"),
    ("/proc/1", "/proc"),
    ("/sys", "/sys"),
    ("/dev", "/dev"),
    ("/etc", "/etc"),
    ("{link}", "/proc"),
])
def test_a_host_system_folder_is_refused(helpers, tmp_path, host, named):
    link = tmp_path / "innocent-looking"
    link.symlink_to("/proc/self")
    for p in _cli(helpers, tmp_path, f"{host.format(link=link)}:/data"):
        assert p.returncode == 2, (host, p.stdout, p.stderr)
        assert "MCP_BRIDGE_MOUNTS" in p.stderr and named in p.stderr, p.stderr
        assert "host system folder" in p.stderr, p.stderr


@pytest.mark.host_only  # checked on the host at startup
def test_a_socket_or_fifo_present_at_start_is_refused(helpers, tmp_path):
    data = _folder(tmp_path, "with-socket")
    (data / "deep").mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(data / "deep" / "service.sock"))
    try:
        for p in _cli(helpers, tmp_path, f"{data}:/data"):
            assert p.returncode == 2, (p.stdout, p.stderr)
            assert "MCP_BRIDGE_MOUNTS" in p.stderr and "service.sock" in p.stderr, p.stderr
    finally:
        server.close()
    (data / "deep" / "service.sock").unlink()
    os.mkfifo(data / "pipe", 0o666)
    for p in _cli(helpers, tmp_path, f"{data}:/data"):
        assert p.returncode == 2, (p.stdout, p.stderr)
        assert "MCP_BRIDGE_MOUNTS" in p.stderr and "pipe" in p.stderr and "FIFO" in p.stderr


class _Listener:
    """A host service on a unix socket in the shared folder: records every connection and
    datagram it gets."""

    def __init__(self, stream_path, dgram_path):
        self.got: list[bytes] = []
        self.arrived = threading.Event()
        self.stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stream.bind(str(stream_path))
        self.stream.listen(8)
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(str(dgram_path))
        for p in (stream_path, dgram_path):
            os.chmod(p, 0o666)  # connectable by anyone: the sandbox user too
        for target in (self._accept, self._datagrams):
            threading.Thread(target=target, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.stream.accept()
            except OSError:
                return
            with conn:
                self.got.append(b"stream:" + conn.recv(64))
            self.arrived.set()

    def _datagrams(self):
        while True:
            try:
                self.got.append(b"dgram:" + self.dgram.recv(64))
            except OSError:
                return
            self.arrived.set()

    def close(self):
        for s in (self.stream, self.dgram):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


REACH = r"""
import errno, json, os, socket
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "reached"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e))
def stream():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/data/service.sock")
    s.sendall(b"from the sandbox")
def dgram():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"from the sandbox", "/data/dgram.sock")
def pair_dgram():  # a datagram pair could be aimed at a path with sendto
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"from the sandbox", "/data/dgram.sock")
def fifo():
    fd = os.open("/data/pipe", os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, b"from the sandbox")
attempt("stream", stream)
attempt("dgram", dgram)
attempt("pair_dgram", pair_dgram)
attempt("fifo", fifo)
attempt("device", lambda: os.close(os.open("/data/kmsg", os.O_RDONLY)))
a, b = socket.socketpair()  # asyncio's self-pipe still works
a.sendall(b"x"); out["pair_stream"] = b.recv(1).decode()
print(json.dumps(out))
"""


@pytest.fixture
def later_bridge(bridge_factory, tmp_path):
    data = _folder(tmp_path, "shared")
    b = bridge_factory(name="shared-exits", env={"MCP_BRIDGE_MOUNTS": f"{data}:/data"})
    yield b, data
    b.close()


@pytest.mark.engine  # the container's seccomp, Landlock and device rules
def test_a_socket_or_fifo_created_later_is_not_a_way_out(later_bridge):
    bridge, data = later_bridge
    first = bridge.run("print(sorted(__import__('os').listdir('/data')))")
    assert not first.is_error, str(first)
    assert first.structured["stdout"] == "['data.csv']\n", str(first)
    # the sandbox runs; now a host service appears in the shared folder
    listener = _Listener(data / "service.sock", data / "dgram.sock")
    os.mkfifo(data / "pipe", 0o666)
    os.chmod(data / "pipe", 0o666)
    reader = os.open(data / "pipe", os.O_RDONLY | os.O_NONBLOCK)  # a host process reading it
    os.mknod(data / "kmsg", 0o666 | stat.S_IFCHR, os.makedev(1, 11))  # the host's kernel log
    os.chmod(data / "kmsg", 0o666)
    try:
        r = bridge.run(REACH)
        assert not r.is_error, str(r)
        out = json.loads(r.structured["stdout"])
        for way in ("stream", "dgram", "pair_dgram", "fifo", "device"):
            assert out[way] in ("EPERM", "EACCES"), (way, out)
        assert out["pair_stream"] == "x", out
        assert _nothing_waiting(reader), "the sandbox wrote into the host's FIFO"
        assert listener.got == [], listener.got
        # the same ways work from the host, so the assertions above can fail
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(data / "service.sock"))
            s.sendall(b"from the host")
        fd = os.open(data / "pipe", os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"from the host")
        os.close(fd)
        assert os.read(reader, 64) == b"from the host"
        os.close(os.open(data / "kmsg", os.O_RDONLY))  # the host (root) opens it
        assert listener.arrived.wait(60), "the host's own connection never arrived"
        assert listener.got == [b"stream:from the host"], listener.got
    finally:
        os.close(reader)
        listener.close()


def _nothing_waiting(fd) -> bool:
    try:
        return os.read(fd, 64) == b""
    except BlockingIOError:
        return True


@pytest.mark.engine  # read inside the container
def test_the_posture_reports_both_rules(later_bridge):
    bridge, _ = later_bridge
    r = bridge.run("from _mcp_bridge import selfcheck; import json\n"
                   "p = selfcheck.posture()\n"
                   "print(json.dumps([p['unix_sockets_blocked'], p['shared_writes_blocked']]))")
    assert not r.is_error, str(r)
    assert json.loads(r.structured["stdout"]) == [True, True], str(r)
