"""The official MCP conformance suite's `auth` client scenarios (@modelcontextprotocol/conformance
0.1.16, `--suite auth`), with the bridge as the client under test: the suite runs
tests/conformance/auth_client.py, which lists and calls the tools with `mcp-code-bridge exec`:
`exec` signs in by itself (its `$BROWSER` follows the redirects), again for a step-up.

The suite and its Node 22 are installed by tests/conformance/install.sh (helpers_conformance);
not installable, the tests skip (fail under CI=true). The suite runs once, its scenarios in
parallel; each scenario is a test of its own here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers_conformance import install_suite

pytestmark = pytest.mark.host_only

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "tests" / "conformance" / "auth_client.py"
SCENARIOS = [
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
    "auth/pre-registration",
]


@pytest.fixture(scope="module")
def summary(stub_ready) -> dict[str, tuple[int, int]]:
    """{scenario: (passed, failed)} from one run of `--suite auth`."""
    node, suite = install_suite()
    p = subprocess.run([node, suite, "client", "--suite", "auth", "--timeout", "60000",
                        "--command", f"python3 {CLIENT}"], capture_output=True, text=True, timeout=900)
    found = {}
    for m in re.finditer(r"^[^\w]*\s*(auth/[\w-]+): (\d+) passed, (\d+) failed", p.stdout + p.stderr, re.M):
        found[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    assert found, f"no suite summary:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return found


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_auth_scenario_passes_with_the_bridge_as_the_client(summary, scenario):
    assert scenario in summary, f"{scenario} did not run: {sorted(summary)}"
    passed, failed = summary[scenario]
    assert failed == 0 and passed > 0, f"{scenario}: {passed} passed, {failed} failed"
