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
# Environment: MCB_SUITE (default bookworm), MCB_MIRROR (default: from /etc/apt/sources*,
# else http://deb.debian.org/debian), MCB_CACHE_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/mcp-code-bridge), MCB_PULL_TIMEOUT (seconds, default 20).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONTAINERFILE="$SCRIPT_DIR/Containerfile"
TAG="mcp-code-bridge-sandbox:latest"
ENGINE=""
MODE="auto"
REFRESH=0
SUITE="${MCB_SUITE:-bookworm}"
CACHE_DIR="${MCB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-code-bridge}"
PULL_TIMEOUT="${MCB_PULL_TIMEOUT:-20}"
# Offline image: debootstrap a minimal base, then let apt (in the chroot) add the Python stack.
# debootstrap's resolver always takes the first alternative of a dependency, and
# python3-fonttools' "python3-scipy | python3-munkres" then drags in scipy, pythran, gcc and
# boost (~700 MB). apt honours alternatives that are already requested, hence munkres/ufolib2.
BASE_PACKAGES="python3,ca-certificates"
APT_PACKAGES="python3-pandas python3-numpy python3-matplotlib python3-munkres python3-ufolib2"
# Bump when the offline recipe (trim, upgrade, packages) changes: invalidates cached rootfs.
RECIPE_VERSION=3

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

# Base image named by the Containerfile's FROM line.
BASE_IMAGE="$(awk 'toupper($1)=="FROM" {print $2; exit}' "$CONTAINERFILE")"
[ -n "$BASE_IMAGE" ] || die "no FROM line in $CONTAINERFILE"

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
    "$ENGINE" build -t "$TAG" -f "$CONTAINERFILE" "$SCRIPT_DIR"
}

# ---------------------------------------------------------------- offline build
# First URI of an apt source (one-line or deb822 format) that serves suite $1.
apt_source_for_suite() {
    local suite="$1" f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk -v s="$suite" '
            $1 == "deb" {
                i = 2
                if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == s) { print $i; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk -v s="$suite" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " s " ") && uris != "" && enabled !~ /^(no|false)$/) {
                    split(uris, u, " "); print u[1]; found = 1
                }
                types = ""; uris = ""; suites = ""; enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); if (found) exit; next }
            tolower($1) == "types:"   { $1 = ""; types = $0 }
            tolower($1) == "uris:"    { $1 = ""; uris = $0 }
            tolower($1) == "suites:"  { $1 = ""; suites = $0 }
            tolower($1) == "enabled:" { enabled = tolower($2) }
            END { if (!found) flush() }' "$f"
    done
}

usable_uri() { case "$1" in http://*|https://*|file:/*) return 0 ;; *) return 1 ;; esac; }

pick_mirror() {
    local suite="$1" fallback="$2" uri
    while read -r uri; do
        uri="${uri%/}"
        if usable_uri "$uri"; then printf '%s\n' "$uri"; return; fi
    done < <(apt_source_for_suite "$suite" 2>/dev/null || true)
    printf '%s\n' "$fallback"
}

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

# Remove what a sandbox never needs (the image only runs python3).
trim_rootfs() {
    local d="$1"
    rm -rf "$d"/var/cache/apt/archives/*.deb "$d"/var/cache/apt/archives/partial/* \
           "$d"/var/cache/apt/*.bin "$d"/var/lib/apt/lists/* \
           "$d"/var/cache/debconf/*-old "$d"/var/lib/dpkg/*-old \
           "$d"/var/log/* "$d"/tmp/* "$d"/var/tmp/* "$d"/root/.cache \
           "$d"/usr/share/doc/* "$d"/usr/share/man/* "$d"/usr/share/info/* \
           "$d"/usr/share/lintian "$d"/usr/share/linda "$d"/usr/share/bug "$d"/usr/share/doc-base
    find "$d"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
    # Test suites of the scientific stack (pandas/tests alone is tens of MB); not importable code.
    find "$d"/usr/lib/python3/dist-packages -depth -type d -name tests \
        \( -path '*/pandas/*' -o -path '*/numpy/*' -o -path '*/matplotlib/*' -o -path '*/mpl_toolkits/*' \) \
        -exec rm -rf {} + 2>/dev/null || true
    # Host identity that debootstrap copied in; the engine provides its own.
    : > "$d"/etc/resolv.conf
    : > "$d"/etc/hostname
    : > "$d"/etc/machine-id 2>/dev/null || true
    mkdir -p "$d"/workspace "$d"/tmp "$d"/var/tmp
    chmod 1777 "$d"/tmp "$d"/var/tmp
    chmod 1777 "$d"/workspace  # podman keeps an image dir's mode under a tmpfs mount
}

ROOTFS_DIR=""
PROC_MOUNTED=0
cleanup_rootfs() {
    if [ "$PROC_MOUNTED" = 1 ]; then umount "$ROOTFS_DIR/proc" 2>/dev/null || umount -l "$ROOTFS_DIR/proc" || true; PROC_MOUNTED=0; fi
    if [ -n "$ROOTFS_DIR" ] && [ -d "$ROOTFS_DIR" ]; then
        if grep -q " $ROOTFS_DIR/" /proc/self/mounts 2>/dev/null; then
            warn "something is still mounted under $ROOTFS_DIR; not deleting it"
        else
            rm -rf --one-file-system "$ROOTFS_DIR"
        fi
    fi
}

# debootstrap a rootfs and write it as a tarball to $1.
make_rootfs_tar() {
    local out="$1" mirror security debs
    mirror="${MCB_MIRROR:-$(pick_mirror "$SUITE" http://deb.debian.org/debian)}"
    security="$(pick_mirror "$SUITE-security" http://deb.debian.org/debian-security)"
    debs="$CACHE_DIR/debs"
    mkdir -p "$debs"
    # Same filesystem as the .deb cache, so packages are hard-linked, not copied.
    ROOTFS_DIR="$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")"
    trap cleanup_rootfs EXIT
    local t0=$SECONDS
    log "debootstrap $SUITE from $mirror (.deb cache: $debs)"
    if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" --cache-dir="$debs" \
            "$SUITE" "$ROOTFS_DIR" "$mirror" >&2; then
        [ -f "$ROOTFS_DIR/debootstrap/debootstrap.log" ] && tail -n 20 "$ROOTFS_DIR/debootstrap/debootstrap.log" >&2
        die "debootstrap failed (mirror $mirror)"
    fi
    log "debootstrap took $((SECONDS - t0)) s"

    # debootstrap only knows the release suite: add -updates and -security for apt.
    cat > "$ROOTFS_DIR/etc/apt/sources.list" <<EOF
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb $security $SUITE-security main
EOF
    t0=$SECONDS
    log "installing ${APT_PACKAGES// /, } with apt in the chroot (+ $SUITE-updates/-security)"
    mount -t proc proc "$ROOTFS_DIR/proc"
    PROC_MOUNTED=1
    local archives="$ROOTFS_DIR/var/cache/apt/archives" f
    find "$debs" -maxdepth 1 -name '*.deb' -exec ln -f -t "$archives" {} + 2>/dev/null || true
    local apt=(chroot "$ROOTFS_DIR" env DEBIAN_FRONTEND=noninteractive apt-get -q -y
               -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confold --no-install-recommends)
    "${apt[@]}" update >&2 || die "apt-get update failed in the chroot (mirrors $mirror, $security)"
    "${apt[@]}" upgrade >&2 || die "apt-get upgrade failed in the chroot"
    # shellcheck disable=SC2086
    "${apt[@]}" install $APT_PACKAGES >&2 || die "apt-get install failed in the chroot"
    for f in "$archives"/*.deb; do
        [ -e "$f" ] && [ ! -e "$debs/${f##*/}" ] && ln "$f" "$debs/" 2>/dev/null || true
    done
    "${apt[@]}" clean >&2 || true
    umount "$ROOTFS_DIR/proc"
    PROC_MOUNTED=0
    log "apt took $((SECONDS - t0)) s"

    log "trimming the root filesystem"
    trim_rootfs "$ROOTFS_DIR"
    chroot "$ROOTFS_DIR" env -i PATH=/usr/bin:/bin HOME=/tmp MPLCONFIGDIR=/tmp/matplotlib \
        python3 -c 'import pandas, numpy, matplotlib.pyplot' \
        || die "the new root filesystem cannot import pandas/numpy/matplotlib"
    rm -rf "${ROOTFS_DIR:?}"/tmp/* "$ROOTFS_DIR"/tmp/.[!.]* 2>/dev/null || true

    tar --numeric-owner -C "$ROOTFS_DIR" -cf "$out.tmp" .
    mv -f "$out.tmp" "$out"
    cleanup_rootfs
    ROOTFS_DIR=""
    trap - EXIT
}

build_offline() {
    [ "$(id -u)" = 0 ] || die "the offline build needs root (debootstrap): sudo $0 --offline --engine $ENGINE"
    ensure_debootstrap
    mkdir -p "$CACHE_DIR"
    local arch key tarball
    arch="$(dpkg --print-architecture 2>/dev/null || uname -m)"
    key="$(printf '%s|%s|%s|%s|%s' "$RECIPE_VERSION" "$SUITE" "$arch" "$BASE_PACKAGES $APT_PACKAGES" "${MCB_MIRROR:-}" \
        | sha256sum | cut -c1-12)"
    tarball="$CACHE_DIR/rootfs-$SUITE-$arch-$key.tar"
    if [ "$REFRESH" = 1 ] || [ ! -s "$tarball" ]; then
        rm -f "$CACHE_DIR"/rootfs-"$SUITE"-"$arch"-*.tar "$CACHE_DIR"/rootfs-*.tar.tmp
        make_rootfs_tar "$tarball"
    else
        log "reusing cached root filesystem $tarball (--refresh to rebuild it)"
    fi
    log "importing $tarball as $TAG with $ENGINE"
    "$ENGINE" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV HOME=/tmp' \
        --change 'ENV MPLCONFIGDIR=/tmp/matplotlib' \
        --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
        --change 'WORKDIR /workspace' \
        --change "LABEL mcp-code-bridge.image-recipe=$RECIPE_VERSION" \
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
