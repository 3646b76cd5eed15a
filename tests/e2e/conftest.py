"""End-to-end fixtures: real `mcp-code-bridge` processes driven by the official MCP Python SDK.

The driver (`Bridge`, a bridge process with an initialized client session on a background thread)
is in bridge_driver.py, the host-side helpers (engine CLI, containers, /proc) in helpers_host.py,
the CLI helpers in helpers_cli.py; this file holds the fixtures every test module may ask for, and
registers shared_bridges.py (module-scoped bridges shared by the files of one theme) and
engine_markers.py (every test says whether the docker pass runs it).

Each bridge gets a fresh temporary MCP_BRIDGE_STATE_DIR and MCP_BRIDGE_CONFIG_DIR (so the user's
~/MCPs never leaks in), and a unique E2E_MARKER environment variable used to find its pid in /proc
(the SDK spawns the process itself and does not expose it).

Environment
-----------
MCP_BRIDGE_BIN   path of the bridge binary (default: <repo>/target/debug/mcp-code-bridge)
MCP_BRIDGE_IMAGE sandbox image checked for presence (default mcp-code-bridge-sandbox:latest)
MCP_BRIDGE_RUNTIME  podman or docker: the engine the tests inspect (default: podman if present)
CI               when true, an unusable container runtime FAILS the tests instead of skipping
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from bridge_driver import BRIDGE_BIN, HOSTNAME, IMAGE, Bridge, McpError, base_env
from helpers_host import bridge_containers, containers, engine, kill_container, pid_alive, poll

import servers as servers_helpers  # noqa: E402 - tests/e2e/servers.py

pytest_plugins = ["shared_bridges", "engine_markers"]


# --------------------------------------------------------------------------------------------
# Container runtime checks


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _runtime_problem() -> str | None:
    """None when a runtime binary, a working engine and the sandbox image are all there."""
    eng = engine()
    if eng is None:
        return "no container runtime: neither `podman` nor `docker` is on PATH"
    try:
        if eng == "podman":
            probe = subprocess.run([eng, "image", "exists", IMAGE], capture_output=True, text=True, timeout=60)
        else:
            probe = subprocess.run([eng, "image", "inspect", IMAGE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{eng}` is not usable: {exc}"
    if probe.returncode != 0:
        detail = (probe.stderr or "").strip()
        return (
            f"sandbox image {IMAGE!r} is not present in {eng}"
            + (f" ({detail})" if detail else "")
            + "; build it with container/build.sh"
        )
    return None


@pytest.fixture(scope="session")
def runtime_ready() -> str:
    """Fails (CI=true) or skips (otherwise) every e2e test when the sandbox cannot run here."""
    if not (os.path.isfile(BRIDGE_BIN) and os.access(BRIDGE_BIN, os.X_OK)):
        # A missing binary is a build problem, never an environment limitation: always fail.
        pytest.fail(
            f"bridge binary not found at {BRIDGE_BIN}: run `cargo build` or set MCP_BRIDGE_BIN",
            pytrace=False,
        )
    problem = _runtime_problem()
    if problem is not None:
        msg = f"e2e tests need a container runtime with the sandbox image: {problem}"
        if _truthy(os.environ.get("CI")):
            pytest.fail(f"{msg} (CI is set, so this is a failure, not a skip)", pytrace=False)
        pytest.skip(msg)
    eng = engine()
    assert eng is not None
    return eng


@pytest.fixture(autouse=True)
def _require_runtime(runtime_ready: str) -> None:
    """Every test in this directory needs the runtime; never skip silently under CI."""


# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def helpers():
    """Plain helpers for the test modules (a fixture, so no test imports conftest by name)."""
    import types

    return types.SimpleNamespace(
        BRIDGE_BIN=BRIDGE_BIN,
        IMAGE=IMAGE,
        HOSTNAME=HOSTNAME,
        McpError=McpError,
        poll=poll,
        containers=containers,
        bridge_containers=bridge_containers,
        kill_container=kill_container,
        pid_alive=pid_alive,
        engine=engine(),
    )


@pytest.fixture(scope="session")
def e2e_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def bridge_factory(e2e_tmp: Path, runtime_ready: str):
    """Starts bridges on demand: `bridge_factory(env={...})`. All are closed at session end.

    Prefer the scoped fixtures below; call `.close()` yourself to end one early.
    """
    started: list[Bridge] = []

    def make(
        env: dict[str, str] | None = None,
        name: str = "bridge",
        config: dict | None = None,
        setup: Callable[[Bridge], None] | None = None,
    ) -> Bridge:
        """`setup(bridge)` runs before the process starts (to write files into its cwd, say)."""
        b = Bridge(e2e_tmp, env=env, name=name)
        if config is not None:
            (b.dir / "mcps" / "servers.json").write_text(json.dumps(config))
        if setup is not None:
            setup(b)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.close()


@pytest.fixture
def bridge(bridge_factory, request):
    """A fresh bridge for one test."""
    b = bridge_factory(name=request.node.name[:40])
    yield b
    b.close()


@pytest.fixture(scope="session")
def cli_env(e2e_tmp: Path) -> dict[str, str]:
    """Environment for `mcp-code-bridge exec` runs."""
    d = Path(tempfile.mkdtemp(prefix="cli-", dir=e2e_tmp))
    (d / "state").mkdir()
    (d / "mcps").mkdir()
    return base_env(d)


@pytest.fixture
def cli_cwd(tmp_path: Path) -> Path:
    """An empty working directory for one `mcp-code-bridge exec` run."""
    d = tmp_path / "cwd"
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def real_ready() -> None:
    """The real third-party servers (install-servers.sh): a missing install fails under CI=true,
    else skips."""
    import servers as S

    if not S.real_servers_installed():
        msg = (
            f"the real MCP servers are not installed in {S.servers_dir()} (or node / mcp-server-time "
            "is missing): run `bash tests/e2e/install-servers.sh`"
        )
        if _truthy(os.environ.get("CI")):
            pytest.fail(f"{msg} (CI is set, so this is a failure, not a skip)", pytrace=False)
        pytest.skip(msg)


@pytest.fixture(scope="session")
def stub_ready() -> Path:
    """The stub server binary; a missing one is a build problem (always a failure)."""
    b = servers_helpers.stub_bin()
    if not (b.is_file() and os.access(b, os.X_OK)):
        pytest.fail(f"stub-mcp not found at {b}: run `cargo build --bins --features test-stub` (or set MCP_STUB_BIN)", pytrace=False)
    return b
