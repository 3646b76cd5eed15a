"""Server discovery and docs (GUIDE.md, "Your MCP servers" and "Sandbox API"): the three config sources with provenance,
broken files, lazy start and background indexing, fuzzy search across servers never started,
tool docs, and a constant `tools/list` however many servers are configured.

Checked both through `mcp-code-bridge servers` (the CLI listing) and from sandbox code through
`mcp.runtime`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import cli_env_for as _cli_env
from conftest import home_env as _home_env
from conftest import pid_alive as _pid_alive
from conftest import processes, servers_cli

import servers as S

# Tool order as the stub lists them (docs and listings keep the server's order).
STUB_ORDER = ["echo", "add", "slow", "crash", "big", "fail", "whoami"]
STUB_INSTRUCTIONS = "A stub MCP server for mcp-code-bridge tests."
ADD_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "number", "description": "First addend"},
        "b": {"type": "number", "description": "Second addend"},
    },
    "required": ["a", "b"],
    "additionalProperties": False,
}
ADD_DESCRIPTION = 'Add two numbers and return their sum as JSON text {"sum": a + b}.'


# --- helpers ------------------------------------------------------------------------------------


def _stdout(result) -> str:
    return (result.structured or {}).get("stdout", "")


def _json(bridge, code: str, servers: list[str] | None = None, timeout: int | None = None):
    """Runs code that must succeed and whose last stdout line is JSON; returns it parsed."""
    r = bridge.run(code, servers=servers, timeout=timeout)
    assert not r.is_error and r.status == "ok", f"run failed:\n{r}\n{bridge.stderr_tail()}"
    lines = [line for line in _stdout(r).splitlines() if line.strip()]
    assert lines, f"no output from:\n{code}"
    return json.loads(lines[-1])


def _servers_cli_rows(bin_path: str, env: dict[str, str], cwd: Path):
    """`mcp-code-bridge servers` as (exit code, {name: (transport, source, state)}, problems, stdout)."""
    out = servers_cli(bin_path, env, cwd)
    return out.code, {n: r[:3] for n, r in out.rows.items()}, out.problems, out.stdout


def _start_pids(path: Path) -> list[int]:
    try:
        return [int(line.split()[1]) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _stub_pids_with_start_file(start_file: Path) -> list[int]:
    """Live stub-mcp processes whose environment names `start_file` (any pid, not only recorded ones)."""
    want = f"STUB_START_FILE={start_file.resolve()}".encode()
    found = []
    for pid, argv in processes():
        if not argv[0].endswith(b"stub-mcp"):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if want in env and _pid_alive(pid):
            found.append(pid)
    return found


# --- config sources ------------------------------------------------------------------------------


def test_three_config_sources_with_provenance(tmp_path, bridge_factory, helpers, stub_ready):
    mcps, home, proj = tmp_path / "mcps", tmp_path / "home", tmp_path / "proj"
    for d in (home / ".cursor", proj):
        d.mkdir(parents=True)
    # 1. the ~/MCPs-style dir
    S.write_config(mcps, {"alpha": S.stub("alpha"), "shared": S.stub("mcps-shared")})
    # 2. MCP_SERVERS_CONFIG
    extra = tmp_path / "extra" / "more-servers.json"
    extra.parent.mkdir()
    extra.write_text(json.dumps(S.config({"extra-srv": S.stub("extra-srv")})))
    # 3. client configs (opt-in): Cursor and Claude Code (user scope + project scope)
    cursor = home / ".cursor" / "mcp.json"
    cursor.write_text(json.dumps(S.config({"cursor-srv": S.stub("cursor-srv"), "shared": S.stub("cursor-shared")})))
    claude = home / ".claude.json"
    claude.write_text(
        json.dumps(
            {
                "numStartups": 3,
                "mcpServers": {"claude-srv": S.stub("claude-srv")},
                "projects": {str(proj.resolve()): {"mcpServers": {"claude-proj": S.stub("claude-proj")}}},
            }
        )
    )
    env = {
        "MCP_BRIDGE_CONFIG_DIR": str(mcps),
        "MCP_SERVERS_CONFIG": str(extra),
        "MCP_BRIDGE_IMPORT_CLIENT_CONFIGS": "1",
        **_home_env(home),
    }
    expected = {
        "alpha": ("stdio", str(mcps / "alpha.json")),
        "shared": ("stdio", str(mcps / "shared.json")),  # ~/MCPs wins the name clash
        "extra-srv": ("stdio", str(extra)),
        "cursor-srv": ("stdio", str(cursor)),
        "claude-srv": ("stdio", str(claude)),
    }

    # The CLI listing (run from the project dir: Claude Code's project scope applies there).
    listing = servers_cli(helpers.BRIDGE_BIN, _cli_env(tmp_path / "cli-state", **env), proj.resolve())
    rows, out = listing.rows, listing.stdout
    assert {n: r[:2] for n, r in rows.items()} == {**expected, "claude-proj": ("stdio", str(claude))}, out
    assert all(r[2].strip() for r in rows.values()), f"state column missing:\n{out}"
    assert rows["claude-proj"][3] == "Claude Code, local scope" and rows["alpha"][3] == "own config", out
    # A name defined twice is a note naming both files, not a problem: the exit code is 0.
    assert listing.code == 0 and listing.problems == [], out
    clash = [n for n in listing.notes if n[0] == str(cursor)]
    assert clash and "shared" in clash[0][1] and str(mcps / "shared.json") in clash[0][1], out

    # Client configs are read only on opt-in.
    no_opt_in = {k: v for k, v in env.items() if k != "MCP_BRIDGE_IMPORT_CLIENT_CONFIGS"}
    _, rows2, _, out2 = _servers_cli_rows(helpers.BRIDGE_BIN, _cli_env(tmp_path / "cli-state", **no_opt_in), proj.resolve())
    assert sorted(rows2) == ["alpha", "extra-srv", "shared"], out2

    # The same from sandbox code, and every source's servers actually work.
    b = bridge_factory(name="three-sources", env=env)
    try:
        got = _json(
            b,
            """
import json
from mcp import runtime
d = {"servers": await runtime.discovered_servers(detailed=True), "errors": await runtime.config_problems()}
who = {n: (await mcp_servers[n].whoami())["name"] for n in ["alpha", "shared", "extra-srv", "cursor-srv", "claude-srv"]}
print(json.dumps({"d": d, "sync": {"servers": runtime.discovered_servers_sync(True), "errors": runtime.config_problems_sync()}, "who": who,
                  "names": await runtime.list_servers(), "names_sync": runtime.list_servers_sync()}))
""",
            servers=["alpha", "shared", "extra-srv", "cursor-srv", "claude-srv"],
        )
    finally:
        b.close()
    servers = {s["name"]: s for s in got["d"]["servers"]}
    assert {n: (s["transport"], s["source"]) for n, s in servers.items()} == expected, got["d"]
    assert all(s["disabled"] is False for s in servers.values())
    assert all(s["state"] == "running" for s in servers.values()), servers  # all loaded in this run
    assert got["sync"]["servers"] == got["d"]["servers"]
    assert got["d"]["errors"] == [], got["d"]["errors"]  # the name clash is a note, not a problem
    assert got["who"] == {
        "alpha": "alpha",
        "shared": "mcps-shared",
        "extra-srv": "extra-srv",
        "cursor-srv": "cursor-srv",
        "claude-srv": "claude-srv",
    }
    assert got["names"] == got["names_sync"] == sorted(expected)


def test_broken_files_are_reported_and_the_rest_work(tmp_path, bridge_factory, helpers, stub_ready):
    mcps = tmp_path / "mcps"
    S.write_config(mcps, {"good": S.stub("good")})
    (mcps / "broken.json").write_text('{"mcpServers": {"x": {"command": "y",}')
    (mcps / "mixed.json").write_text(
        json.dumps(
            S.config(
                {
                    "wrongtype": {"command": str(S.stub_bin()), "args": "--name wrongtype"},
                    "good2": S.stub("good2"),
                }
            )
        )
    )
    (mcps / "pigeon.json").write_text(json.dumps(S.config({"pigeon": {"type": "carrier-pigeon", "url": "http://x"}})))
    (mcps / "notobj.json").write_text(json.dumps({"mcpServers": ["not", "an", "object"]}))
    (mcps / "self.json").write_text(json.dumps(S.config({"me": {"command": helpers.BRIDGE_BIN, "args": ["run"]}})))
    (mcps / "README.txt").write_text("not a config file: ignored")
    expected_problems = [  # (file name, server or None, words in the reason)
        ("broken.json", None, ["invalid JSON"]),
        ("mixed.json", "wrongtype", ['"args" must be an array of strings']),
        ("notobj.json", None, ['"mcpServers" must be an object']),
        ("pigeon.json", "pigeon", ["unknown transport", "carrier-pigeon"]),
        ("self.json", "me", ["MCP_BRIDGE_ALLOW_SELF_SERVER"]),  # would launch this bridge itself
    ]

    def check(problems: list[tuple[str, str]], where: str) -> None:
        assert len(problems) == len(expected_problems), f"{where}: {problems}"
        for fname, server, words in expected_problems:
            hits = [
                (src, msg)
                for src, msg in problems
                if str(mcps / fname) in src and (server is None or server in src or server in msg)
            ]
            assert hits, f"{where}: no problem reported for {fname}: {problems}"
            assert all(w in hits[0][1] for w in words), f"{where}: {hits[0]} lacks {words}"

    rc, rows, problems, out = _servers_cli_rows(
        helpers.BRIDGE_BIN, _cli_env(tmp_path / "cli-state", MCP_BRIDGE_CONFIG_DIR=str(mcps)), tmp_path
    )
    assert sorted(rows) == ["good", "good2"], out
    assert rows["good2"][:2] == ("stdio", str(mcps / "mixed.json")), out
    check(problems, "`servers` output")

    b = bridge_factory(name="broken-files", env={"MCP_BRIDGE_CONFIG_DIR": str(mcps)})
    try:
        got = _json(
            b,
            """
import json
from mcp import runtime
d = {"servers": runtime.discovered_servers_sync(True), "errors": runtime.config_problems_sync()}
print(json.dumps({"d": d, "good": await mcp_good.echo(text="ok"), "good2": await mcp_good2.add(a=1, b=2)}))
""",
            servers=["good", "good2"],
        )
        assert [s["name"] for s in got["d"]["servers"]] == ["good", "good2"], got
        check([(e["source"], e["message"]) for e in got["d"]["errors"]], "discovered_servers()['errors']")
        assert got["good"] == {"text": "ok"} and got["good2"] == {"sum": 3}
        r = b.run("print(1)", servers=["pigeon"])  # a skipped entry is not configured
        assert r.is_error and "pigeon" in r.text and "good" in r.text, str(r)
    finally:
        b.close()


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
    assert full[0]["signature"] == "tool_0(query: str, limit: int = 10) -> dict", full
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
            "signature": "add(a: float, b: float) -> dict",
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
        "echo": "echo(text: str) -> dict",
        "add": "add(a: float, b: float) -> dict",
        "slow": "slow(seconds: float) -> dict",
        "crash": "crash() -> dict",
        "big": "big(bytes: int) -> dict",
        "fail": "fail(message: str) -> dict",
        "whoami": "whoami() -> dict",
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
