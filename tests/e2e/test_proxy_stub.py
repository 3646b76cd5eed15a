"""MCP proxying from sandbox code (GUIDE.md, "Sandbox API") against the Rust stub server: results through
every access path, errors raised in Python, big and empty results, and concurrent calls.

Values come back from the sandbox as one JSON line printed by the code (`_json`), so assertions
compare exact Python values, not rendered text. The stub bridge (`sb`, `stub_env`) is in
shared_bridges.py.
"""

from __future__ import annotations

import pytest
from helpers_proxy import assert_alive as _assert_alive
from helpers_proxy import json_of as _json

import servers as S

pytestmark = pytest.mark.host_only  # proxying to the stub server: host-side

STUB_TOOL_NAMES = sorted(S.STUB_TOOLS)


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


def test_runs_naming_the_servers_of_the_run_before_see_exactly_those(sb):
    # The exec frame sends `true` for the list of the last exec frame; a new sandbox gets the
    # list again. Each run sees the servers it named, and can call them.
    code = "import json\nprint(json.dumps([sorted(mcp_servers), (await mcp_stub.echo(text='x'))['text']]))"
    for servers in (["stub", "other"], ["stub", "other"], ["stub"], ["stub"], ["other", "stub"]):
        assert _json(sb, code, servers=servers) == [sorted(servers), "x"], servers
    r = sb.run("import os\nos._exit(3)", servers=["other", "stub"])
    assert r.is_error, str(r)
    for servers in (["other", "stub"], ["other", "stub"], ["stub"]):
        assert _json(sb, code, servers=servers) == [sorted(servers), "x"], servers
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
    assert 1.0 <= got["elapsed"] < 6.0, f"10 x slow(1) took {got['elapsed']:.2f} s: calls were serialized"


def test_a_flood_of_requests_is_capped_and_the_rest_refused_clearly(sb):
    # 4500 requests at once, each held by the server for 2 s: the bridge keeps at most 256 in
    # flight per sandbox (MAX_IN_FLIGHT_CALLS) and at most 4096 more waiting for room
    # (MAX_QUEUED_CALLS), which get their turn until the run's deadline; the rest are answered at
    # once with an error, so a request flood cannot grow the bridge's tasks and buffers without
    # bound.
    got = _json(
        sb,
        """
import asyncio, json
res = await asyncio.gather(*[mcp_stub.slow(seconds=2) for _ in range(4500)], return_exceptions=True)
errors = [str(r) for r in res if isinstance(r, Exception)]
print(json.dumps({"done": res.count("done"), "errors": len(errors),
                  "refused": sum("in flight and waiting (limits 256 and 4096)" in e for e in errors),
                  "late": sum("before the run's deadline" in e for e in errors),
                  "timed_out": sum("within the run's time limit" in e for e in errors)}))
""",
        servers=["stub"],
        timeout=15,
    )
    # Each ended one of four ways: done; refused at once past the queue; still waiting for room at
    # the deadline; or in flight at the deadline (given up, cancelled downstream).
    assert got["done"] + got["errors"] == 4500, got
    assert got["errors"] == got["refused"] + got["late"] + got["timed_out"], got
    # Some waited and went through; past the queue, refused at once.
    assert got["done"] > 256 and got["refused"] > 0, got
    assert sb.run("print('still serving')").text.strip() == "still serving"
