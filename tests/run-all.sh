#!/usr/bin/env bash
# Runs every test: Rust unit + integration, the entrypoint's Python unit tests, and the
# end-to-end suite (official MCP Python client → mcp-code-bridge → real podman/docker).
# With CI=true, end-to-end tests FAIL (never skip) when no container runtime or image is usable.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test"
cargo test --all-targets 2>&1

echo "== entrypoint unit tests (python3 -m unittest)"
python3 -m unittest discover -s entrypoint/tests -t . 2>&1

echo "== end-to-end (pytest, real container runtime)"
cargo build --bins 2>&1
python3 -m pytest tests/e2e -q -p no:cacheprovider
