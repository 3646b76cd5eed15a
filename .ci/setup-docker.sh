#!/usr/bin/env bash
# Prepare dockerd (Debian's docker.io) next to podman for the end-to-end suite's second engine:
#   - installs docker.io if dockerd is missing, openssl if it is (the TLS engine test)
#   - starts a private dockerd (own socket, data and exec roots; no iptables, no bridge network:
#     sandboxes run with network none) unless it already answers
#   - loads the sandbox image from podman's store (built by setup-podman.sh) if docker lacks it
# Prints the DOCKER_HOST to use on stdout (last line). Idempotent. Run as root, after setup-podman.sh.
set -euo pipefail

IMAGE="mcp-code-bridge-sandbox:latest"
BASE="${MCP_CI_DOCKER_DIR:-/var/lib/mcp-code-bridge-ci/docker}"
SOCK="$BASE/docker.sock"
export DOCKER_HOST="unix://$SOCK"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'setup-docker.sh: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (sudo $0)"
# docker.io: dockerd and the CLI; openssl and Debian's python3: the certificates and the small
# image tests/e2e/test_remote_engine.py makes for its own TLS dockerd.
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
[ -x /usr/bin/python3 ] || missing+=(python3)  # that test's small image is Debian's python
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
fi
DOCKER=/usr/bin/docker  # Debian's client; another `docker` earlier on PATH may be a shim

mkdir -p "$BASE"
if ! "$DOCKER" version >/dev/null 2>&1; then
    log "starting dockerd on $SOCK"
    nohup dockerd --host "$DOCKER_HOST" --data-root "$BASE/data" --exec-root "$BASE/exec" \
        --pidfile "$BASE/docker.pid" --iptables=false --ip6tables=false --bridge=none \
        >"$BASE/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do
        "$DOCKER" version >/dev/null 2>&1 && break
        sleep 0.5
    done
    "$DOCKER" version >/dev/null 2>&1 || { tail -20 "$BASE/dockerd.log" >&2; die "dockerd did not start"; }
fi

recipe() { "$@" image inspect --format '{{ index .Config.Labels "mcp-code-bridge.image-recipe" }}' "$IMAGE" 2>/dev/null || true; }
if ! "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1 \
        || [ "$(recipe "$DOCKER")" != "$(recipe podman)" ]; then
    log "loading $IMAGE from podman into docker"
    podman save "localhost/$IMAGE" | "$DOCKER" load >&2
    "$DOCKER" tag "localhost/$IMAGE" "$IMAGE"
fi
log "dockerd ready with $IMAGE"
echo "$DOCKER_HOST"
