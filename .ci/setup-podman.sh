#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine (run as root) for mcp-code-bridge with rootful podman:
#   - installs podman, runc, debootstrap (+ uidmap, slirp4netns, fuse-overlayfs), and npm when missing
#   - /etc/containers/containers.conf: runtime = "runc" (crun fails on hybrid cgroup v1 hosts)
#     and default_ulimits below the host's hard limits (podman's defaults exceed them, so even a
#     plain `podman run` fails with "error setting rlimit type 6/7: operation not permitted")
#   - builds mcp-code-bridge-sandbox:latest with container/build.sh unless it exists
#   - smoke-tests a locked-down container
# Idempotent: safe to run again. Existing containers.conf settings are kept.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="mcp-code-bridge-sandbox:latest"
CONF=/etc/containers/containers.conf
PACKAGES=(podman runc debootstrap uidmap slirp4netns fuse-overlayfs ca-certificates curl)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'setup-podman.sh: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (sudo $0)"
command -v apt-get >/dev/null 2>&1 || die "this script is for Debian/Ubuntu (apt-get not found)"

# ---------------------------------------------------------------- packages
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
else
    log "packages already installed: ${PACKAGES[*]}"
fi
# The image's Node (run_typescript) comes from npm's node-linux-* package (container/rootfs.sh):
# npm from any source will do, so Debian's is installed only when there is none.
if ! command -v npm >/dev/null 2>&1; then
    log "installing nodejs npm (the image recipe fetches Node with npm)"
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm
fi

# ---------------------------------------------------------------- containers.conf
# set_toml_key FILE SECTION KEY VALUE MODE
#   MODE=force: replace an existing single-line KEY in [SECTION]; keep: leave an existing KEY.
#   Adds the key (and the section) when missing. Everything else in the file is preserved.
set_toml_key() {
    local file="$1" section="$2" key="$3" value="$4" mode="$5"
    awk -v sec="$section" -v key="$key" -v val="$value" -v mode="$mode" '
        function header(line,  h) {
            h = line; sub(/^[ \t]*\[[ \t]*/, "", h); sub(/[ \t]*\][ \t]*(#.*)?$/, "", h); return h
        }
        /^[ \t]*\[[^\[]/ {
            if (cur == sec && !done) { print key " = " val; done = 1 }
            cur = header($0); if (cur == sec) seen = 1
            print; next
        }
        cur == sec && !done && $0 ~ "^[ \t]*" key "[ \t]*=" {
            if (mode == "force") print key " = " val; else print
            done = 1; next
        }
        { print }
        END {
            if (!done) {
                if (!seen) printf "\n[%s]\n", sec
                print key " = " val
            }
        }' "$file"
}

mkdir -p /etc/containers
created=0
if [ ! -f "$CONF" ]; then
    printf '# mcp-code-bridge: created by .ci/setup-podman.sh\n' > "$CONF"
    created=1
fi
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
set_toml_key "$CONF" engine runtime '"runc"' force > "$tmp"
set_toml_key "$tmp" containers default_ulimits '["nofile=1024:1024", "nproc=4096:4096"]' keep > "$tmp.2"
mv -f "$tmp.2" "$tmp"
if cmp -s "$tmp" "$CONF"; then
    log "$CONF already selects runc and sets default_ulimits"
else
    if [ "$created" = 1 ]; then
        cat "$tmp" > "$CONF"
        log "created $CONF"
    else
        cp -p "$CONF" "$CONF.bak.$(date +%Y%m%d%H%M%S)"
        cat "$tmp" > "$CONF"
        log "updated $CONF (previous version kept as $CONF.bak.*)"
    fi
fi

# ---------------------------------------------------------------- checks
podman info >/dev/null || die "podman info failed"
runtime="$(podman info --format '{{.Host.OCIRuntime.Name}}')"
[ "$runtime" = runc ] || die "podman uses OCI runtime '$runtime', expected runc (check $CONF)"
log "podman $(podman version --format '{{.Client.Version}}') works (runtime $runtime, storage $(podman info --format '{{.Store.GraphDriverName}}'))"

want_recipe="$(sed -n 's/^RECIPE_VERSION=//p' "$REPO_DIR/container/rootfs.sh")"
have_recipe="$(podman image inspect --format '{{ index .Config.Labels "mcp-code-bridge.image-recipe" }}' "$IMAGE" 2>/dev/null || true)"
if [ -n "$have_recipe" ] && [ "$have_recipe" = "$want_recipe" ]; then
    log "image $IMAGE exists at recipe $have_recipe (rebuild: $REPO_DIR/container/build.sh --engine podman)"
else
    log "building $IMAGE (have recipe '${have_recipe:-none}', want $want_recipe)"
    "$REPO_DIR/container/build.sh" --engine podman
fi

log "smoke test: locked-down container imports the data-science stack"
out="$(podman run --rm --network none --read-only --cap-drop ALL \
    --security-opt no-new-privileges --user 65534:65534 \
    --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    --tmpfs /tmp:rw,noexec,nosuid,size=64m \
    "$IMAGE" python3 -c 'import pandas, numpy, matplotlib, scipy, sklearn, seaborn, openpyxl, PIL, cloudpickle; print("ok")')" \
    || die "smoke test container failed"
[ "$out" = ok ] || die "smoke test printed '$out', expected 'ok'"
podman run --rm --network none "$IMAGE" true || die "podman run without --ulimit fails (default_ulimits?)"
log "podman is ready for mcp-code-bridge (image $IMAGE)"
