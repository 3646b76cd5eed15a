"""Helpers for running `mcp-code-bridge` commands in the end-to-end tests (no tests here): the
environment of one CLI run, a temporary HOME, and `servers` with its listing parsed.
"""

from __future__ import annotations

import os
import subprocess
import types
from pathlib import Path


def cli_env_for(state_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for one CLI run: the caller's, minus MCP_BRIDGE_* (but the runtime and image
    choice), with `state_dir` and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_") and k != "MCP_SERVERS_CONFIG"}
    for keep in ("MCP_BRIDGE_RUNTIME", "MCP_BRIDGE_IMAGE"):
        if os.environ.get(keep):
            env[keep] = os.environ[keep]
    env["MCP_BRIDGE_STATE_DIR"] = str(state_dir)
    env.update(extra)
    return env


def home_env(home: Path) -> dict[str, str]:
    """HOME pointed at a temp dir; XDG dirs pinned to the real ones so a rootless container
    runtime keeps finding its storage and configuration."""
    real = Path.home()
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME") or str(real / ".config"),
        "XDG_DATA_HOME": os.environ.get("XDG_DATA_HOME") or str(real / ".local" / "share"),
    }


def servers_cli(bin_path: str, env: dict[str, str], cwd: Path, *args: str) -> types.SimpleNamespace:
    """Runs `mcp-code-bridge servers ARGS`. Returns `code`, `rows` {name: (transport, source,
    state, origin)}, `notes` and `problems` [(source, message)], `stdout`, `stderr`."""
    p = subprocess.run([bin_path, "servers", *args], env=env, cwd=str(cwd), capture_output=True, text=True,
                       timeout=60)
    out = types.SimpleNamespace(code=p.returncode, rows={}, notes=[], problems=[], stdout=p.stdout,
                                stderr=p.stderr)
    for line in p.stdout.splitlines():
        cols = line.split("\t")
        if cols[0] in ("problem", "note") and len(cols) >= 3:
            (out.problems if cols[0] == "problem" else out.notes).append((cols[1], "\t".join(cols[2:])))
        elif len(cols) == 5:
            out.rows[cols[0]] = tuple(cols[1:])
    assert p.returncode in (0, 1, 3), f"`servers` exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return out
