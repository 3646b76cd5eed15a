"""Helpers for the sandbox confinement tests (test_security_*.py; no tests here): run a probe that
prints one JSON line, and find a bridge's sandbox container and its engine `inspect` document.
"""

from __future__ import annotations

import json
import subprocess


def probe(bridge, code: str, timeout: int | None = None) -> dict:
    """Runs `code`, which must print exactly one JSON object as its last stdout line."""
    r = bridge.run(code, timeout=timeout)
    assert not r.is_error, str(r)
    lines = r.text.strip().splitlines()
    assert lines, str(r)
    return json.loads(lines[-1])


def inspect(helpers, cid: str) -> dict:
    """The engine's `inspect` document for container `cid`."""
    out = subprocess.run([helpers.engine, "inspect", cid], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{helpers.engine} inspect {cid} failed: {out.stderr}"
    return json.loads(out.stdout)[0]


def sandbox_of(bridge, helpers) -> tuple[str, dict]:
    """Starts (if needed) the bridge's sandbox and returns its container id and inspect document."""
    r = bridge.run("print('sandbox up')")
    assert r.text.strip().endswith("sandbox up"), str(r)
    cids = bridge.containers(running_only=True)
    assert len(cids) == 1, f"expected one running sandbox for bridge {bridge.pid}: {cids}"
    return cids[0], inspect(helpers, cids[0])
