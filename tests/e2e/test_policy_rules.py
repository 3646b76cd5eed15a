"""Allow and deny lists (GUIDE.md, "Policy", "Allow and deny lists") through the real bridge and the
official MCP client: `allowedTools` / `disabledTools` with wildcards (deny wins) hide tools from every
listing, the docs, the search and the proxies, and a call to one raises ToolDisabledError naming the
rule and its file; the `allowed_tools` argument of run_python narrows per call and never widens; a
project file's entry keeps only the keys that tighten.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_cli import cli_env_for as cli_env
from helpers_cli import home_env, servers_cli

import servers as S

pytestmark = pytest.mark.host_only  # the policy is host-side: one engine is enough

# What sandbox code sees of the stub: every listing, the docs, the search, the proxies, and the
# outcome of calling each tool through runtime.call_tool (the proxies only exist for listed tools).
SEEN = """
import json
from mcp import runtime
names = lambda items: sorted(t["name"] if "name" in t else t["tool"] for t in items)
hits = []
for q in ["echo", "add numbers sum", "drop table", "note", "peek", "tool", "query look for", "whoami"]:
    hits += [r["tool"] for r in runtime.search_tool_docs(q, limit=50)]
meta = [m for m in runtime.list_loaded_server_metadata() if m["name"] == "stub"][0]
calls = {}
for tool in ALL:
    args = {"query": "q"} if tool.startswith("tool_") else {"text": "t"} if tool in ("echo", "write_note") else {}
    try:
        await runtime.call_tool("stub", tool, args)
        calls[tool] = "ok"
    except Exception as e:
        calls[tool] = [type(e).__name__, str(e)]
print(json.dumps({
    "list_tools": names(runtime.list_tools("stub")),
    "described": names(runtime.describe_server("stub")["tools"]),
    "docs": names(runtime.query_tool_docs("stub")),
    "search": sorted(set(hits)),
    "proxies": sorted(t for t in ALL if hasattr(mcp_stub, t)),
    "meta": [names(meta["tools"]), meta["tool_count"]],
    "summary": runtime.capability_summary(),
    "calls": calls,
}))
"""

ALL = sorted(S.STUB_TOOLS | {"drop_table", "peek", "write_note"} | {f"tool_{i}" for i in range(4)})


def _seen(result) -> dict:
    assert not result.is_error and result.status == "ok", f"run failed:\n{result}"
    return json.loads(result.structured["stdout"].strip().splitlines()[-1])


def _run(bridge, allowed_tools: list[str] | None = None) -> dict:
    code = f"ALL = {ALL!r}\n" + SEEN
    if allowed_tools is None:
        return _seen(bridge.run(code, servers=["stub"]))
    from bridge_driver import _flatten

    raw = bridge.call_raw({"code": code, "servers": ["stub"], "allowed_tools": allowed_tools})
    return _seen(_flatten(raw, 0.0))


def _ruled_stub() -> dict:
    entry = S.stub("stub", policy_tools=True, extra_tools=4)
    # tool_1 is allowed by "tool_*" and denied by its own rule: deny wins.
    entry["allowedTools"] = ["echo", "tool_*", "write_*"]
    entry["disabledTools"] = ["tool_1", "tool_3*"]
    return entry


def _assert_only(seen: dict, visible: list[str]) -> None:
    for key in ("list_tools", "described", "docs", "proxies"):
        assert seen[key] == visible, (key, seen[key])
    assert seen["search"] and set(seen["search"]) <= set(visible), seen["search"]
    assert seen["meta"] == [visible, len(visible)], seen["meta"]
    assert f"stub (stdio, {len(visible)} tools, loaded)" in seen["summary"], seen["summary"]


def test_allow_and_deny_lists_hide_tools_everywhere_and_name_the_rule(bridge_factory, stub_ready):
    b = bridge_factory(name="rules", config={"mcpServers": {"stub": _ruled_stub()}})
    config_file = str(b.dir / "mcps" / "servers.json")
    seen = _run(b)
    visible = ["echo", "tool_0", "tool_2", "write_note"]
    _assert_only(seen, visible)
    calls = seen["calls"]
    assert all(calls[t] == "ok" for t in visible), calls
    for tool in set(ALL) - set(visible):
        assert calls[tool][0] == "ToolDisabledError", (tool, calls[tool])
    assert calls["tool_1"][1] == (
        f"tool 'tool_1' of MCP server 'stub' is refused by \"disabledTools\" rule \"tool_1\" in {config_file}"
    ), calls["tool_1"]
    assert "refused by \"disabledTools\" rule \"tool_3*\" in " + config_file in calls["tool_3"][1], calls
    assert calls["add"][1] == (
        f"tool 'add' of MCP server 'stub' is refused: not in \"allowedTools\" in {config_file}"
    ), calls["add"]


def test_allowed_tools_narrows_each_call_and_never_widens(bridge_factory, stub_ready):
    b = bridge_factory(name="narrowing", config={"mcpServers": {"stub": _ruled_stub()}})
    # add is refused by the config and tool_1 by its deny rule: naming them does not let them in.
    seen = _run(b, allowed_tools=["stub.echo", "stub.tool_*", "stub.add", "other.*"])
    visible = ["echo", "tool_0", "tool_2"]
    _assert_only(seen, visible)
    calls = seen["calls"]
    assert all(calls[t] == "ok" for t in visible), calls
    assert calls["add"][0] == "ToolDisabledError" and "not in \"allowedTools\"" in calls["add"][1], calls
    assert calls["tool_1"][0] == "ToolDisabledError", calls
    assert calls["write_note"][0] == "PolicyDeniedError", calls
    assert "outside this run's allowed_tools" in calls["write_note"][1], calls
    # The narrowing is the run's own: the next call without it sees what the config allows.
    again = _run(b)
    assert again["list_tools"] == ["echo", "tool_0", "tool_2", "write_note"], again
    assert again["calls"]["write_note"] == "ok", again["calls"]


def test_a_project_files_entry_only_tightens(tmp_path, bridge_factory, stub_ready, helpers):
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    entry = S.stub("proj")
    entry["disabledTools"] = ["add"]  # tightens: applies
    entry["callsPerMinute"] = 1000  # above MCP_BRIDGE_CALLS_PER_MINUTE: ignored
    cursor = repo / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    cursor.write_text(json.dumps({"mcpServers": {"proj": entry}}))
    env = {"MCP_BRIDGE_IMPORT_CLIENT_CONFIGS": "1", "MCP_BRIDGE_CALLS_PER_MINUTE": "2", **home_env(home)}
    state = tmp_path / "state"
    cenv = cli_env(state, **env)
    allowed = servers_cli(helpers.BRIDGE_BIN, cenv, repo, "--allow", "proj", "--yes")
    assert allowed.code == 0, allowed
    listing = servers_cli(helpers.BRIDGE_BIN, cenv, repo)
    assert any(
        "'proj': \"callsPerMinute\": 1000 is ignored: a project's file may only lower a limit" in n[1]
        and "MCP_BRIDGE_CALLS_PER_MINUTE is 2" in n[1]
        for n in listing.notes
    ), listing.stdout

    def in_repo(b):
        b.cwd = repo
        b.params.cwd = str(repo)

    b = bridge_factory(name="project-rules", env={**env, "MCP_BRIDGE_STATE_DIR": str(state)}, setup=in_repo)
    r = b.run(
        """
import json
from mcp import runtime

out = {"tools": [t["name"] for t in runtime.list_tools("proj")], "echo": [], "add": None}
try:
    await mcp_proj.add(a=1, b=2)
except AttributeError as e:
    out["add"] = "no proxy"
for i in range(3):
    try:
        out["echo"].append((await mcp_proj.echo(text=str(i)))["text"])
    except Exception as e:
        out["echo"].append([type(e).__name__, str(e)])
print(json.dumps(out))
""",
        servers=["proj"],
    )
    assert not r.is_error, str(r)
    got = json.loads(r.structured["stdout"].strip().splitlines()[-1])
    assert "add" not in got["tools"] and got["add"] == "no proxy", got
    # The setting's 2 calls a minute hold: the project's 1000 did not raise it.
    assert got["echo"][:2] == ["0", "1"], got
    assert got["echo"][2][0] == "LimitExceededError", got
    assert "MCP_BRIDGE_CALLS_PER_MINUTE=2" in got["echo"][2][1], got
    assert Path(cursor).exists()
