#!/usr/bin/env bash
# Installs the real third-party MCP servers the end-to-end tests talk to (idempotent).
#
#   tests/e2e/install-servers.sh [DIR]
#
# DIR defaults to $MCB_TEST_SERVERS, else ~/.cache/mcp-code-bridge/test-servers.
# npm packages go to DIR/node_modules (pinned versions below; skipped when already installed at
# those versions); mcp-server-time is pip-installed into the python3 on PATH (or $PYTHON).
# Prints the commands that run each server. tests/e2e/servers.py builds config entries from them.
set -euo pipefail

DIR="${1:-${MCB_TEST_SERVERS:-$HOME/.cache/mcp-code-bridge/test-servers}}"
PYTHON="${PYTHON:-python3}"

# Pinned versions (bump together and re-run the e2e suite).
NPM_VERSION="2026.8.31"
NPM_PACKAGES=(server-everything server-memory server-filesystem)
TIME_VERSION="2026.10.19"

mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

# --- npm servers -------------------------------------------------------------------------------
installed_version() { # $1 = package short name
    local pj="$DIR/node_modules/@modelcontextprotocol/$1/package.json"
    [[ -f "$pj" ]] && node -p "require(process.argv[1]).version" "$pj" 2>/dev/null || true
}

missing=()
for p in "${NPM_PACKAGES[@]}"; do
    if [[ "$(installed_version "$p")" != "$NPM_VERSION" ]] ||
        [[ ! -f "$DIR/node_modules/@modelcontextprotocol/$p/dist/index.js" ]]; then
        missing+=("@modelcontextprotocol/$p@$NPM_VERSION")
    fi
done
if ((${#missing[@]})); then
    echo "installing into $DIR: ${missing[*]}" >&2
    start=$(date +%s)
    npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "${missing[@]}" >&2
    echo "npm install took $(($(date +%s) - start)) s" >&2
else
    echo "npm servers already installed in $DIR at $NPM_VERSION" >&2
fi

# --- mcp-server-time (PyPI) ----------------------------------------------------------------------
have_time="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("mcp-server-time"))' 2>/dev/null || true)"
if [[ "$have_time" != "$TIME_VERSION" ]]; then
    echo "installing mcp-server-time==$TIME_VERSION with $PYTHON" >&2
    start=$(date +%s)
    "$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore "mcp-server-time==$TIME_VERSION" >&2
    echo "pip install took $(($(date +%s) - start)) s" >&2
else
    echo "mcp-server-time $TIME_VERSION already installed for $PYTHON" >&2
fi

# --- the MCP conformance suite and Node 22 (tests/e2e/test_conformance_client.py) ----------------
# Into $MCB_CONFORMANCE, else ~/.cache/mcp-code-bridge/conformance, where the test looks.
bash "$(dirname "$0")/../conformance/install.sh" >/dev/null

# --- how to run them -----------------------------------------------------------------------------
M="$DIR/node_modules/@modelcontextprotocol"
cat <<EOF
# everything (echo, get-sum, ...; stdio is the default transport):
node $M/server-everything/dist/index.js
# memory (knowledge graph; point MEMORY_FILE_PATH at a per-test file, else it writes into its package dir):
MEMORY_FILE_PATH=/tmp/some-test/memory.jsonl node $M/server-memory/dist/index.js
# filesystem (allowed directories are arguments; at least one, or the client must support roots):
node $M/server-filesystem/dist/index.js /path/to/allowed/dir
# time (--local-timezone is optional; without it the local zone is detected via tzlocal):
$PYTHON -m mcp_server_time --local-timezone UTC
EOF
