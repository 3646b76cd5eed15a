#!/usr/bin/env bash
# The install paths of issue 16, each checked from outside the source tree:
#   wheel  maturin builds the release wheel (bin bindings: the `mcp-code-bridge` binary only); uv installs
#          it into a fresh venv and `uvx --from <wheel>` runs it, both offline; pip installs it into a
#          plain venv with no index.
#   cargo  `cargo package`, then `cargo install --locked` from the unpacked .crate: exactly Cargo.lock's
#          versions, one binary installed.
# Every installed command must print its version and run `print(6*7)` in the sandbox (the image must
# exist: .ci/setup-podman.sh builds it) from a directory outside the checkout, with the checkout hidden
# under an empty tmpfs where `unshare` allows it, so no file of the source tree can be read at run time.
# Both release builds share one cargo target dir (CARGO_TARGET_DIR, default <repo>/target): the install
# reuses the dependencies the wheel build compiled. Prints the wall and CPU time of every step at the end.
#
# MCP_CI_PACKAGING_QUICK=1 (.ci/run sets it) builds both with the release profile's optimizer turned
# down through cargo's environment: no LTO, opt-level 0, 256 codegen units. The commands stay the
# ones users run (`maturin build --release`, `cargo install --locked`) and Cargo.toml's
# [profile.release] (fat LTO, one codegen unit), what users get, is unchanged; what this script
# checks is the install paths, not the optimizer, and the two fat-LTO builds were most of CI's
# packaging time.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
if [ "${MCP_CI_PACKAGING_QUICK:-0}" = 1 ]; then
    export CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256
    build_kind="quick: no LTO, opt-level 0"
    echo "-- MCP_CI_PACKAGING_QUICK=1: release builds with $build_kind (Cargo.toml's profile is unchanged)"
else
    build_kind="fat LTO"
fi

work="$(mktemp -d -t mcb-packaging.XXXXXX)"
# Cleans up, and says so loudly when any step failed (set -e stops at the first one). fd 4 is the
# script's stderr: a step may fail while `timed` has redirected fd 2.
exec 4>&2
trap 'rc=$?; rm -rf "$work"; [ "$rc" = 0 ] || printf "packaging.sh: FAILED (exit %s)\n" "$rc" >&4' EXIT
outside="$work/outside"  # the working directory of every run: not in the checkout
mkdir -p "$outside"
version="$(cargo metadata --no-deps --format-version 1 --offline \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["packages"][0]["version"])')"

die() { printf 'packaging.sh: FAILED: %s\n' "$*" >&2; exit 1; }
timings=()
# timed LABEL CMD...: runs CMD and records its wall time and CPU time (user + system, children
# included) under LABEL. CPU time says more than wall time on a machine shared with other jobs.
timed() {
    local label="$1" t0=$SECONDS TIMEFORMAT='%U %S' cpu
    shift
    { time "$@" 2>&3; } 3>&2 2>"$work/time"
    cpu="$(awk '{printf "%d", $1 + $2}' "$work/time")"
    timings+=("$(printf '%5d s wall %5d s CPU  %s' $((SECONDS - t0)) "$cpu" "$label")")
}

# isolated CMD...: runs CMD from $outside with the checkout hidden (an empty tmpfs mounted over it in a
# private mount namespace), or only from $outside where no mount namespace can be made.
hide=0
if unshare --mount --propagation private true >/dev/null 2>&1; then
    hide=1
else
    echo "-- unshare --mount is not permitted here: runs happen outside the checkout, which stays visible"
fi
isolated() {
    if [ "$hide" = 1 ]; then
        (cd "$outside" && unshare --mount --propagation private -- \
            sh -c 'mount -t tmpfs -o size=1m,mode=0555 none "$1" && shift && exec "$@"' sh "$REPO" "$@")
    else
        (cd "$outside" && "$@")
    fi
}

# check_runs LABEL CMD...: CMD --version prints the crate's version, and CMD exec "print(6*7)" prints
# exactly 42 and exits 0.
check_runs() {
    local label="$1" out rc
    shift
    out="$(isolated "$@" --version)" || die "$label: --version exited $?"
    [ "$out" = "mcp-code-bridge $version" ] || die "$label: --version printed '$out', expected 'mcp-code-bridge $version'"
    rc=0
    out="$(isolated "$@" exec 'print(6*7)' 2>"$work/stderr")" || rc=$?
    if [ "$rc" != 0 ] || [ "$out" != 42 ]; then
        cat "$work/stderr" >&2
        die "$label: exec 'print(6*7)' printed '$out' with exit code $rc, expected '42' and 0"
    fi
    echo "-- $label: '$*' prints its version and runs code in the sandbox from $outside"
}

echo "-- tools: maturin and uv (PyPI)"
if ! python3 -m maturin --version >/dev/null 2>&1 || ! python3 -m uv --version >/dev/null 2>&1; then
    python3 -m pip install -q --disable-pip-version-check 'maturin>=1.9,<2' uv
fi
uv=(python3 -m uv)  # pip's script directory may not be on PATH
uvx=(python3 -m uv tool run)  # what the `uvx` command is

# ---------------------------------------------------------------- wheel
echo "-- wheel: maturin build --release --locked"
timed "wheel: maturin build --release ($build_kind)" \
    python3 -m maturin build --release --locked --out "$work/wheels" 2>&1
wheels=("$work"/wheels/*.whl)
[ ${#wheels[@]} = 1 ] && [ -f "${wheels[0]}" ] || die "expected one wheel in $work/wheels, found: ${wheels[*]}"
wheel="${wheels[0]}"
case "$(basename "$wheel")" in
    "mcp_code_bridge-$version-py3-none-"*.whl) ;;
    *) die "wheel name $(basename "$wheel") is not mcp_code_bridge-$version-py3-none-<platform>.whl" ;;
esac
scripts="$(python3 -m zipfile -l "$wheel" | awk '$1 ~ /\.data\/scripts\// {print $1}')"
[ "$scripts" = "mcp_code_bridge-$version.data/scripts/mcp-code-bridge" ] \
    || die "the wheel must carry exactly one script, mcp-code-bridge; it has: ${scripts:-none}"
echo "-- wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"

# uv, offline, with its own cache and tool dirs: nothing comes from an index or an earlier run.
export UV_OFFLINE=1 UV_PYTHON_DOWNLOADS=never UV_NO_CONFIG=1
export UV_CACHE_DIR="$work/uv-cache" UV_TOOL_DIR="$work/uv-tools" UV_TOOL_BIN_DIR="$work/uv-bin"
uv_install() {
    "${uv[@]}" venv -q --python python3 "$work/venv" && "${uv[@]}" pip install -q --python "$work/venv/bin/python" "$wheel"
}
timed "wheel: uv venv + uv pip install (offline)" uv_install 2>&1
[ -x "$work/venv/bin/mcp-code-bridge" ] || die "uv pip install put no mcp-code-bridge in $work/venv/bin"
check_runs "uv venv" "$work/venv/bin/mcp-code-bridge"

timed "wheel: uvx --from <wheel> (offline, cold cache)" check_runs "uvx" "${uvx[@]}" --from "$wheel" mcp-code-bridge

pip_install() {
    python3 -m venv "$work/pip-venv" \
        && "$work/pip-venv/bin/python" -m pip install -q --no-index --disable-pip-version-check "$wheel"
}
timed "wheel: python3 -m venv + pip install --no-index" pip_install 2>&1
check_runs "pip venv" "$work/pip-venv/bin/mcp-code-bridge"

# ---------------------------------------------------------------- cargo
echo "-- cargo: cargo package (the install below builds it: that is the verification)"
timed "cargo: cargo package --no-verify" cargo package --locked --no-verify --allow-dirty 2>&1
crate="$CARGO_TARGET_DIR/package/mcp-code-bridge-$version.crate"
[ -f "$crate" ] || die "cargo package wrote no $crate"
mkdir -p "$work/unpacked"
tar -xzf "$crate" -C "$work/unpacked"
src="$work/unpacked/mcp-code-bridge-$version"
for f in container/Containerfile container/build.sh entrypoint/__main__.py Cargo.lock; do
    [ -f "$src/$f" ] || die "the .crate lacks $f"
done
[ ! -e "$src/tests" ] || die "the .crate carries tests/ (and with it the stub-mcp helper)"

# The packaged lock pins the same versions as the repository's Cargo.lock.
locked_versions() { awk '/^name = /{n=$3} /^version = /{print n, $3}' "$1" | sort -u; }
if ! diff <(locked_versions Cargo.lock) <(locked_versions "$src/Cargo.lock") >"$work/lock.diff"; then
    cat "$work/lock.diff" >&2
    die "the .crate's Cargo.lock pins other versions than Cargo.lock (< repo, > crate)"
fi
cp "$src/Cargo.lock" "$work/Cargo.lock.packaged"

echo "-- cargo: cargo install --locked --path <unpacked .crate> (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
timed "cargo: cargo install --locked from the .crate ($build_kind, shared target dir)" \
    cargo install --locked --path "$src" --root "$work/cargo-root" 2>&1
cmp -s "$src/Cargo.lock" "$work/Cargo.lock.packaged" || die "cargo install --locked changed the packaged Cargo.lock"
installed="$(ls "$work/cargo-root/bin")"
[ "$installed" = mcp-code-bridge ] || die "cargo install must install mcp-code-bridge alone; it installed: $installed"
check_runs "cargo install" "$work/cargo-root/bin/mcp-code-bridge"

echo "-- packaging: wall time per step"
printf '%s\n' "${timings[@]}"
