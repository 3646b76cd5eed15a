"""Helpers for the server discovery and docs tests (test_discovery_*.py; no tests here): the stub
server's tools as documented, running code that prints a JSON line, the `servers` listing, and the
stub processes a start file names.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers_cli import servers_cli
from helpers_host import pid_alive, proc_environ, processes

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


def stdout_of(result) -> str:
    return (result.structured or {}).get("stdout", "")


def json_of(bridge, code: str, servers: list[str] | None = None, timeout: int | None = None):
    """Runs code that must succeed and whose last stdout line is JSON; returns it parsed."""
    r = bridge.run(code, servers=servers, timeout=timeout)
    assert not r.is_error and r.status == "ok", f"run failed:\n{r}\n{bridge.stderr_tail()}"
    lines = [line for line in stdout_of(r).splitlines() if line.strip()]
    assert lines, f"no output from:\n{code}"
    return json.loads(lines[-1])


def servers_cli_rows(bin_path: str, env: dict[str, str], cwd: Path):
    """`mcp-code-bridge servers` as (exit code, {name: (transport, source, state)}, problems, stdout)."""
    out = servers_cli(bin_path, env, cwd)
    return out.code, {n: r[:3] for n, r in out.rows.items()}, out.problems, out.stdout


def start_pids(path: Path) -> list[int]:
    try:
        return [int(line.split()[1]) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def stub_pids_with_start_file(start_file: Path) -> list[int]:
    """Live stub-mcp processes whose environment names `start_file` (any pid, not only recorded ones)."""
    want = f"STUB_START_FILE={start_file.resolve()}".encode()
    found = []
    for pid, argv in processes():
        if not argv[0].endswith(b"stub-mcp"):
            continue
        if want in proc_environ(pid) and pid_alive(pid):
            found.append(pid)
    return found
