"""The sandbox API a model and a user of the Python bridge expect (GUIDE.md, "Sandbox API"), end to end with the
official MCP client, real podman/docker and real servers (mcp-server-time from PyPI,
server-everything from npm, a FastMCP server from the official Python SDK, the Rust stub):

- the Python bridge's documented "Inspect Available Servers" snippet runs unchanged;
- helpers work as plain calls and awaited, with the documented shapes;
- FastMCP-wrapped values come back unwrapped, dicts allow attribute access;
- a cell's final expression is shown (notebook behaviour);
- help()/inspect.signature show a tool's real parameters; an unloaded proxy's NameError says
  how to load it;
- search works from the first call (waits for indexing), in `run` and in `exec`.
"""

from __future__ import annotations

import json
import subprocess

import pytest

import servers as S

pytestmark = pytest.mark.host_only  # the entrypoint's Python API, the same image on every engine

REAL_TIMEOUT = 110  # loading counts against a run; a Python server can take ~10 s to start here

# The Python bridge's README, "Inspect Available Servers", verbatim (2-space indents and all).
PYTHON_BRIDGE_SNIPPET = '''from mcp import runtime

print("Discovered:", runtime.discovered_servers())
print("Cached servers:", runtime.list_servers_sync())
print("Loaded metadata:", runtime.list_loaded_server_metadata())
print("Selectable via RPC:", await runtime.list_servers())

# Peek at tool docs for a server that's already loaded in this run
loaded = runtime.list_loaded_server_metadata()
if loaded:
  first = runtime.describe_server(loaded[0]["name"])
  for tool in first["tools"]:
    print(tool["alias"], "→", tool.get("description", ""))

# Ask for summaries or full schemas only when needed
if loaded:
  summaries = await runtime.query_tool_docs(loaded[0]["name"])
  detailed = await runtime.query_tool_docs(
    loaded[0]["name"],
    tool=summaries[0]["toolAlias"],
    detail="full",
  )
  print("Summaries:", summaries)
  print("Cached tools:", runtime.list_tools_sync(loaded[0]["name"]))
  print("Detailed doc:", detailed)

# Fuzzy search across loaded servers without rehydrating every schema
results = await runtime.search_tool_docs("calendar events", limit=3)
for result in results:
  print(result["server"], result["tool"], result.get("description", ""))

# Synchronous helpers for quick answers without extra awaits
print("Capability summary:", runtime.capability_summary())
print("Docs from cache:", runtime.query_tool_docs_sync(loaded[0]["name"]) if loaded else [])
print("Search from cache:", runtime.search_tool_docs_sync("calendar"))
'''


@pytest.fixture(scope="module")
def api(bridge_factory, real_ready, stub_ready, tmp_path_factory):
    """One bridge with time (PyPI), everything (npm), calc (FastMCP) and the stub."""
    cfg = {"time": S.time_server(), "everything": S.everything(), "calc": S.calc(),
           "stub": S.stub("stub")}
    b = bridge_factory(name="sandbox-api", config=S.config(cfg))
    yield b
    b.close()


def _ok(bridge, code, servers=None, timeout=REAL_TIMEOUT):
    r = bridge.run(code, servers=servers, timeout=timeout, wait=timeout + 60)
    assert not r.is_error, f"run failed:\n{r}\n{bridge.stderr_tail()}"
    return r


def _json(bridge, code, servers=None):
    out = (_ok(bridge, code, servers).structured or {}).get("stdout", "")
    return json.loads(out.strip().splitlines()[-1])


def test_python_bridge_snippet_runs_unchanged(api):
    r = _ok(api, PYTHON_BRIDGE_SNIPPET, servers=["time"])
    out = r.structured["stdout"]
    lines = out.splitlines()
    assert lines[0] == "Discovered: ('calc', 'everything', 'stub', 'time')", out
    assert lines[1] == "Cached servers: ('calc', 'everything', 'stub', 'time')", out
    assert lines[2].startswith("Loaded metadata: ({'name': 'time', 'alias': 'time'"), out
    assert lines[3] == "Selectable via RPC: ('calc', 'everything', 'stub', 'time')", out
    assert any(line.startswith("get_current_time → Get current time") for line in lines), out
    assert any(line.startswith("convert_time → ") for line in lines), out
    for prefix in ("Summaries: [{", "Cached tools: [{", "Detailed doc: [{", "Capability summary: ",
                   "Docs from cache: [{", "Search from cache: ["):
        assert any(line.startswith(prefix) for line in lines), (prefix, out)
    detailed = next(line for line in lines if line.startswith("Detailed doc:"))
    assert "'inputSchema'" in detailed and "'signature'" in detailed, detailed
    assert not r.structured.get("stderr"), r


def test_helpers_plain_and_awaited_with_documented_shapes(api):
    got = _json(api, """
import json
from mcp import runtime
plain, awaited = runtime.describe_server("time"), await runtime.describe_server("time")
meta = runtime.list_loaded_server_metadata()
docs = await runtime.query_tool_docs("time", tool="get_current_time")
by_alias = runtime.query_tool_docs("everything", "get_sum")
hits = runtime.search_tool_docs("add two numbers", limit=3)
print(json.dumps({
    "same": plain == awaited, "tool_keys": sorted(plain["tools"][0]), "alias": plain.alias,
    "meta_type": type(meta).__name__, "meta": [sorted(m) for m in meta],
    "meta_tools": [t["alias"] for t in meta[0]["tools"]],
    "doc_keys": sorted(docs[0]), "by_alias": [by_alias[0]["tool"], by_alias[0]["toolAlias"]],
    "hit_keys": sorted(hits[0]), "servers_type": type(runtime.list_servers()).__name__,
    "discovered": runtime.discovered_servers(), "detailed": runtime.discovered_servers(True)[0],
}))
""", servers=["time"])
    assert got["same"] is True
    assert {"name", "alias", "description", "input_schema"} <= set(got["tool_keys"]), got
    assert got["alias"] == "time"
    assert got["meta_type"] == "AwaitableTuple" and {"name", "alias", "tools"} <= set(got["meta"][0])
    assert set(got["meta_tools"]) == {"get_current_time", "convert_time"}, got
    assert {"server", "tool", "toolAlias", "description"} <= set(got["doc_keys"]), got
    assert got["by_alias"] == ["get-sum", "get_sum"], got
    assert {"server", "tool", "toolAlias", "description", "score"} <= set(got["hit_keys"]), got
    assert got["servers_type"] == "AwaitableTuple"
    assert got["discovered"] == ["calc", "everything", "stub", "time"]
    assert {"name", "description", "transport", "source"} <= set(got["detailed"]), got


def test_fastmcp_values_are_unwrapped_and_dicts_read_as_attributes(api):
    got = _json(api, """
import json
total = await mcp_calc.add(a=1, b=2)
loud = await mcp_calc.shout(text="hi", times=2)
s = await mcp_calc.stats(values=[1, 2, 3])
now = await mcp_time.get_current_time(timezone="Asia/Tokyo")
print(json.dumps({"total": total, "is_three": total == 3, "loud": loud, "mean": s.mean,
                  "tz": now.timezone}))
""", servers=["calc", "time"])
    assert got == {"total": 3, "is_three": True, "loud": "HIHI", "mean": 2.0, "tz": "Asia/Tokyo"}


def test_final_expression_is_shown_like_a_notebook(api):
    r = _ok(api, "import pandas as pd\ndf = pd.DataFrame({'x': [1, 2, 3]})\ndf.describe()")
    out = r.structured["stdout"]
    assert "count" in out and "mean" in out and "2.0" in out, r
    assert _ok(api, "df.describe();").structured.get("stdout", "") == ""


def test_help_and_signature_show_real_parameters(api):
    r = _ok(api, "import inspect, pydoc\n"
                 "print(inspect.signature(mcp_time.convert_time))\n"
                 "print(pydoc.render_doc(mcp_time.get_current_time, renderer=pydoc.plaintext))",
            servers=["time"])
    out = r.structured["stdout"]
    first = out.splitlines()[0]
    assert first.startswith("(*, source_timezone: str, time: str, target_timezone: str)"), out
    assert "async get_current_time(*, timezone: str)" in out, out
    assert "Get current time in a specific timezone" in out, out


def test_unloaded_proxy_says_how_to_load_it(api):
    # `everything` is configured but no run of this bridge has loaded it: no proxy exists yet.
    r = api.run("await mcp_everything.echo(message='hi')", timeout=30)
    assert r.is_error, r
    assert "NameError" in r.text and "servers=['everything']" in r.text, r


@pytest.fixture
def fresh_config(tmp_path, stub_ready):
    cfg = {"time": S.time_server(), "stub": S.stub("stub"),
           "off": dict(S.stub("off"), disabled=True)}
    return S.config(cfg)


def test_first_search_waits_for_indexing(bridge_factory, fresh_config, real_ready):
    # A brand-new state dir: nothing is cached; the very first search must see every server.
    b = bridge_factory(name="first-search", config=fresh_config)
    try:
        r = _ok(b, "from mcp import runtime\n"
                   "hits = runtime.search_tool_docs('what time is it in Tokyo', limit=3)\n"
                   "print(hits[0].server, hits[0].tool)")
        assert r.structured["stdout"].strip() == "time get_current_time", r
        # The disabled server is named: its tools are not searched until a run loads it.
        assert "could not search off (disabled" in r.structured.get("stderr", ""), r
    finally:
        b.close()


def test_exec_search_indexes_what_it_needs(helpers, cli_env, tmp_path, fresh_config):
    mcps = tmp_path / "mcps"
    mcps.mkdir()
    (mcps / "servers.json").write_text(json.dumps(fresh_config))
    env = dict(cli_env, MCP_BRIDGE_CONFIG_DIR=str(mcps), MCP_BRIDGE_STATE_DIR=str(tmp_path / "st"))
    code = ("from mcp import runtime\n"
            "print([(h.server, h.tool) for h in runtime.search_tool_docs('echo a message', 2)])")
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--timeout", "100", code], env=env,
                       capture_output=True, text=True, timeout=150, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "('stub', 'echo')" in p.stdout, p.stdout + p.stderr
