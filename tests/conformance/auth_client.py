#!/usr/bin/env python3
"""The conformance suite's client command for its `auth` scenarios (@modelcontextprotocol/conformance
0.1.16), with the bridge as the client: writes a bridge config naming the scenario's server (the
last argument; a pre-registered client from MCP_CONFORMANCE_CONTEXT when the scenario gives one),
and runs `mcp-code-bridge exec` listing the tools and calling each: `exec` signs in by itself
through `$BROWSER` (which follows the redirects: the suite's authorization server approves at
once). A call refused later for more scopes (a step-up: 403 insufficient_scope) signs in again
inside the same `exec` and is made once more, as every refusal of a live connection's token is
(the suite counts every authorization attempt against its retry limit of three). Exit 0 when the
run did.

Environment: MCP_BRIDGE_BIN (default <repo>/target/debug/mcp-code-bridge)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = os.environ.get("MCP_BRIDGE_BIN") or str(REPO / "target" / "debug" / "mcp-code-bridge")
BROWSER = REPO / "tests" / "e2e" / "oauth_browser.py"
# The Client ID Metadata Document URL the suite's basic-cimd scenario expects.
CIMD = "https://conformance-test.local/client-metadata.json"
CODE = """from mcp import runtime
tools = runtime.list_tools("conformance")
print("tools:", [t["name"] for t in tools])
for t in tools:
    print(t["name"], "->", await runtime.call_tool("conformance", t["name"], {}))
"""


def main() -> int:
    url = sys.argv[-1]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    work = Path(tempfile.mkdtemp(prefix="conformance-auth-"))
    (work / "mcps").mkdir()
    entry = {"type": "http", "url": url}
    if context.get("client_id"):
        entry["oauth"] = {"clientId": context["client_id"]}
        if context.get("client_secret"):
            entry["oauth"]["clientSecret"] = context["client_secret"]
    (work / "mcps" / "s.json").write_text(json.dumps({"mcpServers": {"conformance": entry}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    env.update(MCP_BRIDGE_CONFIG_DIR=str(work / "mcps"), MCP_BRIDGE_STATE_DIR=str(work / "state"),
               MCP_BRIDGE_OAUTH_CLIENT_METADATA_URL=CIMD, MCP_BRIDGE_LOGIN_TIMEOUT="20",
               BROWSER=str(BROWSER))
    if os.environ.get("MCP_BRIDGE_RUNTIME"):
        env["MCP_BRIDGE_RUNTIME"] = os.environ["MCP_BRIDGE_RUNTIME"]

    def run(*args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=60)
        sys.stderr.write(f"$ mcp-code-bridge {args[0]} -> {p.returncode}\n{p.stdout}{p.stderr}")
        return p

    p = run("exec", "--servers", "conformance", CODE)
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
