"""Downstream servers that misbehave (GUIDE.md, "Timeouts, crashes and restarts"): a server that cannot
start, one that hangs at start, one that crashes or is killed (restarted on the next run), and a
tool that hangs past the run's deadline; the bridge keeps serving through each.

Values come back from the sandbox as one JSON line printed by the code (`_json`), so assertions
compare exact Python values, not rendered text. The stub bridge (`sb`, `stub_env`) is in
shared_bridges.py.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from helpers_host import pid_alive as _pid_alive
from helpers_proxy import assert_alive as _assert_alive
from helpers_proxy import json_of as _json
from helpers_proxy import ok_output as _ok
from helpers_proxy import start_lines as _start_lines
from helpers_proxy import start_pids as _start_pids
from helpers_proxy import stdout_of as _stdout

import servers as S

pytestmark = pytest.mark.host_only  # downstream servers misbehaving: host-side

# --- servers that do not start ----------------------------------------------------------------


def test_server_that_cannot_start_fails_the_run_naming_it(sb):
    r = sb.run("print('must not run')", servers=["stub", "nocmd"])
    assert r.is_error and r.status == "error", str(r)
    assert "must not run" not in r.text
    assert "'nocmd'" in r.text and "no-such-mcp-server" in r.text, str(r)
    _assert_alive(sb)


def _hang_entry(pid_file: Path) -> dict:
    """A server that never answers initialize; each start appends its pid to `pid_file`."""
    return {"command": "sh", "args": ["-c", f'echo $$ >> "{pid_file}"; exec sleep 45']}


def test_server_hanging_at_start_fails_within_the_run_timeout(tmp_path, bridge_factory, helpers, stub_ready):
    pids = tmp_path / "hang-pids.txt"
    S.write_config(tmp_path / "mcps", {"hang": _hang_entry(pids), "stub": S.stub("stub")})
    b = bridge_factory(name="hang-at-start", env={"MCP_BRIDGE_CONFIG_DIR": str(tmp_path / "mcps")})
    try:
        # The background index starts it once and waits up to its own start timeout.
        assert helpers.poll(lambda: pids.is_file() and len(pids.read_text().split()) == 1, timeout=15)
        _ok(b, "pass")  # warm sandbox: its cold start is not counted in the run's timeout
        r = b.run("print('must not run')", servers=["hang"], timeout=3)
        assert r.is_error and r.status in {"error", "timeout"}, str(r)
        assert r.elapsed < 30, f"a 3 s run took {r.elapsed:.1f} s"
        assert "'hang'" in r.text and "must not run" not in r.text, str(r)
        started = [int(p) for p in pids.read_text().split()]
        assert len(started) == 2, started
        # The process started for this run is not left behind after its start timed out.
        assert helpers.poll(lambda: not _pid_alive(started[1]), timeout=5), "timed-out server process still running"
        _assert_alive(b)
    finally:
        b.close()


def test_start_timeout_message_says_how_long_it_waited(tmp_path, bridge_factory, stub_ready):
    S.write_config(tmp_path / "mcps", {"hang": _hang_entry(tmp_path / "pids.txt")})
    b = bridge_factory(name="hang-message", env={"MCP_BRIDGE_CONFIG_DIR": str(tmp_path / "mcps")})
    try:
        r = b.run("pass", servers=["hang"], timeout=3)
    finally:
        b.close()
    assert r.is_error and "'hang'" in r.text, str(r)
    assert "within 0.0 s" not in r.text, str(r)


# --- faults --------------------------------------------------------------------------------------


def test_crash_names_server_and_stderr_then_next_run_restarts(sb, stub_env, helpers):
    starts = stub_env["crashy_starts"]
    # The bridge indexes never-seen servers at startup on a temporary connection: wait until that
    # one start happened and its process is gone, so the counts below are exact.
    settled = helpers.poll(
        lambda: len(_start_pids(starts)) == 1 and not _pid_alive(_start_pids(starts)[0]), timeout=30
    )
    assert settled, f"indexing did not settle: {_start_lines(starts)}"
    who = "import json\nprint(json.dumps(await mcp_crashy.whoami()))"

    first = _json(sb, who, servers=["crashy"])
    assert first["starts"] == 2, first  # index + this load
    assert first["pid"] == _start_pids(starts)[-1]

    got = _json(
        sb,
        """
import json
from mcp import runtime
try:
    await mcp_crashy.crash()
    print(json.dumps({"raised": None}))
except runtime.BridgeCallError as e:
    print(json.dumps({"raised": type(e).__name__, "msg": str(e), "kind": e.kind, "server": e.server}))
""",
        servers=["crashy"],
    )
    assert got["raised"] == "ServerError" and got["kind"] == "server", got
    assert "crashy" in got["msg"], got
    assert "crashing on purpose" in got["msg"], got  # the server's stderr tail
    assert helpers.poll(lambda: not _pid_alive(first["pid"]), timeout=5), "crashed server still alive"

    second = _json(sb, who, servers=["crashy"])
    assert second["starts"] == 3, second  # restarted exactly once
    assert second["pid"] != first["pid"]
    assert second["name"] == "crashy"

    # Killed from outside between runs: the next run restarts it too.
    os.kill(second["pid"], signal.SIGKILL)
    assert helpers.poll(lambda: not _pid_alive(second["pid"]), timeout=5)
    time.sleep(0.5)
    third = _json(sb, who, servers=["crashy"])
    assert third["starts"] == 4 and third["pid"] not in (first["pid"], second["pid"]), third
    _assert_alive(sb)


def test_hung_tool_hits_the_run_deadline_and_the_bridge_stays_alive(sb, helpers):
    r = sb.run("print('before')\nawait mcp_stub.slow(seconds=100)\nprint('not reached')", servers=["stub"], timeout=3)
    assert r.is_error and r.status in {"timeout", "error"}, str(r)
    assert r.elapsed < 30, f"a 3 s run took {r.elapsed:.1f} s"
    assert _stdout(r) == "before\n", str(r)
    # The abandoned downstream request was cancelled (the stub logs it), not left running.
    assert helpers.poll(lambda: "stub-mcp[stub]: slow: cancelled" in sb.stderr_path.read_text(), timeout=5), sb.stderr_tail()
    _assert_alive(sb)
    # The server itself is still usable (and did not need a restart to be).
    assert _json(sb, "import json\nprint(json.dumps(await mcp_stub.add(a=1, b=1)))", servers=["stub"]) == {"sum": 2}
