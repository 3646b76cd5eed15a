"""The official MCP conformance suite for the tests that run it: installed once by
tests/conformance/install.sh (pinned version, Node 22 from npm) into $MCB_CONFORMANCE, else
~/.cache/mcp-code-bridge/conformance. Not installable: the test fails under CI, else skips."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "conformance"


def install_suite() -> tuple[str, str]:
    """(node, the suite's entry point), installing them when missing."""
    cache = os.environ.get("MCB_CONFORMANCE") or str(Path.home() / ".cache" / "mcp-code-bridge" / "conformance")
    p = subprocess.run([str(HARNESS / "install.sh"), cache], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        msg = f"the conformance suite could not be installed:\n{p.stderr[-3000:]}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    node, entry = p.stdout.split()
    return node, entry
