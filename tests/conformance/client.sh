#!/usr/bin/env bash
# The client under test for the official MCP conformance suite's client scenarios:
#
#   node .../conformance/dist/index.js client --scenario NAME --command 'tests/conformance/client.sh'
#
# The suite appends the scenario server's URL as the last argument and names the scenario in
# $MCP_CONFORMANCE_SCENARIO. This writes a bridge config with one remote server, `conformance`,
# at that URL, and runs `mcp-code-bridge exec` listing its tools and calling each one with
# arguments made from its input schema. Scenario flags: `elicitation-*` runs with
# --answer-defaults. $MCB_BRIDGE names the binary (default: target/debug/mcp-code-bridge);
# $MCB_CONFORMANCE_FLAGS adds exec flags.
set -euo pipefail

url="${!#}"
here="$(cd "$(dirname "$0")" && pwd)"
bridge="${MCB_BRIDGE:-$here/../../target/debug/mcp-code-bridge}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/none" "$work/state"
python3 -c 'import json, sys; print(json.dumps({"mcpServers": {"conformance": {"type": "http", "url": sys.argv[1]}}}))' \
    "$url" >"$work/servers.json"

flags=()
case "${MCP_CONFORMANCE_SCENARIO:-}" in
elicitation-*) flags+=(--answer-defaults) ;;
esac
# shellcheck disable=SC2206 # word splitting wanted
flags+=(${MCB_CONFORMANCE_FLAGS:-})

code='
from mcp import runtime

def sample(name, schema):
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    if kind in ("number", "integer"):
        return 2 + len(name)
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "x"

info = runtime.describe_server("conformance")
for tool in info["tools"]:
    schema = tool.get("input_schema") or {}
    props = schema.get("properties") or {}
    args = {k: sample(k, v) for k, v in props.items() if k in (schema.get("required") or [])}
    print("calling", tool["name"], args)
    print(await runtime.call_tool("conformance", tool["name"], args))
'
MCP_BRIDGE_CONFIG_DIR="$work/none" MCP_SERVERS_CONFIG="$work/servers.json" \
    MCP_BRIDGE_STATE_DIR="${MCB_CONFORMANCE_STATE:-$work/state}" \
    exec "$bridge" exec --servers conformance "${flags[@]}" "$code"
