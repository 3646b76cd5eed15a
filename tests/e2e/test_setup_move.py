"""`setup --import-servers --move` and `setup --undo` with the real binary on a HOME holding every
client's file as the client writes it (tests/fixtures/setup/*/before), plus a real server (the stub)
in Claude Code's file: after the move the client's file has lost the copied entries and the bridge
serves them (a run calls the moved server); after the undo every client file is byte for byte what
it was before the move, and the copies are gone from ~/MCPs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers_cli import cli_env_for

from servers import stub_bin

pytestmark = pytest.mark.host_only  # the subject is the clients' files and the bridge's config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "setup"
CLIENT_FILES = (
    ".claude.json",
    ".cursor/mcp.json",
    ".config/Code/User/mcp.json",
    ".config/Claude/claude_desktop_config.json",
    ".codeium/windsurf/mcp_config.json",
)


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for case in ("claude-code", "cursor", "vscode", "claude-desktop", "windsurf"):
        shutil.copytree(FIXTURES / case / "before", home, dirs_exist_ok=True)
    claude = home / ".claude.json"
    entry = json.dumps({"type": "stdio", "command": str(stub_bin()), "args": []})
    claude.write_text(claude.read_text().replace('    "docs": {', f'    "stub": {entry},\n    "docs": {{', 1))
    return home


def _setup(helpers, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helpers.BRIDGE_BIN, "setup", *args], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_move_serves_the_servers_through_the_bridge_and_undo_restores_every_file(
        helpers, tmp_path, bridge_factory):
    home = _home(tmp_path)
    env = cli_env_for(tmp_path / "state", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                      MCP_BRIDGE_CONFIG_DIR=str(home / "MCPs"))
    registered = _setup(helpers, env, "--yes")
    assert registered.returncode == 0, registered.stdout + registered.stderr
    before = {f: (home / f).read_bytes() for f in CLIENT_FILES}
    mcps_before = sorted(p.name for p in (home / "MCPs").iterdir())

    moved = _setup(helpers, env, "--import-servers", "--move", "--yes")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    claude = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert "stub" not in claude and "docs" not in claude, claude
    assert {"code", "github", "notes"} <= set(claude), claude  # the bridge and what was not copied
    assert "not copied: 'github' (Claude Code)" in moved.stdout and "it stays in the client" in moved.stdout

    # The bridge now serves the moved server from ~/MCPs.
    bridge = bridge_factory(env={"HOME": str(home), "MCP_BRIDGE_CONFIG_DIR": str(home / "MCPs")}, name="moved")
    try:
        r = bridge.run("print(await mcp_stub.echo(text='served after the move'))", servers=["stub"], timeout=60)
        assert not r.is_error and "served after the move" in r.text, r.text
    finally:
        bridge.close()

    undone = _setup(helpers, env, "--undo", "--yes")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    for f in CLIENT_FILES:
        assert (home / f).read_bytes() == before[f], f
    assert sorted(p.name for p in (home / "MCPs").iterdir()) == mcps_before
    again = _setup(helpers, env, "--undo", "--yes")
    assert again.returncode == 0 and again.stdout.startswith("Nothing to undo"), again.stdout
