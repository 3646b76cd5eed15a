"""Host-side helpers for the end-to-end tests (no tests here): the container engine's CLI, the
sandbox containers a bridge owns, and processes read from /proc.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any


def engine() -> str | None:
    """The container CLI the tests use to inspect sandboxes (podman preferred)."""
    wanted = (os.environ.get("MCP_BRIDGE_RUNTIME") or "").strip().lower()
    order = [wanted] if wanted in {"podman", "docker"} else ["podman", "docker"]
    for name in order:
        if shutil.which(name):
            return name
    return None


def poll(predicate: Callable[[], Any], timeout: float, interval: float = 0.25) -> Any:
    """Calls `predicate` until it returns a truthy value or `timeout` passes; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def containers(label_filters: dict[str, str], all_states: bool = True) -> list[str]:
    """Ids of containers whose labels match all of `label_filters`."""
    eng = engine()
    assert eng is not None
    cmd = [eng, "ps", "-q", "--no-trunc"]
    if all_states:
        cmd.append("-a")
    for k, v in label_filters.items():
        cmd += ["--filter", f"label={k}={v}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{' '.join(cmd)} failed: {out.stderr}"
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def bridge_containers(pid: int, running_only: bool = False) -> list[str]:
    """Sandbox containers labelled as owned by the bridge process `pid` on this host."""
    return containers({"mcp-code-bridge.pid": str(pid)}, all_states=not running_only)


def kill_container(cid: str) -> None:
    eng = engine()
    assert eng is not None
    out = subprocess.run([eng, "kill", cid], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{eng} kill {cid} failed: {out.stderr}"


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat[stat.rfind(")") + 2 :].split()[0]
    return state not in {"Z", "X"}


def find_pid_by_marker(marker: str, binary: str) -> int | None:
    """The pid of `<binary> run` whose environment holds E2E_MARKER=<marker>."""
    want_env = f"E2E_MARKER={marker}".encode()
    want_bin = os.path.realpath(binary)
    for pid, argv in processes():
        if len(argv) < 2 or argv[1] != b"run":
            continue
        if os.path.realpath(argv[0].decode(errors="replace")) != want_bin:
            continue
        if want_env in proc_environ(pid):
            return pid
    return None


def proc_environ(pid: int) -> list[bytes]:
    """The environment of `pid` as `KEY=VALUE` bytes (empty when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def processes():
    """Yield `(pid, argv)` for every process whose /proc entry is readable (argv as bytes)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        yield int(entry), argv


def pump(src: socket.socket, dst: socket.socket, seen: Callable[[bytes], None] | None = None) -> None:
    """Copies `src` to `dst` until either end closes (each chunk shown to `seen` first), then
    shuts both down: one direction of a test proxy between two sockets."""
    try:
        while data := src.recv(65536):
            if seen is not None:
                seen(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
