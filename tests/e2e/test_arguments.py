"""Errors that teach (ARCHITECTURE.md, "MCP proxying over the frame protocol"): a proxied call's arguments are checked against the tool's
inputSchema before it is sent; a missing, unknown or mistyped argument raises
`mcp.InvalidArgumentsError` (also a TypeError) showing the tool's Python signature and what was
wrong, and misspelt server, tool and argument names get "did you mean".

Each run prints one JSON line: the exception's class, message and kind per attempted call.
"""

from __future__ import annotations

import json

import pytest

import servers as S

pytestmark = pytest.mark.host_only  # argument checks against the tool's schema: nothing engine-specific

# The sandbox code shared by the tests: `attempt(label, awaitable)` records the outcome.
PRELUDE = """
import json
import mcp
from mcp import runtime
out = {}
async def attempt(label, make):
    try:
        out[label] = ["no error", await make()]
    except Exception as e:
        out[label] = [type(e).__name__, str(e), getattr(e, "kind", None),
                      isinstance(e, TypeError), isinstance(e, mcp.InvalidArgumentsError)]
"""


def _outcomes(bridge, body: str, servers: list[str], timeout: int | None = None) -> dict:
    """Runs PRELUDE + body (which awaits `attempt`s); returns `out`."""
    code = PRELUDE + body + "\nprint(json.dumps(out))\n"
    r = bridge.run(code, servers=servers, timeout=timeout, wait=180.0)
    assert not r.is_error and r.status == "ok", f"run failed:\n{r}\n{bridge.stderr_tail()}"
    lines = [line for line in (r.structured or {}).get("stdout", "").splitlines() if line.strip()]
    return json.loads(lines[-1])


def _invalid(got: list) -> str:
    """The message of an InvalidArgumentsError outcome (checked to be one, and a TypeError)."""
    name, message, kind, is_type_error, is_invalid = got
    assert (name, kind, is_type_error, is_invalid) == ("InvalidArgumentsError", "invalid_arguments", True, True), got
    return message


@pytest.fixture(scope="module")
def ab(bridge_factory, tmp_path_factory, stub_ready):
    d = tmp_path_factory.mktemp("arguments")
    S.write_config(d / "mcps", {"stub": S.stub("stub"), "my-stub": S.stub("my-stub")})
    b = bridge_factory(name="arguments", env={"MCP_BRIDGE_CONFIG_DIR": str(d / "mcps")})
    yield b
    b.close()


def test_a_missing_argument_shows_the_signature(ab):
    got = _outcomes(
        ab,
        """
await attempt("missing", lambda: mcp_stub.add(a=1))
await attempt("dash", lambda: mcp_my_stub.echo())
await attempt("ok", lambda: mcp_stub.add(a=1, b=2))
""",
        servers=["stub", "my-stub"],
    )
    msg = _invalid(got["missing"])
    assert msg == "mcp_stub.add(a: float, b: float) -> str: missing required argument 'b'", msg
    # The server's alias, as written in the sandbox.
    msg = _invalid(got["dash"])
    assert msg.startswith("mcp_my_stub.echo(text: str) -> str:") and "'text'" in msg, msg
    assert got["ok"] == ["no error", {"sum": 3}], got


def test_a_misspelt_argument_gets_did_you_mean(ab):
    got = _outcomes(ab, 'await attempt("typo", lambda: mcp_stub.echo(txet="hi"))', servers=["stub"])
    msg = _invalid(got["typo"])
    assert msg.startswith("mcp_stub.echo(text: str) -> str:\n"), msg
    lines = msg.splitlines()[1:]
    # Several problems: one per line.
    assert sorted(line.strip() for line in lines) == [
        "missing required argument 'text'",
        "unknown argument 'txet' (did you mean 'text'?)",
    ], msg


def test_a_mistyped_argument_names_type_and_value(ab):
    got = _outcomes(
        ab,
        """
await attempt("str_for_number", lambda: mcp_stub.add(a="5", b=1))
await attempt("negative", lambda: mcp_stub.big(bytes=-1))
await attempt("call_tool", lambda: runtime.call_tool("stub", "big", {"bytes": 1.5}))
""",
        servers=["stub"],
    )
    msg = _invalid(got["str_for_number"])
    assert msg.endswith(": argument 'a' must be number, got string \"5\""), msg
    assert "mcp_stub.add(a: float, b: float) -> str" in msg, msg
    msg = _invalid(got["negative"])
    assert "argument 'bytes'" in msg and "minimum" in msg, msg
    msg = _invalid(got["call_tool"])
    assert "argument 'bytes' must be integer, got number 1.5" in msg, msg
    # The bad calls never reached the server, which still answers.
    assert _outcomes(ab, 'await attempt("ok", lambda: mcp_stub.big(bytes=2))', servers=["stub"])["ok"] == ["no error", "xx"]


def test_misspelt_tool_and_server_names_get_did_you_mean(ab):
    got = _outcomes(
        ab,
        """
await attempt("tool", lambda: runtime.call_tool("stub", "ecoh", {"text": "x"}))
await attempt("server", lambda: runtime.call_tool("stbu", "echo", {"text": "x"}))
await attempt("docs_tool", lambda: runtime.query_tool_docs("stub", "ad"))
await attempt("list_tools_server", lambda: runtime.list_tools("my_stub"))
await attempt("nothing_near", lambda: runtime.call_tool("stub", "zzzz", {}))
""",
        servers=["stub"],
    )
    name, msg, kind = got["tool"][:3]
    assert (name, kind) == ("UnknownToolError", "unknown_tool"), got
    assert "'ecoh' (did you mean 'echo'?)" in msg, msg
    name, msg, kind = got["server"][:3]
    assert (name, kind) == ("UnknownServerError", "unknown_server"), got
    assert "'stbu' (did you mean 'stub'?)" in msg, msg
    assert "(did you mean 'add'?)" in got["docs_tool"][1], got
    assert "(did you mean 'my-stub'?)" in got["list_tools_server"][1], got
    assert "did you mean" not in got["nothing_near"][1] and "echo" in got["nothing_near"][1], got


# --- a real server ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def eb(bridge_factory, tmp_path_factory, stub_ready, real_ready):
    d = tmp_path_factory.mktemp("arguments-real")
    S.write_config(d / "mcps", {"everything": S.everything()})
    b = bridge_factory(name="arguments-real", env={"MCP_BRIDGE_CONFIG_DIR": str(d / "mcps")})
    yield b
    b.close()


def test_server_everything_arguments(eb):
    got = _outcomes(
        eb,
        """
await attempt("missing", lambda: mcp_everything.get_sum(a=1))
await attempt("typo", lambda: mcp_everything.echo(mesage="hi"))
await attempt("mistyped", lambda: mcp_everything.get_sum(a="1", b=2))
await attempt("ok", lambda: mcp_everything.get_sum(a=1, b=2))
""",
        servers=["everything"],
        timeout=110,
    )
    msg = _invalid(got["missing"])
    assert msg.startswith("mcp_everything.get_sum(a: float, b: float)") and "missing required argument 'b'" in msg, msg
    msg = _invalid(got["typo"])
    assert msg.startswith("mcp_everything.echo(message: str)") and "unknown argument 'mesage' (did you mean 'message'?)" in msg, msg
    msg = _invalid(got["mistyped"])
    assert "argument 'a' must be number, got string \"1\"" in msg, msg
    assert got["ok"][0] == "no error", got
