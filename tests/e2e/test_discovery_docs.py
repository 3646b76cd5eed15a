"""Finding and reading tools from sandbox code (GUIDE.md, "Sandbox API"): fuzzy search across servers
never started, tool docs in summary and full, and server metadata including disabled servers.

Checked both through `mcp-code-bridge servers` (the CLI listing) and from sandbox code through
`mcp.runtime`.
"""

from __future__ import annotations

import pytest
from helpers_discovery import ADD_DESCRIPTION, ADD_SCHEMA, STUB_INSTRUCTIONS, STUB_ORDER
from helpers_discovery import json_of as _json
from helpers_discovery import start_pids as _start_pids

import servers as S

pytestmark = pytest.mark.host_only  # search and tool docs: host-side

# --- search and docs ----------------------------------------------------------------------------------


def test_search_finds_a_misspelled_tool_on_a_server_never_started(tmp_path, bridge_factory, helpers, stub_ready):
    mcps = tmp_path / "mcps"
    starts = tmp_path / "cal-starts.txt"
    S.write_config(
        mcps,
        {"calsrv": S.stub("calsrv", extra_tools=20, start_file=starts), "stub": S.stub("stub")},
    )
    b = bridge_factory(name="search", env={"MCP_BRIDGE_CONFIG_DIR": str(mcps)})
    try:
        got = _json(
            b,
            """
import json, time
from mcp import runtime
deadline = time.monotonic() + 30
while True:  # the background index of never-seen servers may still be running
    hits = runtime.search_tool_docs_sync("calender evnts", limit=3)
    if any(h["server"] == "calsrv" for h in hits) or time.monotonic() > deadline:
        break
    time.sleep(0.2)
out = {
    "hits": hits,
    "async": await runtime.search_tool_docs("calender evnts", limit=3),
    "full": runtime.search_tool_docs_sync("calender evnts", limit=1, detail="full"),
    "weather": runtime.search_tool_docs_sync("wether forcast", limit=1),
    "one": runtime.search_tool_docs_sync("calender", limit=1),
    "state": {s["name"]: s["state"] for s in {"servers": runtime.discovered_servers_sync(True), "errors": runtime.config_problems_sync()}["servers"]},
}
print(json.dumps(out))
""",
            servers=["stub"],
            timeout=60,
        )
    finally:
        b.close()
    hits = got["hits"]
    assert hits, got
    top = hits[0]
    assert (top["server"], top["name"]) == ("calsrv", "tool_0"), hits
    assert top["description"].startswith("List calendar events between two dates"), top
    # The Python bridge's keys (tool, toolAlias, serverAlias) and ours (name).
    assert set(top) == {"server", "serverAlias", "tool", "toolAlias", "name", "description", "score"}, top
    assert top["tool"] == top["name"] == top["toolAlias"], top
    assert isinstance(top["score"], (int, float)) and 0 < top["score"] <= 1, top
    assert len(hits) <= 3 and [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert [(h["server"], h["name"]) for h in got["async"]] == [(h["server"], h["name"]) for h in hits]
    full = got["full"]
    assert len(full) == 1 and (full[0]["server"], full[0]["name"]) == ("calsrv", "tool_0"), full
    assert full[0]["signature"] == "tool_0(query: str, limit: int = 10) -> str", full
    assert full[0]["input_schema"]["required"] == ["query"], full
    assert set(full[0]["input_schema"]["properties"]) == {"query", "limit"}, full
    assert (got["weather"][0]["server"], got["weather"][0]["name"]) == ("calsrv", "tool_2"), got["weather"]
    assert len(got["one"]) == 1
    # Found without ever loading calsrv: only the indexing start, and it is not running.
    assert got["state"]["calsrv"] == "idle", got["state"]
    assert len(_start_pids(starts)) == 1


@pytest.fixture(scope="module")
def docs_bridge(tmp_path_factory, bridge_factory, stub_ready):
    d = tmp_path_factory.mktemp("docs")
    S.write_config(
        d / "mcps",
        {
            "stub": S.stub("stub"),
            "my-stub": S.stub("my-stub"),
            "idle-stub": S.stub("idle-stub"),
            "off": S.stub("off", disabled=True),
        },
    )
    b = bridge_factory(name="docs", env={"MCP_BRIDGE_CONFIG_DIR": str(d / "mcps")})
    b.mcps = d / "mcps"  # type: ignore[attr-defined]
    yield b
    b.close()


def test_query_tool_docs_summary_and_full(docs_bridge):
    got = _json(
        docs_bridge,
        """
import json
from mcp import runtime
out = {
    "full": runtime.query_tool_docs_sync("stub", "add", detail="full"),
    "full_async": await runtime.query_tool_docs("stub", "add", detail="full"),
    "summary": await runtime.query_tool_docs("stub", "add"),
    "all": runtime.query_tool_docs_sync("stub"),
    "all_full": runtime.query_tool_docs_sync("stub", detail="full"),
    "tools": await runtime.list_tools("stub"),
    "tools_sync": runtime.list_tools_sync("stub"),
}
try:
    runtime.query_tool_docs_sync("stub", "nope")
except runtime.UnknownToolError as e:
    out["unknown"] = str(e)
try:
    runtime.query_tool_docs_sync("stub", "add", detail="verbose")
except runtime.BridgeCallError as e:
    out["bad_detail"] = str(e)
print(json.dumps(out))
""",
        servers=["stub"],
    )
    assert got["full"] == [
        {
            "server": "stub",
            "serverAlias": "stub",
            "tool": "add",
            "toolAlias": "add",
            "name": "add",
            "description": ADD_DESCRIPTION,
            "input_schema": ADD_SCHEMA,
            "inputSchema": ADD_SCHEMA,
            "signature": "add(a: float, b: float) -> str",
        }
    ], got["full"]
    assert got["full_async"] == got["full"]
    assert got["summary"] == [{"server": "stub", "serverAlias": "stub", "tool": "add", "toolAlias": "add",
                               "name": "add", "description": ADD_DESCRIPTION}]
    assert [d["name"] for d in got["all"]] == STUB_ORDER
    summary_keys = {"server", "serverAlias", "tool", "toolAlias", "name", "description"}
    assert all(set(d) == summary_keys and d["description"] for d in got["all"]), got["all"]
    sigs = {d["name"]: d["signature"] for d in got["all_full"]}
    assert sigs == {
        "echo": "echo(text: str) -> str",
        "add": "add(a: float, b: float) -> str",
        "slow": "slow(seconds: float) -> str",
        "crash": "crash() -> str",
        "big": "big(bytes: int) -> str",
        "fail": "fail(message: str) -> str",
        "whoami": "whoami() -> str",
    }
    assert got["tools"] == got["tools_sync"] == [
        {"name": d["name"], "alias": d["toolAlias"], "description": d["description"]} for d in got["all"]
    ]
    assert "nope" in got["unknown"] and "whoami" in got["unknown"], got
    assert "verbose" in got["bad_detail"], got


def test_describe_metadata_summary_and_disabled_servers(docs_bridge):
    mcps = docs_bridge.mcps
    got = _json(
        docs_bridge,
        """
import json
from mcp import runtime
out = {
    "describe": await runtime.describe_server("stub"),
    "describe_sync": runtime.describe_server_sync("stub"),
    "describe_idle": runtime.describe_server_sync("idle-stub"),
    "meta": await runtime.list_loaded_server_metadata(),
    "meta_sync": runtime.list_loaded_server_metadata_sync(),
    "summary": await runtime.capability_summary(),
    "summary_sync": runtime.capability_summary_sync(),
    "discovered": {"servers": runtime.discovered_servers_sync(True), "errors": runtime.config_problems_sync()},
    "off": await mcp_off.echo(text="disabled but loadable"),
}
try:
    runtime.describe_server_sync("nosuch")
except runtime.UnknownServerError as e:
    out["unknown"] = str(e)
print(json.dumps(out))
""",
        servers=["stub", "my-stub", "off"],
    )
    d = got["describe"]
    assert d == got["describe_sync"]
    assert (d["name"], d["transport"], d["source"], d["state"], d["disabled"]) == (
        "stub", "stdio", str(mcps / "stub.json"), "running", False
    ), d
    assert d["server_info"] == {"name": "stub", "version": "0.1.0"}, d
    assert d["instructions"] == STUB_INSTRUCTIONS, d
    assert [t["name"] for t in d["tools"]] == STUB_ORDER, d
    assert next(t for t in d["tools"] if t["name"] == "add")["description"] == ADD_DESCRIPTION

    idle = got["describe_idle"]
    assert (idle["name"], idle["transport"], idle["source"]) == ("idle-stub", "stdio", str(mcps / "idle-stub.json")), idle
    assert idle["tools"] is None or [t["name"] for t in idle["tools"]] == STUB_ORDER, idle

    stub_info = {"name": "stub", "version": "0.1.0"}
    assert got["meta"] == got["meta_sync"]
    meta = {m["name"]: m for m in got["meta"]}
    assert sorted(meta) == ["my-stub", "off", "stub"], got["meta"]
    # The Python bridge's shape: each loaded server with its tools (name, alias, description,
    # input_schema).
    assert [t["alias"] for t in meta["stub"].pop("tools")] == STUB_ORDER, got["meta"]
    assert all(set(t) == {"name", "alias", "description", "input_schema"} for t in meta["my-stub"].pop("tools"))
    assert meta["stub"] == {"name": "stub", "alias": "stub", "server_info": stub_info, "tool_count": 7}
    assert meta["my-stub"] == {
        "name": "my-stub", "alias": "my_stub", "server_info": {"name": "my-stub", "version": "0.1.0"}, "tool_count": 7
    }

    summary = got["summary"]
    assert summary == got["summary_sync"] and isinstance(summary, str)
    assert "search_tool_docs" in summary and "query_tool_docs" in summary, summary
    lines = {name: next((line for line in summary.splitlines() if f" {name} (" in line), None) for name in ("stub", "my-stub", "idle-stub", "off")}
    assert all(lines.values()), summary
    assert "7 tools" in lines["stub"] and "loaded" in lines["stub"] and "stdio" in lines["stub"], summary
    assert "loaded" in lines["my-stub"] and "loaded" not in lines["idle-stub"], summary
    assert "disabled" in lines["off"], summary

    off = next(s for s in got["discovered"]["servers"] if s["name"] == "off")
    assert off["disabled"] is True and off["source"] == str(mcps / "off.json"), off
    assert got["off"] == {"text": "disabled but loadable"}
    assert "nosuch" in got["unknown"] and "idle-stub" in got["unknown"], got
