"""Where servers come from (GUIDE.md, "Your MCP servers"): the three config sources with provenance,
and broken files reported while the rest keep working.

Checked both through `mcp-code-bridge servers` (the CLI listing) and from sandbox code through
`mcp.runtime`.
"""

from __future__ import annotations

import json

import pytest
from helpers_cli import cli_env_for as _cli_env
from helpers_cli import home_env as _home_env
from helpers_cli import servers_cli
from helpers_discovery import json_of as _json
from helpers_discovery import servers_cli_rows as _servers_cli_rows

import servers as S

pytestmark = pytest.mark.host_only  # config sources and provenance: host-side

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
