"""Helpers for the proxying tests (test_proxy_*.py; no tests here): run code that must succeed and
read its JSON line, check the bridge still proxies, and read a stub server's start file.
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers_host import pid_alive


def stdout_of(result) -> str:
    return (result.structured or {}).get("stdout", "")


def ok_output(bridge, code: str, servers: list[str] | None = None, timeout: int | None = None) -> str:
    """Runs code that must succeed; returns its stdout."""
    wait = max(90.0, timeout + 60.0) if timeout else 90.0  # the client waits longer than the run may take
    r = bridge.run(code, servers=servers, timeout=timeout, wait=wait)
    assert not r.is_error and r.status == "ok", f"run failed:\n{r}\n{bridge.stderr_tail()}"
    return stdout_of(r)


def json_of(bridge, code: str, servers: list[str] | None = None, timeout: int | None = None):
    """Runs code whose last stdout line is JSON; returns it parsed."""
    out = ok_output(bridge, code, servers=servers, timeout=timeout)
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, f"no output from:\n{code}"
    return json.loads(lines[-1])


def assert_alive(bridge, server: str = "stub") -> None:
    """The bridge process lives and still proxies a call to `server`."""
    assert bridge.pid is not None and pid_alive(bridge.pid), f"bridge died\n{bridge.stderr_tail()}"
    got = json_of(
        bridge,
        "import json\nprint(json.dumps(await mcp_servers[%r].echo(text='still here')))" % server,
        servers=[server],
    )
    assert got == {"text": "still here"}


def start_lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def start_pids(path: Path) -> list[int]:
    return [int(line.split()[1]) for line in start_lines(path)]
