#!/usr/bin/env bash
# Build the mcp-code-bridge sandbox image (mcp-code-bridge-sandbox:latest).
#
# Usage: container/build.sh [--engine podman|docker] [--offline|--registry] [--refresh] [--tag TAG]
#
#   --engine E   podman or docker (default: podman if installed, else docker)
#   --registry   build container/Containerfile (needs the python:3.12-slim base image)
#   --offline    build a Debian image with debootstrap from the apt mirror (needs root)
#                default: registry build if the base image can be pulled, else offline
#   --refresh    offline mode: re-run debootstrap instead of reusing the cached root
#                filesystem (downloaded .debs are still reused)
#   --tag TAG    image tag (default mcp-code-bridge-sandbox:latest; podman adds localhost/)
#
# Environment: MCB_BASE (registry base image, default: the Containerfile's), MCB_SUITE (default
# bookworm), MCB_MIRROR (default: from /etc/apt/sources*, else http://deb.debian.org/debian),
# MCB_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/mcp-code-bridge), MCB_PULL_TIMEOUT
# (seconds, default 20). The offline root filesystem is made by container/rootfs.sh.
#
# An installed binary carries both recipes: `mcp-code-bridge image build` does the same without
# the source tree, and a bridge builds a missing image by itself.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONTAINERFILE="$SCRIPT_DIR/Containerfile"
TAG="mcp-code-bridge-sandbox:latest"
ENGINE=""
MODE="auto"
REFRESH=0
CACHE_DIR="${MCB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-code-bridge}"
PULL_TIMEOUT="${MCB_PULL_TIMEOUT:-20}"
# The recipe version lives in rootfs.sh (and the Containerfile's LABEL; a test keeps them equal).
RECIPE_VERSION="$(sed -n 's/^RECIPE_VERSION=//p' "$SCRIPT_DIR/rootfs.sh")"
NODE_VERSION="$(sed -n 's/^NODE_VERSION=//p' "$SCRIPT_DIR/rootfs.sh")"
BASE_ARG="${MCB_BASE:-}"

log()  { printf '==> %s\n' "$*" >&2; }
warn() { printf 'build.sh: warning: %s\n' "$*" >&2; }
die()  { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --engine) [ $# -ge 2 ] || die "--engine needs a value"; ENGINE="$2"; shift 2 ;;
        --engine=*) ENGINE="${1#--engine=}"; shift ;;
        --offline) MODE=offline; shift ;;
        --registry) MODE=registry; shift ;;
        --refresh) REFRESH=1; shift ;;
        --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG="$2"; shift 2 ;;
        --tag=*) TAG="${1#--tag=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

if [ -z "$ENGINE" ]; then
    if command -v podman >/dev/null 2>&1; then ENGINE=podman
    elif command -v docker >/dev/null 2>&1; then ENGINE=docker
    else die "neither podman nor docker is installed (Debian: apt-get install podman runc)"
    fi
fi
case "$ENGINE" in
    podman|docker) command -v "$ENGINE" >/dev/null 2>&1 || die "$ENGINE is not installed" ;;
    *) die "--engine must be podman or docker, not '$ENGINE'" ;;
esac

# Base image: MCB_BASE, else the Containerfile's `ARG BASE=` default.
BASE_IMAGE="${BASE_ARG:-$(sed -n 's/^ARG BASE=//p' "$CONTAINERFILE")}"
[ -n "$BASE_IMAGE" ] || die "no ARG BASE= line in $CONTAINERFILE"

image_id() { "$ENGINE" image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

# ---------------------------------------------------------------- registry build
base_image_available() {
    if "$ENGINE" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        log "base image $BASE_IMAGE is present locally"
        return 0
    fi
    # Quick reachability probe, so an unreachable registry costs seconds, not minutes.
    local reachable=0
    if command -v curl >/dev/null 2>&1; then
        local code
        code="$(curl -s -o /dev/null -m 5 -w '%{http_code}' https://registry-1.docker.io/v2/ 2>/dev/null || true)"
        [ -n "$code" ] && [ "$code" != 000 ] && reachable=1
    fi
    log "pulling base image $BASE_IMAGE"
    if [ "$reachable" = 1 ]; then
        "$ENGINE" pull "$BASE_IMAGE" >&2 && return 0
    else
        # Docker Hub did not answer; a configured mirror might. Give the pull a short chance.
        timeout "$PULL_TIMEOUT" "$ENGINE" pull "$BASE_IMAGE" >&2 && return 0
    fi
    return 1
}

build_registry() {
    log "building $TAG from $CONTAINERFILE with $ENGINE"
    "$ENGINE" build --build-arg "BASE=$BASE_IMAGE" -t "$TAG" -f "$CONTAINERFILE" "$SCRIPT_DIR"
}

# ---------------------------------------------------------------- offline build
ensure_debootstrap() {
    command -v debootstrap >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing debootstrap with apt-get"
        DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >&2 \
            || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >&2; } \
            || die "could not install debootstrap"
    else
        die "debootstrap is not installed; run: sudo apt-get install debootstrap"
    fi
}

# The root filesystem comes from rootfs.sh (the same recipe the binary carries); the image config
# below matches what `mcp-code-bridge image build` gives a loaded root filesystem
# (src/image/recipe.rs checks it).
build_offline() {
    [ "$(id -u)" = 0 ] || die "the offline build needs root (debootstrap): sudo $0 --offline --engine $ENGINE"
    ensure_debootstrap
    local tarball
    # shellcheck disable=SC2046
    tarball="$(MCB_CACHE_DIR="$CACHE_DIR" bash "$SCRIPT_DIR/rootfs.sh" $([ "$REFRESH" = 1 ] && echo --refresh) | tail -n 1)"
    [ -s "$tarball" ] || die "container/rootfs.sh made no root filesystem"
    log "importing $tarball as $TAG with $ENGINE"
    "$ENGINE" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV HOME=/tmp' \
        --change 'ENV MPLCONFIGDIR=/tmp/matplotlib' \
        --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
        --change 'WORKDIR /workspace' \
        --change "LABEL mcp-code-bridge.image-recipe=$RECIPE_VERSION" \
        --change "LABEL mcp-code-bridge.image-source=debian" \
        --change "LABEL mcp-code-bridge.node=$NODE_VERSION" \
        --change 'CMD ["python3"]' \
        "$tarball" "$TAG" >/dev/null
}

# ---------------------------------------------------------------- main
OLD_ID="$(image_id "$TAG")"
case "$MODE" in
    registry) build_registry ;;
    offline)  build_offline ;;
    auto)
        if base_image_available; then
            build_registry
        else
            log "base image $BASE_IMAGE cannot be pulled; falling back to the offline build"
            build_offline
        fi ;;
esac

NEW_ID="$(image_id "$TAG")"
[ -n "$NEW_ID" ] || die "image $TAG was not created"
# Drop the image this build replaced, if nothing else uses it.
if [ -n "$OLD_ID" ] && [ "$OLD_ID" != "$NEW_ID" ]; then
    "$ENGINE" rmi "$OLD_ID" >/dev/null 2>&1 || true
fi
SIZE="$("$ENGINE" image inspect --format '{{.Size}}' "$TAG")"
log "built $TAG ($ENGINE, image ${NEW_ID#sha256:}): $(awk -v b="$SIZE" 'BEGIN {printf "%.0f MB", b / 1000000}')"
