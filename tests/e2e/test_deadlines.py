"""Deadlines that hold (issue 33, point 4): a tool call still running when the run's time is
nearly up is given up a little before the run's own timeout (every call of a run shares one
deadline; none has a timeout of its own that starts when it is sent), raises in the sandbox so
the code can act on it, and is cancelled downstream: the server sees `notifications/cancelled`
(its tool's task is cancelled). On each transport: stdio (the lane, and rmcp's path), streamable
HTTP, legacy SSE; against the official Python SDK's server (tests/e2e/slow_server.py)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import servers as S

pytestmark = [pytest.mark.timeout(300), pytest.mark.engine]

SERVER = Path(__file__).with_name("slow_server.py")

CODE = """
import time
t0 = time.monotonic()
try:
    await mcp_slow.slow(seconds=60)
    print('finished?')
except Exception as e:
    print('raised', type(e).__name__, round(time.monotonic() - t0, 1))
"""


def _wait_for(path: Path, word: str, secs: float = 15) -> list[str]:
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        lines = path.read_text().split() if path.exists() else []
        if word in lines:
            return lines
        time.sleep(0.1)
    return path.read_text().split() if path.exists() else []


@pytest.fixture
def remote(tmp_path):
    """Starts slow_server.py over `transport`; yields (url, log)."""
    procs = []

    def start(transport: str):
        log, port_file = tmp_path / f"{transport}.log", tmp_path / f"{transport}.port"
        procs.append(subprocess.Popen([sys.executable, str(SERVER), str(log), transport, str(port_file)],
                                      stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert time.monotonic() < deadline, "slow_server did not start"
            time.sleep(0.1)
        port = port_file.read_text().strip()
        path = "/mcp" if transport == "http" else "/sse"
        return f"http://127.0.0.1:{port}{path}", log

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=10)


@pytest.mark.parametrize("transport", ["stdio-lane", "stdio-rmcp", "http", "sse"])
def test_a_call_past_the_deadline_raises_in_the_sandbox_and_is_cancelled_downstream(
        bridge_factory, tmp_path, remote, transport):
    env = {}
    if transport.startswith("stdio"):
        log = tmp_path / "stdio.log"
        entry = {"command": sys.executable, "args": [str(SERVER), str(log)]}
        env["MCP_BRIDGE_CALL_LANE"] = "1" if transport == "stdio-lane" else "0"
    else:
        url, log = remote(transport)
        entry = {"type": transport, "url": url}
    b = bridge_factory(name=f"deadline-{transport}", config=S.config({"slow": entry}), env=env)
    try:
        r = b.run(CODE, servers=["slow"], timeout=4, wait=60)
        out = (r.structured or {}).get("stdout", "") or r.text
        # The call raised before the run's own timeout, and the code went on.
        assert r.status == "ok", r
        assert "raised ServerError" in out and "finished?" not in out, r
        # It waited for the server until shortly before the deadline (the cell starts once the
        # server is loaded, inside the run's 4 s), not a timeout of its own from dispatch.
        seconds = float(out.split("raised ServerError")[1].split()[0])
        assert 1 <= seconds < 4, out
        # The server saw the cancellation: its tool's task was cancelled.
        lines = _wait_for(log, "cancelled")
        assert lines[:2] == ["started", "cancelled"], lines
    finally:
        b.close()


def test_a_serve_callers_own_connection_is_cancelled_too(e2e_tmp, tmp_path):
    """Under `serve`, a `"perClient": true` server is the caller's own process: its call past the
    deadline raises in the caller's sandbox and the caller's process sees the cancellation."""
    import asyncio

    from helpers_http import LEGACY, ServeBridge, connect, new_token, run

    log = tmp_path / "per-client.log"
    entry = {"command": sys.executable, "args": [str(SERVER), str(log)], "perClient": True}
    token = new_token()
    b = ServeBridge(e2e_tmp, {"alice": token}, name="deadline-serve", servers={"slow": entry},
                    env={"MCP_BRIDGE_WARM_POOL": "0"}).start()
    try:
        async def body():
            async with connect(b.url, token, LEGACY) as c:
                return await run(c, CODE, servers=["slow"], timeout=4)

        reply = asyncio.run(body())
        assert not reply.is_error and "raised ServerError" in reply.text, reply.text
        lines = _wait_for(log, "cancelled")
        assert lines[:2] == ["started", "cancelled"], lines
    finally:
        b.close()


def test_a_fan_out_past_the_in_flight_cap_waits_for_room_instead_of_failing(bridge_factory, stub_ready):
    """600 calls at once, past the 256 a session has in flight: the rest wait for room (by the
    run's deadline), none fails."""
    b = bridge_factory(name="fan-out", config=S.config({"stub": S.stub("stub")}))
    try:
        code = ("import asyncio\n"
                "rs = await asyncio.gather(*[mcp_stub.echo(text=str(i)) for i in range(600)],"
                " return_exceptions=True)\n"
                "bad = [repr(r) for r in rs if isinstance(r, BaseException)]\n"
                "print(len(rs) - len(bad), bad[:2])")
        r = b.run(code, servers=["stub"], timeout=60, wait=120)
        out = (r.structured or {}).get("stdout", "") or r.text
        assert out.strip().startswith("600 []"), r
    finally:
        b.close()
