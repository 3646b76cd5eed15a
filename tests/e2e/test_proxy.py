"""MCP proxying from sandbox code (GUIDE.md, "Sandbox API"): proxies, results, errors, concurrency,
crashes and deadlines against the Rust stub server, and the real npm/PyPI servers.

Values come back from the sandbox as one JSON line printed by the code (`_json`), so assertions
compare exact Python values, not rendered text.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import pid_alive as _pid_alive

import servers as S

STUB_TOOL_NAMES = sorted(S.STUB_TOOLS)
# run_python timeout for runs that load real servers: loading counts against it, and a Python
# server (mcp-server-time) can take ~10 s to start on a busy 2-CPU machine.
REAL_TIMEOUT = 110


# --- helpers ------------------------------------------------------------------------------------


def _stdout(result) -> str:
    return (result.structured or {}).get("stdout", "")


def _ok(bridge, code: str, servers: list[str] | None = None, timeout: int | None = None) -> str:
    """Runs code that must succeed; returns its stdout."""
    wait = max(90.0, timeout + 60.0) if timeout else 90.0  # the client waits longer than the run may take
    r = bridge.run(code, servers=servers, timeout=timeout, wait=wait)
    assert not r.is_error and r.status == "ok", f"run failed:\n{r}\n{bridge.stderr_tail()}"
    return _stdout(r)


def _json(bridge, code: str, servers: list[str] | None = None, timeout: int | None = None):
    """Runs code whose last stdout line is JSON; returns it parsed."""
    out = _ok(bridge, code, servers=servers, timeout=timeout)
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, f"no output from:\n{code}"
    return json.loads(lines[-1])


def _assert_alive(bridge, server: str = "stub") -> None:
    """The bridge process lives and still proxies a call to `server`."""
    assert bridge.pid is not None and _pid_alive(bridge.pid), f"bridge died\n{bridge.stderr_tail()}"
    got = _json(
        bridge,
        "import json\nprint(json.dumps(await mcp_servers[%r].echo(text='still here')))" % server,
        servers=[server],
    )
    assert got == {"text": "still here"}


def _start_lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _start_pids(path: Path) -> list[int]:
    return [int(line.split()[1]) for line in _start_lines(path)]


# --- fixtures -----------------------------------------------------------------------------------




@pytest.fixture(scope="module")
def stub_env(tmp_path_factory, stub_ready):
    """Config for the stub bridge: stub, my-stub (dash in the name), other, crashy (start file),
    nocmd (a command that does not exist)."""
    d = tmp_path_factory.mktemp("proxy-stubs")
    crashy_starts = d / "crashy-starts.txt"
    S.write_config(
        d / "mcps",
        {
            "stub": S.stub("stub"),
            "my-stub": S.stub("my-stub"),
            "other": S.stub("other"),
            "crashy": S.stub("crashy", start_file=crashy_starts),
            "nocmd": {"command": str(d / "no-such-mcp-server"), "args": ["--flag"]},
        },
    )
    return {"dir": d, "mcps": d / "mcps", "crashy_starts": crashy_starts}


@pytest.fixture(scope="module")
def sb(bridge_factory, stub_env):
    # upstream=debug: the servers' stderr lines land in the bridge's log (checked below).
    env = {"MCP_BRIDGE_CONFIG_DIR": str(stub_env["mcps"]), "MCP_BRIDGE_LOG_LEVEL": "info,upstream=debug"}
    b = bridge_factory(name="proxy-stubs", env=env)
    yield b
    b.close()


# --- results and access paths -------------------------------------------------------------------


def test_stub_results_through_every_access_path(sb):
    got = _json(
        sb,
        """
import json
from mcp import runtime
out = {}
out["echo"] = await mcp_stub.echo(text="hi")                    # structuredContent
out["add"] = await mcp_stub.add(a=2, b=3)                       # JSON text, parsed
out["add_float"] = await mcp_stub.add(a=0.5, b=0.25)
out["text"] = await mcp_stub.slow(seconds=0)                    # plain text stays text
out["dict_arg"] = await mcp_stub.echo({"text": "as one dict"})
out["by_name"] = await mcp_servers["stub"].echo(text="via mcp_servers")
from mcp.servers.stub import *
out["star_echo"] = await echo(text="via import *")
out["star_add"] = await add(a=40, b=2)
out["dash_whoami"] = await mcp_my_stub.whoami()
out["dash_by_name"] = await mcp_servers["my-stub"].echo(text="dash")
from mcp.servers.my_stub import echo as my_echo
out["dash_import"] = await my_echo(text="dash import")
out["call_tool"] = await runtime.call_tool("stub", "add", {"a": 1, "b": 2})
out["call_tool_sync"] = runtime.call_tool_sync("stub", "echo", {"text": "sync"})
out["loaded"] = sorted(mcp_servers)
out["types"] = [type(out[k]).__name__ for k in ("echo", "add", "text")]
print(json.dumps(out))
""",
        servers=["stub", "my-stub"],
    )
    assert got["echo"] == {"text": "hi"}
    assert got["add"] == {"sum": 5}
    assert got["add_float"] == {"sum": 0.75}
    assert got["text"] == "done"
    assert got["types"] == ["Record", "Record", "str"]  # Record: a dict with attribute access
    assert got["dict_arg"] == {"text": "as one dict"}
    assert got["by_name"] == {"text": "via mcp_servers"}
    assert got["star_echo"] == {"text": "via import *"}
    assert got["star_add"] == {"sum": 42}
    # whoami proves the call reached the server named "my-stub", not another one.
    assert got["dash_whoami"]["name"] == "my-stub"
    assert got["dash_whoami"]["starts"] is None
    assert got["dash_by_name"] == {"text": "dash"}
    assert got["dash_import"] == {"text": "dash import"}
    assert got["call_tool"] == {"sum": 3}
    assert got["call_tool_sync"] == {"text": "sync"}
    assert got["loaded"] == ["my-stub", "stub"]


def test_star_import_exports_exactly_the_tools(sb):
    got = _json(
        sb,
        """
import json, mcp.servers.stub as m
print(json.dumps({"all": sorted(m.__all__), "dir": sorted(dir(mcp_stub)),
                  "coro": __import__("inspect").iscoroutinefunction(m.echo)}))
""",
        servers=["stub"],
    )
    assert got == {"all": STUB_TOOL_NAMES, "dir": STUB_TOOL_NAMES, "coro": True}


# --- errors ------------------------------------------------------------------------------------


def test_tool_error_raises_tool_error_with_the_servers_message(sb):
    got = _json(
        sb,
        """
import json
from mcp import runtime
try:
    await mcp_stub.fail(message="nope")
    out = {"raised": None}
except runtime.ToolError as e:
    out = {"raised": type(e).__name__, "msg": str(e), "kind": e.kind, "server": e.server,
           "tool": e.tool, "is_bridge_error": isinstance(e, runtime.BridgeCallError)}
print(json.dumps(out))
""",
        servers=["stub"],
    )
    assert got["raised"] == "ToolError", got
    assert "nope" in got["msg"], got
    assert (got["kind"], got["server"], got["tool"], got["is_bridge_error"]) == ("tool", "stub", "fail", True)
    # An uncaught tool error fails the run with the server's message in the traceback.
    r = sb.run("await mcp_stub.fail(message='uncaught nope')", servers=["stub"])
    assert r.is_error and r.status == "error", str(r)
    assert "ToolError" in r.structured["error"] and "uncaught nope" in r.structured["error"], str(r)
    _assert_alive(sb)


def test_unknown_tool_names_the_tools(sb):
    got = _json(
        sb,
        """
import json
from mcp import runtime
out = {}
try:
    mcp_stub.no_such_tool
except AttributeError as e:
    out["attr"] = str(e)
try:
    await runtime.call_tool("stub", "no_such_tool", {})
except runtime.UnknownToolError as e:
    out["call_tool"] = [type(e).__name__, str(e), e.kind]
print(json.dumps(out))
""",
        servers=["stub"],
    )
    assert "no_such_tool" in got["attr"], got
    for tool in STUB_TOOL_NAMES:
        assert tool in got["attr"], got
    name, msg, kind = got["call_tool"]
    assert (name, kind) == ("UnknownToolError", "unknown_tool")
    assert "no_such_tool" in msg and all(t in msg for t in STUB_TOOL_NAMES), msg
    _assert_alive(sb)


def test_server_not_loaded_in_this_call_is_refused(sb):
    # Load "other" once, so its proxy stays in the namespace; the next run does not load it.
    assert _json(sb, "import json\nprint(json.dumps(await mcp_other.echo(text='x')))", servers=["other"]) == {"text": "x"}
    got = _json(
        sb,
        """
import json
from mcp import runtime
out = {}
try:
    await runtime.call_tool("other", "echo", {"text": "x"})
except runtime.ServerNotLoadedError as e:
    out["call_tool"] = [type(e).__name__, str(e), e.kind, e.server]
try:
    await mcp_other.echo(text="stale proxy")
except runtime.ServerNotLoadedError as e:
    out["stale_proxy"] = [type(e).__name__, str(e)]
try:
    mcp_servers["other"]
except KeyError as e:
    out["mcp_servers"] = str(e)
print(json.dumps(out))
""",
        servers=["stub"],
    )
    name, msg, kind, server = got["call_tool"]
    assert (name, kind, server) == ("ServerNotLoadedError", "not_loaded", "other")
    assert "'other'" in msg and "stub" in msg, msg  # names the server and what is loaded
    assert got["stale_proxy"][0] == "ServerNotLoadedError" and "'other'" in got["stale_proxy"][1], got
    assert "other" in got["mcp_servers"], got
    _assert_alive(sb)


def test_unknown_server_fails_the_run_and_lists_the_configured_ones(sb):
    r = sb.run("print('must not run')", servers=["stub", "nosuch"])
    assert r.is_error and r.status == "error", str(r)
    assert "must not run" not in r.text
    assert "nosuch" in r.text, str(r)
    for name in ("crashy", "my-stub", "nocmd", "other", "stub"):
        assert name in r.text, f"{name} not listed:\n{r}"
    got = _json(
        sb,
        """
import json
from mcp import runtime
try:
    await runtime.call_tool("nosuch", "echo", {"text": "x"})
except runtime.UnknownServerError as e:
    print(json.dumps([type(e).__name__, str(e), e.kind]))
""",
        servers=["stub"],
    )
    assert got[0] == "UnknownServerError" and got[2] == "unknown_server", got
    assert "nosuch" in got[1] and all(n in got[1] for n in ("crashy", "my-stub", "nocmd", "other", "stub")), got
    _assert_alive(sb)


def test_wrong_arguments_raise_clear_errors_in_python(sb):
    got = _json(
        sb,
        """
import json
from mcp import runtime
out = {}
for label, call in [
    ("a_is_str", lambda: mcp_stub.add(a="x", b=1)),
    ("b_missing", lambda: mcp_stub.add(a=1)),
    ("positional", lambda: mcp_stub.add(5)),
]:
    try:
        out[label] = ["no error", await call()]
    except Exception as e:
        out[label] = [type(e).__name__, str(e)]
print(json.dumps(out))
""",
        servers=["stub"],
    )
    # Checked against the tool's input schema before the call is sent.
    assert got["a_is_str"][0] == "InvalidArgumentsError", got
    assert "argument 'a' must be number, got string \"x\"" in got["a_is_str"][1], got
    assert got["b_missing"][0] == "InvalidArgumentsError", got
    assert "missing required argument 'b'" in got["b_missing"][1], got
    assert "mcp_stub.add(a: float, b: float)" in got["b_missing"][1], got
    assert got["positional"][0] == "TypeError" and "keyword" in got["positional"][1], got
    _assert_alive(sb)


def test_server_that_cannot_start_fails_the_run_naming_it(sb):
    r = sb.run("print('must not run')", servers=["stub", "nocmd"])
    assert r.is_error and r.status == "error", str(r)
    assert "must not run" not in r.text
    assert "'nocmd'" in r.text and "no-such-mcp-server" in r.text, str(r)
    _assert_alive(sb)


def test_big_and_empty_results(sb):
    got = _json(
        sb,
        """
import json
big = await mcp_stub.big(bytes=5_000_000)
print(json.dumps({"type": type(big).__name__, "len": len(big), "chars": sorted(set(big)),
                  "empty": await mcp_stub.big(bytes=0)}))
""",
        servers=["stub"],
    )
    assert got == {"type": "str", "len": 5_000_000, "chars": ["x"], "empty": ""}


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
        assert r.elapsed < 6.0, f"a 3 s run took {r.elapsed:.1f} s"
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


# --- concurrency ---------------------------------------------------------------------------------


def test_fifty_parallel_calls_are_correct_and_in_order(sb):
    got = _json(
        sb,
        """
import asyncio, json
res = await asyncio.gather(*[mcp_stub.echo(text=f"m{i}") for i in range(50)])
sums = await asyncio.gather(*[mcp_stub.add(a=i, b=1000) for i in range(50)])
print(json.dumps({"echo": res, "sums": sums}))
""",
        servers=["stub"],
    )
    assert got["echo"] == [{"text": f"m{i}"} for i in range(50)]
    assert got["sums"] == [{"sum": i + 1000} for i in range(50)]


def test_gathered_slow_calls_run_concurrently(sb):
    got = _json(
        sb,
        """
import asyncio, json, time
t0 = time.monotonic()
res = await asyncio.gather(*[mcp_stub.slow(seconds=1) for _ in range(10)])
print(json.dumps({"res": res, "elapsed": time.monotonic() - t0}))
""",
        servers=["stub"],
        timeout=60,
    )
    assert got["res"] == ["done"] * 10
    assert 1.0 <= got["elapsed"] < 3.0, f"10 x slow(1) took {got['elapsed']:.2f} s: calls were serialized"


def test_a_flood_of_requests_is_capped_and_the_rest_refused_clearly(sb):
    # 300 requests at once, each held by the server for 5 s: the bridge keeps at most 256 in
    # flight per sandbox (MAX_IN_FLIGHT_CALLS) and answers the rest at once with an error, so a
    # request flood cannot grow the bridge's tasks and buffers without bound.
    got = _json(
        sb,
        """
import asyncio, json
res = await asyncio.gather(*[mcp_stub.slow(seconds=5) for _ in range(300)], return_exceptions=True)
errors = [str(r) for r in res if isinstance(r, Exception)]
print(json.dumps({"done": res.count("done"), "errors": len(errors),
                  "capped": all("too many host requests in flight (limit 256)" in e for e in errors)}))
""",
        servers=["stub"],
        timeout=60,
    )
    # (More than 256 only succeed if the first ones were done before the last were sent.)
    assert got["done"] + got["errors"] == 300 and got["errors"] > 0 and got["capped"], got
    assert sb.run("print('still serving')").text.strip() == "still serving"


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
    assert r.elapsed < 6.0, f"a 3 s run took {r.elapsed:.1f} s"
    assert _stdout(r) == "before\n", str(r)
    # The abandoned downstream request was cancelled (the stub logs it), not left running.
    assert helpers.poll(lambda: "stub-mcp[stub]: slow: cancelled" in sb.stderr_path.read_text(), timeout=5), sb.stderr_tail()
    _assert_alive(sb)
    # The server itself is still usable (and did not need a restart to be).
    assert _json(sb, "import json\nprint(json.dumps(await mcp_stub.add(a=1, b=1)))", servers=["stub"]) == {"sum": 2}


# --- real third-party servers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_env(tmp_path_factory, real_ready, stub_ready):
    d = tmp_path_factory.mktemp("proxy-real")
    cfg = S.real_servers(d)
    S.write_config(d / "mcps", cfg)
    return {"dir": d, "files": d / "files", "mcps": d / "mcps", "memory_file": d / "memory.jsonl"}


@pytest.fixture(scope="module")
def rb(bridge_factory, real_env):
    b = bridge_factory(name="proxy-real", env={"MCP_BRIDGE_CONFIG_DIR": str(real_env["mcps"])})
    yield b
    b.close()


def test_everything_echo_and_sum(rb):
    got = _json(
        rb,
        """
import json
out = {
  "echo": await mcp_everything.echo(message="hi"),
  "sum": await mcp_everything.get_sum(a=2, b=3),
  "sum_real_name": await getattr(mcp_everything, "get-sum")(a=20, b=22),
  "structured": await mcp_everything.get_structured_content(location="New York"),
  "image": await mcp_everything.get_tiny_image(),
}
print(json.dumps(out))
""",
        servers=["everything"],
        timeout=REAL_TIMEOUT,
    )
    assert got["echo"] == "Echo: hi"
    assert got["sum"] == "The sum of 2 and 3 is 5."
    assert got["sum_real_name"] == "The sum of 20 and 22 is 42."
    assert isinstance(got["structured"], dict) and {"temperature", "conditions", "humidity"} <= set(got["structured"]), got
    # Non-text content comes back as the list of content blocks.
    assert isinstance(got["image"], list), got["image"]
    images = [c for c in got["image"] if c.get("type") == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png" and images[0]["data"], got["image"]


def test_everything_fifty_parallel_calls(rb):
    got = _json(
        rb,
        """
import asyncio, json
res = await asyncio.gather(*[mcp_everything.echo(message=f"p{i}") for i in range(50)])
print(json.dumps(res))
""",
        servers=["everything"],
        timeout=REAL_TIMEOUT,
    )
    assert got == [f"Echo: p{i}" for i in range(50)]


def test_memory_create_entities_then_read_graph(rb):
    got = _json(
        rb,
        """
import json
created = await mcp_memory.create_entities(entities=[
    {"name": "Ada_e2e", "entityType": "person", "observations": ["wrote the first program"]}])
graph = await mcp_memory.read_graph()
print(json.dumps({"created": created, "graph": graph}))
""",
        servers=["memory"],
        timeout=REAL_TIMEOUT,
    )
    ada = {"name": "Ada_e2e", "entityType": "person", "observations": ["wrote the first program"]}
    assert got["created"] == {"entities": [ada]}
    assert ada in got["graph"]["entities"], got
    assert "relations" in got["graph"]


def test_filesystem_reads_a_file_in_the_allowed_dir(rb, real_env):
    f = real_env["files"] / "hello.txt"
    f.write_text("hello from the host\nline 2\n")
    got = _json(
        rb,
        """
import json
from mcp import runtime
out = {"read": await mcp_filesystem.read_text_file(path=%r)}
try:
    await mcp_filesystem.read_text_file(path="/etc/hostname")
except runtime.ToolError as e:
    out["outside"] = str(e)
print(json.dumps(out))
"""
        % str(f.resolve()),
        servers=["filesystem"],
        timeout=REAL_TIMEOUT,
    )
    assert got["read"] == {"content": "hello from the host\nline 2\n"}
    assert "outside allowed directories" in got.get("outside", ""), got


def test_time_current_time_in_utc(rb):
    got = _json(rb, "import json\nprint(json.dumps(await mcp_time.get_current_time(timezone='UTC')))", servers=["time"], timeout=REAL_TIMEOUT)
    assert got["timezone"] == "UTC"
    assert got["datetime"].endswith("+00:00"), got
    when = dt.datetime.fromisoformat(got["datetime"])
    now = dt.datetime.now(dt.UTC)
    assert abs((now - when).total_seconds()) < 300, (got, now)
    assert set(got) >= {"timezone", "datetime", "is_dst"}


def test_multi_server_workflow_in_one_run(rb, real_env):
    f = real_env["files"] / "workflow.txt"
    f.write_text("the bridge works")
    r = rb.run(
        wait=REAL_TIMEOUT + 60,
        code="""
import asyncio
from mcp.servers.filesystem import read_text_file
text = (await read_text_file(path=%r))["content"]
await mcp_memory.create_entities(entities=[{"name": "workflow_note", "entityType": "note", "observations": []}])
await mcp_memory.add_observations(observations=[{"entityName": "workflow_note", "contents": [text]}])
graph, now, total = await asyncio.gather(
    mcp_memory.open_nodes(names=["workflow_note"]),
    mcp_time.get_current_time(timezone="UTC"),
    mcp_everything.get_sum(a=len(text), b=1),
)
note = graph["entities"][0]
print("file:", text)
print("memory:", note["name"], note["observations"])
print("time zone:", now["timezone"])
print("sum:", total)
"""
        % str(f.resolve()),
        servers=["filesystem", "memory", "time", "everything"],
        timeout=REAL_TIMEOUT,
    )
    assert not r.is_error, f"{r}\n{rb.stderr_tail()}"
    assert _stdout(r) == (
        "file: the bridge works\n"
        "memory: workflow_note ['the bridge works']\n"
        "time zone: UTC\n"
        "sum: The sum of 16 and 1 is 17.\n"
    ), str(r)
    assert r.structured.get("servers") == ["filesystem", "memory", "time", "everything"], str(r)
    # The memory server really stored it (its file is on the host).
    stored = real_env["memory_file"].read_text()
    assert "workflow_note" in stored and "the bridge works" in stored


# --- remote servers (streamable HTTP) --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _RecordingTcpProxy:
    """Forwards 127.0.0.1:<port> to `target` byte for byte and keeps what clients sent, so a test
    can see the HTTP request headers the bridge put on the wire."""

    def __init__(self, target: int):
        self.target = target
        self.sent = bytearray()
        self._lock = threading.Lock()
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        try:
            while data := src.recv(65536):
                if record:
                    with self._lock:
                        self.sent += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def text(self) -> str:
        with self._lock:
            return self.sent.decode("latin-1")

    def close(self) -> None:
        self._srv.close()


@pytest.fixture(scope="module")
def http_everything(tmp_path_factory, real_ready):
    """server-everything serving streamable HTTP on a free port, behind a recording proxy."""
    port = _free_port()
    log = tmp_path_factory.mktemp("http-everything") / "server.log"
    entry = S.everything()
    with open(log, "w") as errlog:
        proc = subprocess.Popen(
            [entry["command"], *entry["args"], "streamableHttp"],
            env=dict(os.environ, PORT=str(port)),
            stdin=subprocess.DEVNULL,
            stdout=errlog,
            stderr=subprocess.STDOUT,
        )
    proxy = None
    try:
        listening = False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                listening = True
                break
            except OSError:
                time.sleep(0.1)
        assert listening, f"server-everything did not listen on {port}:\n{log.read_text()}"
        proxy = _RecordingTcpProxy(port)
        yield proxy
    finally:
        if proxy is not None:
            proxy.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_remote_http_server_with_headers(tmp_path, bridge_factory, http_everything):
    mcps = tmp_path / "mcps"
    S.write_config(
        mcps,
        {
            "remote": {
                "type": "http",
                "url": f"http://127.0.0.1:{http_everything.port}/mcp",
                "headers": {"X-E2E-Token": "secret-123"},
            },
            "oldsse": {"type": "sse", "url": f"http://127.0.0.1:{http_everything.port}/sse"},
        },
    )
    b = bridge_factory(name="remote-http", env={"MCP_BRIDGE_CONFIG_DIR": str(mcps)})
    try:
        got = _json(
            b,
            """
import asyncio, json
from mcp import runtime
d = {s["name"]: [s["transport"], s["source"]] for s in {"servers": runtime.discovered_servers_sync(True), "errors": runtime.config_problems_sync()}["servers"]}
out = {"echo": await mcp_remote.echo(message="over http"),
       "sums": await asyncio.gather(*[mcp_remote.get_sum(a=i, b=1) for i in range(10)]),
       "discovered": d}
print(json.dumps(out))
""",
            servers=["remote"],
            timeout=REAL_TIMEOUT,
        )
        assert got["echo"] == "Echo: over http"
        assert got["sums"] == [f"The sum of {i} and 1 is {i + 1}." for i in range(10)]
        assert got["discovered"] == {
            "remote": ["http", str(mcps / "remote.json")],
            "oldsse": ["sse", str(mcps / "oldsse.json")],
        }
        wire = http_everything.text().lower()
        assert "post /mcp" in wire, wire[:2000]
        assert "x-e2e-token: secret-123" in wire, "the configured header was not sent:\n" + wire[:2000]
        # Legacy SSE is listed but cannot be loaded: a clear error naming the server.
        r = b.run("print('must not run')", servers=["oldsse"])
        assert r.is_error and "'oldsse'" in r.text and "sse" in r.text.lower(), str(r)
        _ok(b, "print(await mcp_remote.echo(message='again'))", servers=["remote"])
    finally:
        b.close()
