"""The MCP face (README.md; GUIDE.md, "Output"): tools, results, resources, errors, output modes, `exec`."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

try:  # SDK v2 name
    from mcp.shared.exceptions import MCPError as McpError
except ImportError:  # SDK v1 name
    from mcp.shared.exceptions import McpError  # type: ignore[no-redef]

CAPABILITIES_URI = "resource://mcp-code-bridge/capabilities"

# A downstream server configured for the shared bridge of this module: its name and tool must
# never show up in tools/list (the description carries no downstream documentation).
DOWNSTREAM = "zebrafinch_downstream"
DOWNSTREAM_CONFIG = {
    "mcpServers": {
        DOWNSTREAM: {"command": "/nonexistent/zebrafinch-mcp-server", "args": ["--tool", "quokka_lookup"]},
    }
}


@pytest.fixture(scope="module")
def core(bridge_factory):
    b = bridge_factory(name="core", config=DOWNSTREAM_CONFIG)
    yield b
    b.close()


def _dump(obj) -> str:
    if hasattr(obj, "model_dump"):
        return json.dumps(obj.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))
    return json.dumps(obj, separators=(",", ":"))


# --- tools/list ---------------------------------------------------------------------------------


# Engine markers per test (engine_markers.py): `engine` where the outcome depends on the container
# engine (why, beside it; the docker pass runs these too), `host_only` where the subject is on the host.
@pytest.mark.host_only
def test_tools_list_is_one_small_tool(core):
    listed = core.request(lambda s: s.list_tools())
    names = [t.name for t in listed.tools]
    assert names == ["run_python"], names
    tool = listed.tools[0]

    whole = _dump(listed)
    assert len(whole.encode()) < 1000, f"tools/list is {len(whole.encode())} bytes: {whole}"

    schema = tool.input_schema if hasattr(tool, "input_schema") else tool.inputSchema
    assert schema["required"] == ["code"]
    # allowed_tools (issue 24): optional, narrows what the run may call.
    assert set(schema["properties"]) == {"code", "servers", "timeout", "allowed_tools"}
    assert schema["properties"]["code"]["type"] == "string"

    desc = tool.description or ""
    assert DOWNSTREAM not in whole and "zebrafinch" not in whole.lower(), whole
    assert "quokka" not in whole.lower(), whole
    assert desc, "the tool needs a description"
    assert "servers" in desc, desc  # the helper summary says how to load servers


@pytest.mark.host_only
def test_tools_list_is_constant_whatever_servers_are_configured(core, bridge_factory):
    many = {"mcpServers": {f"extra_server_{i}": {"command": "/nonexistent/srv", "args": [str(i)]} for i in range(20)}}
    other = bridge_factory(name="many-servers", config=many)
    try:
        with_many = _dump(other.request(lambda s: s.list_tools()))
    finally:
        other.close()
    with_one = _dump(core.request(lambda s: s.list_tools()))
    assert with_many == with_one
    assert "extra_server" not in with_many


# --- running code ---------------------------------------------------------------------------------


@pytest.mark.engine  # a run in the engine's container
def test_print(core):
    r = core.run("print('hello from the sandbox')")
    assert not r.is_error, str(r)
    assert r.text == "hello from the sandbox\n", str(r)
    assert r.structured is not None and r.structured.get("stdout") == "hello from the sandbox\n", str(r)


@pytest.mark.engine  # one container kept across calls
def test_state_persists_across_calls(core):
    r = core.run(
        "import json as persisted_json\n"
        "core_counter = 41\n"
        "def core_double(v):\n"
        "    return v * 2\n"
    )
    assert not r.is_error, str(r)
    r = core.run("core_counter += 1\nprint(core_double(core_counter), persisted_json.dumps([1]))")
    assert not r.is_error, str(r)
    assert r.text.strip() == "84 [1]", str(r)


@pytest.mark.host_only
def test_top_level_await(core):
    r = core.run(
        "import asyncio\n"
        "async def core_answer():\n"
        "    await asyncio.sleep(0.01)\n"
        "    return 42\n"
        "core_awaited = await core_answer()\n"
        "print(core_awaited)\n"
    )
    assert not r.is_error, str(r)
    assert r.text.strip() == "42", str(r)
    r = core.run("print(core_awaited + 1)")
    assert r.text.strip() == "43", str(r)


@pytest.mark.host_only
def test_exception_is_a_tool_error_with_traceback(core):
    r = core.run("core_before_error = 'kept'\ndef core_fails():\n    raise ValueError('boom-7731')\ncore_fails()\n")
    assert r.is_error, str(r)
    assert r.status == "error", str(r)
    assert "Traceback (most recent call last)" in r.text, str(r)
    assert "ValueError: boom-7731" in r.text, str(r)
    assert "core_fails" in r.text, str(r)
    assert "boom-7731" in (r.structured or {}).get("error", ""), str(r)

    nxt = core.run("print(core_before_error)")
    assert not nxt.is_error, str(nxt)
    assert nxt.text.strip() == "kept", str(nxt)
    assert "notice" not in (nxt.structured or {}), str(nxt)


@pytest.mark.engine  # stderr through the engine's stream
def test_stderr_is_captured_separately(core):
    r = core.run("import sys\nprint('to-stdout-5501')\nprint('to-stderr-5502', file=sys.stderr)\n")
    assert not r.is_error, str(r)
    s = r.structured or {}
    assert "to-stderr-5502" not in s.get("stdout", ""), str(r)
    assert "to-stderr-5502" in s.get("stderr", ""), str(r)
    assert "to-stdout-5501" in s.get("stdout", ""), str(r)
    head, sep, tail = r.text.partition("--- stderr ---")
    assert sep, f"no stderr section in the text\n{r}"
    assert "to-stdout-5501" in head and "to-stderr-5502" not in head, str(r)
    assert "to-stderr-5502" in tail, str(r)


def _no_empty_values(structured: dict) -> bool:
    return all(v not in ("", None, [], {}) for v in structured.values())


@pytest.mark.host_only
def test_structured_content_drops_empty_fields(core):
    r = core.run("print('only stdout')")
    s = r.structured
    assert s is not None and s["status"] == "ok" and s["stdout"] == "only stdout\n", str(r)
    for dropped in ("stderr", "error", "servers", "notice"):
        assert dropped not in s, str(r)
    assert _no_empty_values(s), str(r)

    quiet = core.run("core_quiet = 1")
    assert not quiet.is_error, str(quiet)
    assert quiet.structured is not None and quiet.structured["status"] == "ok", str(quiet)
    assert "stdout" not in quiet.structured and "stderr" not in quiet.structured, str(quiet)
    assert _no_empty_values(quiet.structured), str(quiet)

    err = core.run("raise KeyError('k')")
    assert err.structured is not None and err.structured["status"] == "error", str(err)
    assert "stdout" not in err.structured and "stderr" not in err.structured, str(err)
    assert "KeyError" in err.structured["error"], str(err)
    assert _no_empty_values(err.structured), str(err)


# --- resources ------------------------------------------------------------------------------------


@pytest.mark.host_only
def test_capabilities_resource_is_listed_and_readable(core):
    listed = core.request(lambda s: s.list_resources())
    uris = [str(r.uri) for r in listed.resources]
    assert CAPABILITIES_URI in uris, uris

    read = core.request(lambda s: s.read_resource(CAPABILITIES_URI))
    assert read.contents, read
    text = getattr(read.contents[0], "text", "")
    assert str(read.contents[0].uri) == CAPABILITIES_URI
    assert "run_python" in text and "servers" in text, text
    assert "runtime" in text, text
    assert DOWNSTREAM not in text


@pytest.mark.host_only
def test_unknown_resource_is_a_jsonrpc_error(core):
    with pytest.raises(McpError):
        core.request(lambda s: s.read_resource("resource://mcp-code-bridge/nope"))


# --- malformed requests ---------------------------------------------------------------------------


@pytest.mark.host_only
@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({}, id="missing-code"),
        pytest.param({"code": 5}, id="code-not-string"),
        pytest.param({"code": "print(1)", "timeout": "soon"}, id="timeout-not-int"),
        pytest.param({"code": "print(1)", "servers": "github"}, id="servers-not-list"),
    ],
)
def test_malformed_call_is_a_tool_error_the_model_sees(core, arguments):
    # SEP-1303 (2025-11-25): input validation errors are tool results with isError, not
    # JSON-RPC errors, so the model reads the message and corrects its call.
    raw = core.call_raw(arguments)
    assert _is_error(raw), raw
    text = raw.content[0].text
    assert "invalid run_python arguments" in text, text
    # The session is still fine afterwards.
    assert core.run("print('still fine')").text.strip() == "still fine"


@pytest.mark.host_only
def test_missing_code_names_the_argument(core):
    raw = core.call_raw({})
    assert _is_error(raw) and "'code'" in raw.content[0].text, raw


def _is_error(raw) -> bool:
    return bool(getattr(raw, "is_error", None) or getattr(raw, "isError", None))


@pytest.mark.host_only
def test_unknown_tool_is_a_jsonrpc_error(core):
    with pytest.raises(McpError):
        core.call_raw({"code": "print(1)"}, name="run_javascript")


# --- output modes ---------------------------------------------------------------------------------


@pytest.mark.host_only
def test_toon_output_mode(bridge_factory):
    b = bridge_factory(env={"MCP_BRIDGE_OUTPUT_MODE": "toon"}, name="toon")
    try:
        r = b.run("print('toon-hello')")
        assert not r.is_error, str(r)
        lines = r.text.splitlines()
        assert lines[0] == "```toon" and lines[-1] == "```", str(r)
        assert "status: ok" in lines, str(r)
        # stdout as a length-annotated array of lines, as the Python bridge renders it
        assert "stdout[1]: toon-hello" in lines, str(r)
        two = b.run("print('a')\nprint('b')")
        assert "stdout[2]: a,b" in two.text.splitlines(), str(two)
        # structuredContent is the same data whatever the text mode.
        assert r.structured is not None and r.structured["status"] == "ok", str(r)

        e = b.run("raise RuntimeError('toon-fail')")
        assert e.is_error, str(e)
        assert "status: error" in e.text.splitlines(), str(e)
        assert "toon-fail" in e.text, str(e)
    finally:
        b.close()


# Frame fds sit at 100+ in the entrypoint: a socket there is the socket channel.
_CHANNEL_PROBE = (
    "import os, stat\n"
    "print('socket' if any(stat.S_ISSOCK(os.fstat(int(f)).st_mode) for f in os.listdir('/proc/self/fd')"
    " if f.isdigit() and int(f) >= 100 and os.path.exists('/proc/self/fd/' + f)) else 'stdio')\n"
    "from mcp import runtime\n"
    "import asyncio\n"
    "print(sum(await asyncio.gather(*[runtime.ping(i) for i in range(100)])))"
)


@pytest.mark.engine  # the frame channel: socket mount or the engine's attach
@pytest.mark.parametrize("mode", ["auto", "stdio"])
def test_frames_use_the_socket_channel_unless_told_stdio(bridge_factory, mode):
    b = bridge_factory(env={"MCP_BRIDGE_CHANNEL": mode}, name="channel-" + mode)
    try:
        r = b.run(_CHANNEL_PROBE)
        assert not r.is_error, str(r)
        assert r.text.split() == ["socket" if mode == "auto" else "stdio", "4950"], str(r)
        # the socket directory cannot be listed, and is gone (removed on the host once connected)
        r = b.run("import os\nfor act in (lambda: os.listdir('/run/mcp-bridge'), lambda: open('/run/mcp-bridge/x', 'w')):\n"
                  "    try:\n        act()\n        print('allowed')\n    except OSError as e:\n        print(type(e).__name__)")
        want = ["PermissionError", "FileNotFoundError"] if mode == "auto" else ["FileNotFoundError"] * 2
        assert r.text.split() == want, str(r)
    finally:
        b.close()


# --- the exec command -----------------------------------------------------------------------------


def _exec(cli_env, bin_path, *args: str, stdin: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [bin_path, "exec", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=cwd,
        timeout=120,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )


@pytest.mark.engine  # exec's own sandbox on the engine
def test_exec_prints_result(cli_env, helpers, cli_cwd):
    p = _exec(cli_env, helpers.BRIDGE_BIN, "print(1+1)", cwd=cli_cwd)
    assert p.returncode == 0, f"rc={p.returncode}\nstdout={p.stdout!r}\nstderr={p.stderr[-2000:]}"
    assert p.stdout.strip() == "2", p.stdout


@pytest.mark.host_only
def test_exec_error_exits_nonzero(cli_env, helpers, cli_cwd):
    p = _exec(cli_env, helpers.BRIDGE_BIN, "1/0", cwd=cli_cwd)
    assert p.returncode == 1, f"stdout={p.stdout!r}"
    assert "ZeroDivisionError" in p.stderr, f"stdout={p.stdout!r}\nstderr={p.stderr[-2000:]}"
    assert "ZeroDivisionError" not in p.stdout, p.stdout  # tracebacks go to stderr


@pytest.mark.host_only
def test_exec_reads_code_from_stdin(cli_env, helpers, cli_cwd):
    p = _exec(cli_env, helpers.BRIDGE_BIN, "-", stdin="print(3)\n", cwd=cli_cwd)
    assert p.returncode == 0, f"rc={p.returncode}\nstdout={p.stdout!r}\nstderr={p.stderr[-2000:]}"
    assert p.stdout.strip() == "3", p.stdout


@pytest.mark.host_only
def test_exec_logs_stay_off_stdout(cli_env, helpers, cli_cwd):
    p = _exec(cli_env, helpers.BRIDGE_BIN, "print('just-this')", cwd=cli_cwd)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout == "just-this\n", repr(p.stdout)
    assert not re.search(r"\b(INFO|WARN|DEBUG)\b", p.stdout), p.stdout
