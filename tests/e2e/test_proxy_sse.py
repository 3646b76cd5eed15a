"""Legacy HTTP+SSE servers (GUIDE.md, "Your MCP servers"): a real FastMCP server of the official
Python SDK over `transport="sse"` (tests/e2e/fastmcp_sse.py), reached with `"type": "sse"` and by
falling back from `"type": "http"`, through `run_python` and `exec`; and hostile event streams
(another origin, no endpoint event, an endless line, a huge event) that must end in a clear error
with the bridge still serving.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers_cli import cli_env_for
from helpers_proxy import json_of, ok_output

pytestmark = pytest.mark.host_only  # proxying to a remote server: host-side

STUB = Path(__file__).with_name("fastmcp_sse.py")


@contextlib.contextmanager
def fastmcp(mode: str = "sse", header_log: Path | None = None):
    """The FastMCP stub serving `mode` (sse or http) on a free port, noting each request's
    X-E2E-Token in `header_log`; yields its base URL and process."""
    env = dict(os.environ, SSE_STUB_HEADER_LOG=str(header_log)) if header_log else None
    proc = subprocess.Popen([sys.executable, str(STUB), mode], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("PORT "), f"the stub did not start: {line!r}"
        port = int(line.split()[1])
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the stub does not listen"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.kill()
        proc.wait(10)


class Hostile:
    """A raw HTTP server whose GET answers with an event stream of `body` (then stays open);
    counts the requests it got."""

    def __init__(self, body: bytes, then_close: bool = False):
        self.body = body
        self.then_close = then_close
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/sse"
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(c)
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                got = c.recv(4096)
                if not got:
                    return
                head += got
            self.requests.append(head)
            c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            for i in range(0, len(self.body), 1 << 16):
                c.sendall(self.body[i:i + (1 << 16)])
            if self.then_close:
                c.close()
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.close()


@pytest.fixture(scope="module")
def header_log(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sse-headers") / "requests.log"


@pytest.fixture(scope="module")
def sse_server(header_log):
    with fastmcp("sse", header_log) as (url, _):
        yield url


@pytest.fixture(scope="module")
def sse_bridge(bridge_factory, sse_server):
    b = bridge_factory(name="sse", config={"mcpServers": {
        "old": {"type": "sse", "url": f"{sse_server}/sse", "headers": {"X-E2E-Token": "tok-1"}},
        "fallback": {"type": "http", "url": f"{sse_server}/sse"},
        "nourl": {"url": f"{sse_server}/sse"},
    }}, env={"MCP_BRIDGE_MAX_SERVER_MESSAGE": "2m"})
    yield b
    b.close()


def test_tools_are_listed_called_and_errors_come_back(sse_bridge):
    got = json_of(sse_bridge, """
import json
from mcp import runtime
tools = sorted(t["name"] for t in runtime.list_tools("old"))
try:
    await mcp_old.fail(why="on purpose")
    failed = None
except Exception as e:
    failed = [type(e).__name__, str(e)]
print(json.dumps({"tools": tools, "sum": await mcp_old.add(a=2, b=40), "failed": failed,
                  "big": len(await mcp_old.big(n=800000))}))
""", servers=["old"], timeout=60)
    assert got["tools"] == ["add", "big", "die", "fail", "slow"]
    assert got["sum"] == 42
    assert got["failed"][0] == "ToolError" and "old.fail" in got["failed"][1], got
    assert got["big"] == 800000


def test_the_entry_headers_go_with_the_get_and_every_post(sse_bridge, header_log):
    assert ok_output(sse_bridge, "print(await mcp_old.add(a=1, b=1))", servers=["old"], timeout=60).strip() == "2"
    seen = [line.split() for line in header_log.read_text().splitlines()]
    mine = [s for s in seen if s[2] == "tok-1"]
    assert ["GET", "/sse", "tok-1"] in mine, seen
    assert any(s[0] == "POST" and s[1] == "/messages/" for s in mine), seen
    # Every request to the stream or the endpoint carried it, but the other entries' (no headers).
    assert all(s[2] in ("tok-1", "-") for s in seen), seen
    assert len([s for s in mine if s[0] == "POST"]) >= 3  # initialize, initialized, tools/list, the call


def test_an_http_entry_falls_back_to_sse_and_says_so_once(sse_bridge):
    got = json_of(sse_bridge, """
import json, asyncio
print(json.dumps(await asyncio.gather(*[mcp_fallback.add(a=i, b=1) for i in range(20)]) + [await mcp_nourl.add(a=1, b=1)]))
""", servers=["fallback", "nourl"], timeout=60)
    assert got == [i + 1 for i in range(20)] + [2]
    log = sse_bridge.stderr_path.read_text()
    fell_back = [line for line in log.splitlines() if "refused streamable HTTP's initialize" in line]
    assert len([line for line in fell_back if "server=fallback" in line]) == 1, log[-3000:]
    assert len([line for line in fell_back if "server=nourl" in line]) == 1, log[-3000:]


def test_a_run_that_times_out_cancels_its_call_on_the_server(sse_bridge, tmp_path):
    mark = tmp_path / "cancelled"
    r = sse_bridge.run(f"await mcp_old.slow(mark={str(mark)!r})", servers=["old"], timeout=3)
    assert r.is_error and "time" in r.text.lower(), str(r)
    deadline = time.monotonic() + 10
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mark.read_text() == "cancelled", "the server never got notifications/cancelled"
    assert ok_output(sse_bridge, "print(await mcp_old.add(a=1, b=1))", servers=["old"], timeout=60).strip() == "2"


def test_an_event_over_the_message_bound_ends_the_connection_and_the_server_comes_back(sse_bridge):
    r = sse_bridge.run("await mcp_old.big(n=3000000)", servers=["old"], timeout=60)
    assert r.is_error, str(r)
    assert "MCP_BRIDGE_MAX_SERVER_MESSAGE (2 MiB)" in r.text, r.text
    assert ok_output(sse_bridge, "print(await mcp_old.add(a=1, b=2))", servers=["old"], timeout=60).strip() == "3"


def test_the_server_dying_mid_call_is_a_clear_error_and_the_bridge_keeps_serving(bridge_factory):
    with fastmcp("sse") as (url, proc):
        b = bridge_factory(name="sse-die", config={"mcpServers": {"dying": {"type": "sse", "url": f"{url}/sse"}}})
        try:
            r = b.run("await mcp_dying.die()", servers=["dying"], timeout=30)
            assert r.is_error, str(r)
            assert "event stream" in r.text and "dying" in r.text, r.text
            assert proc.wait(10) == 3
            assert ok_output(b, "print(1 + 1)").strip() == "2"
        finally:
            b.close()


@pytest.mark.parametrize("case", ["other-origin", "no-endpoint", "endless", "huge-first"])
def test_hostile_event_streams_are_refused_with_a_reason(bridge_factory, case):
    body = {
        "other-origin": b"event: endpoint\ndata: http://evil.invalid:1/messages\n\n",
        "no-endpoint": b": nothing to see\n\n",
        "endless": b"data: " + b"x" * (3 << 20),  # no newline, ever
        "huge-first": b"event: endpoint\ndata: /m?" + b"a" * (2 << 20) + b"\n\n",
    }[case]
    h = Hostile(body)
    b = bridge_factory(name=f"sse-{case}", config={"mcpServers": {"bad": {"type": "sse", "url": h.url}}},
                       env={"MCP_BRIDGE_MAX_SERVER_MESSAGE": "1m"})
    try:
        began = time.monotonic()
        r = b.run("print('never')", servers=["bad"], timeout=60)
        took = time.monotonic() - began
        assert r.is_error and "'bad'" in r.text, str(r)
        want = {
            "other-origin": "another origin (http://evil.invalid:1)",
            "no-endpoint": "no endpoint event within 10s",
            "endless": "MCP_BRIDGE_MAX_SERVER_MESSAGE (1 MiB)",
            "huge-first": "MCP_BRIDGE_MAX_SERVER_MESSAGE (1 MiB)",
        }[case]
        assert want in r.text, r.text
        assert took < 40, took
        assert all(req.startswith(b"GET ") for req in h.requests), h.requests  # nothing POSTed
        assert ok_output(b, "print('still here')").strip() == "still here"
    finally:
        b.close()
        h.close()


def test_exec_reaches_an_sse_server(tmp_path, helpers, sse_server):
    mcps = tmp_path / "mcps"
    mcps.mkdir()
    (mcps / "s.json").write_text(json.dumps({"mcpServers": {"old": {"type": "sse", "url": f"{sse_server}/sse"}}}))
    env = cli_env_for(tmp_path / "state", MCP_BRIDGE_CONFIG_DIR=str(mcps))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--servers", "old", "print(await mcp_old.add(a=20, b=22))"],
                       env=env, cwd=str(cwd), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "42"
    assert "connected over the legacy HTTP+SSE transport" in p.stderr
