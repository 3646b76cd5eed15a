#!/usr/bin/env bash
# Runs every test: Rust unit + integration, the entrypoint's Python unit tests, and the
# end-to-end suite (official MCP Python client → mcp-code-bridge → real podman/docker).
# With CI=true, end-to-end tests FAIL (never skip) when no container runtime or image is usable.
# Prints each stage's wall time at the end, also when one fails; under .ci/run its rows go into CI's
# table instead (.ci/stages.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=.ci/stages.sh
. .ci/stages.sh
stages_init "tests: "
# A hang must fail fast with a stack dump, never stall CI: every stage has a time limit
# (SIGABRT + PYTHONFAULTHANDLER prints every Python thread's stack; pytest-timeout per test).
export PYTHONFAULTHANDLER=1

# What the tests need, installed when missing (idempotent): the container engine and sandbox image
# (as root on Debian/Ubuntu), the Python test dependencies, and the real MCP servers from npm/PyPI.
# A sandbox image of an older recipe (container/rootfs.sh's RECIPE_VERSION) is rebuilt too.
stage "setup: what is missing (engine, image, pip, npm)"
want_recipe="$(sed -n 's/^RECIPE_VERSION=//p' container/rootfs.sh)"
have_recipe="$(podman image inspect --format '{{ index .Config.Labels "mcp-code-bridge.image-recipe" }}' \
    mcp-code-bridge-sandbox:latest 2>/dev/null || true)"
if [ "$(id -u)" = 0 ] && [ "$have_recipe" != "$want_recipe" ]; then
    echo "-- setup: podman and the sandbox image (.ci/setup-podman.sh)"
    bash .ci/setup-podman.sh
fi
if ! python3 -c 'import pytest, pytest_timeout, mcp, mcp_server_time, yaml' >/dev/null 2>&1; then
    echo "-- setup: Python test dependencies (tests/e2e/requirements.txt)"
    python3 -m pip install -q --disable-pip-version-check -r tests/e2e/requirements.txt
fi
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
bash tests/e2e/install-servers.sh >/dev/null

stage "cargo test --all-targets"
timeout -k 10 1200 cargo test --all-targets 2>&1

stage "entrypoint unit tests (python3 -m unittest)"
timeout -s ABRT -k 10 300 python3 -m unittest discover -s entrypoint/tests -t . 2>&1

stage "end-to-end on podman (pytest, every test)"
# `cargo test --all-targets` above built the two binaries the suite runs, target/debug/mcp-code-bridge
# and target/debug/stub-mcp: an integration test gets every binary, and the dev-dependency on this
# package turns test-stub on. A `cargo build --bins --features test-stub` here would build them again
# without the dev-dependencies' features (tokio's test-util), recompiling tokio and every crate above it.
for bin in mcp-code-bridge stub-mcp; do
    [ -x "target/debug/$bin" ] || { echo "cargo test built no target/debug/$bin" >&2; exit 1; }
done
timeout -s ABRT -k 10 1500 python3 -m pytest tests/e2e -q -p no:cacheprovider --timeout=300

# The same suite on docker when a dockerd is given (.ci/setup-docker.sh prints one); CI needs it.
if [ -n "${E2E_DOCKER_HOST:-}" ]; then
    stage "end-to-end on docker (pytest -m engine)"
    echo "-- docker: $E2E_DOCKER_HOST"
    # Only the tests whose outcome depends on the engine (marked `engine`: the sandbox container,
    # the frame channel, files, mounts, snapshots, lifecycle, confinement, engine loss). Those marked
    # host_only (their subject is on the host: policy, config, CLI, discovery, proxying, serve's
    # front) and own_engine (they start the engine they test) ran above; tests/e2e/engine_markers.py makes
    # every test carry exactly one of the three.
    MCP_BRIDGE_RUNTIME=docker DOCKER_HOST="$E2E_DOCKER_HOST" \
        timeout -s ABRT -k 10 1500 python3 -m pytest tests/e2e -q -p no:cacheprovider --timeout=300 \
        -m engine
elif [ "${CI:-}" = true ]; then
    echo "CI=true but E2E_DOCKER_HOST is not set: the docker run of the suite is required" >&2
    exit 1
else
    echo "== (docker run of the suite skipped: set E2E_DOCKER_HOST, see .ci/setup-docker.sh)"
fi
stage_end
