"""Helpers for the lifecycle tests (test_lifecycle_*.py; no tests here): warm a sandbox, find a
bridge's one running sandbox, find processes by command line, and the words of a state-reset
notice.
"""

from __future__ import annotations

import re

from helpers_host import processes

STATE_RESET = re.compile(r"state|variables|gone|afresh|restarted", re.I)


def proc_cmdlines_containing(needle: str) -> list[tuple[int, str]]:
    found = []
    for pid, argv in processes():
        cmd = b" ".join(argv).decode(errors="replace")
        if needle in cmd:
            found.append((pid, cmd.strip()))
    return found


def warm(bridge, name: str = "warm") -> None:
    """Starts the sandbox so later timings exclude the container start."""
    r = bridge.run(f"print('{name}')")
    assert not r.is_error and r.text.strip() == name, str(r)


def own_running_container(bridge, helpers) -> str:
    cids = helpers.poll(lambda: bridge.containers(running_only=True), timeout=10)
    assert len(cids) == 1, f"expected exactly one running sandbox for bridge {bridge.pid}, got {cids}"
    return cids[0]
