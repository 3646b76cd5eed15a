"""Servers cost nothing until code loads them (GUIDE.md, "Your MCP servers"): lazy start and
background indexing that leave nothing running, and a `tools/list` of constant size however many
servers are configured.

Checked both through `mcp-code-bridge servers` (the CLI listing) and from sandbox code through
`mcp.runtime`.
"""

from __future__ import annotations

import json
import time

import pytest
from helpers_discovery import STUB_ORDER
from helpers_discovery import json_of as _json
from helpers_discovery import start_pids as _start_pids
from helpers_discovery import stub_pids_with_start_file as _stub_pids_with_start_file
from helpers_host import pid_alive as _pid_alive

import servers as S

pytestmark = pytest.mark.host_only  # lazy downstream servers and indexing: host-side

# --- lazy start and background indexing -----------------------------------------------------------


def test_lazy_start_and_indexing_leaves_nothing_running(tmp_path, bridge_factory, helpers, stub_ready):
    mcps, state = tmp_path / "mcps", tmp_path / "state"
    state.mkdir()
    starts = tmp_path / "lazy-starts.txt"
    S.write_config(mcps, {"lazy": S.stub("lazy", start_file=starts), "busy": S.stub("busy")})
    env = {"MCP_BRIDGE_CONFIG_DIR": str(mcps), "MCP_BRIDGE_STATE_DIR": str(state)}

    # First bridge, empty cache: it indexes "lazy" once in the background and closes it.
    b1 = bridge_factory(name="lazy-1", env=env)
    try:
        assert helpers.poll(lambda: len(_start_pids(starts)) == 1, timeout=30), "no background indexing"
        index_pid = _start_pids(starts)[0]
        assert helpers.poll(lambda: not _pid_alive(index_pid), timeout=10), "indexing left the server running"
        assert _stub_pids_with_start_file(starts) == [], "a stub process of 'lazy' is still running"
        got = _json(
            b1,
            """
import json
from mcp import runtime
d = {"servers": await runtime.discovered_servers(detailed=True), "errors": await runtime.config_problems()}
print(json.dumps({s["name"]: s["state"] for s in d["servers"]}))
""",
        )
        assert got["lazy"] == "idle", got  # indexing does not count as loading
        time.sleep(1.0)
        assert len(_start_pids(starts)) == 1
    finally:
        b1.close()

    # Second bridge, same state dir: the cache exists, so nothing starts "lazy" until a run names it.
    b2 = bridge_factory(name="lazy-2", env=env)
    try:
        time.sleep(1.5)  # room for a wrong background start to show up
        got = _json(
            b2,
            """
import json
from mcp import runtime
out = {"echo": await mcp_busy.echo(text="b"),
       "tools": [t["name"] for t in runtime.list_tools_sync("lazy")],
       "search": [(h["server"], h["name"]) for h in runtime.search_tool_docs_sync("whoami pid", limit=3)]}
print(json.dumps(out))
""",
            servers=["busy"],
        )
        assert got["echo"] == {"text": "b"}
        assert got["tools"] == STUB_ORDER  # answered from the on-disk cache
        assert ["lazy", "whoami"] in got["search"], got
        assert len(_start_pids(starts)) == 1, "a run that did not name 'lazy' started it"
        assert _stub_pids_with_start_file(starts) == []

        who = _json(b2, "import json\nprint(json.dumps(await mcp_lazy.whoami()))", servers=["lazy"])
        assert len(_start_pids(starts)) == 2 and who["starts"] == 2, who
        assert who["pid"] == _start_pids(starts)[-1]
        again = _json(b2, "import json\nprint(json.dumps(await mcp_lazy.whoami()))", servers=["lazy"])
        assert again == who, "the warm server was restarted between runs"
    finally:
        b2.close()
    # Closing the bridge stops the server it loaded.
    assert helpers.poll(lambda: _stub_pids_with_start_file(starts) == [], timeout=10), "server outlived the bridge"


# --- constant context cost ----------------------------------------------------------------------


def _dump(obj) -> str:
    if hasattr(obj, "model_dump"):
        return json.dumps(obj.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))
    return json.dumps(obj, separators=(",", ":"))


def test_tools_list_size_is_unchanged_with_50_servers_of_20_tools(tmp_path, bridge_factory, stub_ready):
    empty = tmp_path / "empty"
    empty.mkdir()
    many = tmp_path / "many"
    cfg = S.many_stubs(50, 20)
    # One server that never answers initialize: indexing it takes the full start timeout, which the
    # MCP handshake must not wait for.
    cfg["hang"] = {"command": "sleep", "args": ["45"]}
    S.write_config(many, cfg)

    b0 = bridge_factory(name="zero-servers", env={"MCP_BRIDGE_CONFIG_DIR": str(empty)})
    try:
        zero = _dump(b0.request(lambda s: s.list_tools()))
    finally:
        b0.close()

    t0 = time.monotonic()
    b50 = bridge_factory(name="fifty-servers", env={"MCP_BRIDGE_CONFIG_DIR": str(many)})
    try:
        started = time.monotonic() - t0
        first = _dump(b50.request(lambda s: s.list_tools()))
        assert started < 15, f"the handshake took {started:.1f} s: it waited for the background index"
        got = _json(
            b50,
            """
import json
from mcp import runtime
print(json.dumps({"n": len(runtime.list_servers_sync()),
                  "r": await mcp_s49.tool_19(query="q"),
                  "tools": len(await runtime.list_tools("s7"))}))
""",
            servers=["s49"],
        )
        assert got == {"n": 51, "r": {"server": "s49", "tool": "tool_19", "arguments": {"query": "q"}}, "tools": 27}
        later = _dump(b50.request(lambda s: s.list_tools()))
    finally:
        b50.close()
    assert len(first.encode()) == len(zero.encode()), (len(first.encode()), len(zero.encode()))
    assert first == zero and later == zero
    assert "s49" not in first and "tool_19" not in first
