"""End-to-end fixtures: real `mcp-code-bridge` processes driven by the official MCP Python SDK.

Design
------
Every bridge is driven from a background thread that owns an asyncio event loop, the SDK's
`stdio_client` and an initialized `ClientSession`. Tests talk to it synchronously through a
`Bridge` object (`bridge.run("print(1)")`). This keeps the SDK's anyio task groups entered and
exited in one task (no cross-task cancel-scope trouble with module-scoped async fixtures), lets a
test start a call and act while it is in flight (`bridge.run_async(...)` returns a
concurrent.futures.Future), and makes teardown deterministic.

Each bridge gets a fresh temporary MCP_BRIDGE_STATE_DIR and MCP_BRIDGE_CONFIG_DIR (so the user's
~/MCPs never leaks in), and a unique E2E_MARKER environment variable used to find its pid in /proc
(the SDK spawns the process itself and does not expose it).

Environment
-----------
MCP_BRIDGE_BIN   path of the bridge binary (default: <repo>/target/debug/mcp-code-bridge)
MCP_BRIDGE_IMAGE sandbox image checked for presence (default mcp-code-bridge-sandbox:latest)
CI               when true, an unusable container runtime FAILS the tests instead of skipping
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import servers as servers_helpers  # noqa: E402 - tests/e2e/servers.py

try:  # SDK v2 name; v2 takes read timeouts as float seconds
    from mcp.shared.exceptions import MCPError as McpError

    def _read_timeout(seconds: float) -> Any:
        return seconds

except ImportError:  # SDK v1 name; v1 takes read timeouts as timedelta
    from datetime import timedelta

    from mcp.shared.exceptions import McpError  # type: ignore[no-redef]

    def _read_timeout(seconds: float) -> Any:
        return timedelta(seconds=seconds)

REPO_ROOT = Path(__file__).resolve().parents[2]
BRIDGE_BIN = os.path.abspath(os.environ.get("MCP_BRIDGE_BIN") or str(REPO_ROOT / "target" / "debug" / "mcp-code-bridge"))
IMAGE = os.environ.get("MCP_BRIDGE_IMAGE") or "mcp-code-bridge-sandbox:latest"
HOSTNAME = socket.gethostname()

# Generous but bounded waits (seconds).
CALL_WAIT = 90.0  # one tools/call, including a cold sandbox start
START_WAIT = 60.0  # process spawn + MCP initialize
CLOSE_WAIT = 30.0  # client teardown (the SDK closes stdin, waits 2 s, then kills the tree)



# --------------------------------------------------------------------------------------------
# Container runtime checks


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def engine() -> str | None:
    """The container CLI the tests use to inspect sandboxes (podman preferred)."""
    wanted = (os.environ.get("MCP_BRIDGE_RUNTIME") or "").strip().lower()
    order = [wanted] if wanted in {"podman", "docker"} else ["podman", "docker"]
    for name in order:
        if shutil.which(name):
            return name
    return None


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
# Helpers


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
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if len(argv) < 2 or argv[1] != b"run":
                continue
            if os.path.realpath(argv[0].decode(errors="replace")) != want_bin:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if want_env in env:
            return int(entry)
    return None


# --------------------------------------------------------------------------------------------
# The bridge driver


@dataclass
class Result:
    """One run_python result, flattened for assertions."""

    text: str
    is_error: bool
    structured: dict[str, Any] | None
    raw: Any = field(repr=False)
    elapsed: float = 0.0

    @property
    def status(self) -> str | None:
        return (self.structured or {}).get("status")

    def __repr__(self) -> str:  # pytest's "where" lines
        return f"Result(status={self.status!r}, is_error={self.is_error}, text={self.text[:60]!r}...)"

    def __str__(self) -> str:  # used in assertion messages
        s = json.dumps(self.structured, indent=1)[:3000] if self.structured is not None else None
        return (
            f"is_error={self.is_error} elapsed={self.elapsed:.2f}s\n"
            f"--- text ({len(self.text)} chars) ---\n{self.text[:3000]}\n--- structured ---\n{s}"
        )


def _flatten(raw: Any, elapsed: float) -> Result:
    texts = [getattr(c, "text", "") for c in raw.content if getattr(c, "type", None) == "text"]
    structured = getattr(raw, "structured_content", None)
    if structured is None:
        structured = getattr(raw, "structuredContent", None)
    is_error = getattr(raw, "is_error", None)
    if is_error is None:
        is_error = getattr(raw, "isError", False)
    return Result(text=texts[0] if texts else "", is_error=bool(is_error), structured=structured, raw=raw, elapsed=elapsed)


class Bridge:
    """A live `mcp-code-bridge run` process with an initialized MCP client session."""

    def __init__(self, tmp_root: Path, env: dict[str, str] | None = None, name: str = "bridge"):
        self.marker = uuid.uuid4().hex
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_root))
        (self.dir / "state").mkdir()
        (self.dir / "mcps").mkdir()
        # The bridge's working directory: private and empty, so nothing it (or the podman service
        # and conmon it starts) drops into its cwd lands in the repository; tests inspect it.
        self.cwd = self.dir / "cwd"
        self.cwd.mkdir()
        self.stderr_path = self.dir / "bridge-stderr.log"
        full_env = _base_env(self.dir)
        full_env["E2E_MARKER"] = self.marker
        full_env.update(env or {})
        self.env = full_env
        self.params = StdioServerParameters(command=BRIDGE_BIN, args=["run"], env=full_env, cwd=str(self.cwd))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.session: ClientSession | None = None
        self.pid: int | None = None
        self.notifications: list[Any] = []  # every server notification, in arrival order
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._failure: BaseException | None = None
        self._errlog = open(self.stderr_path, "w")
        self._thread = threading.Thread(target=self._thread_main, name=f"e2e-{name}", daemon=True)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Bridge:
        self._thread.start()
        if not self._ready.wait(START_WAIT):
            raise RuntimeError(f"bridge did not initialize within {START_WAIT} s\n{self.stderr_tail()}")
        if self._failure is not None or self.session is None:
            raise RuntimeError(f"bridge failed to start: {self._failure!r}\n{self.stderr_tail()}")
        self.pid = poll(lambda: find_pid_by_marker(self.marker, BRIDGE_BIN), timeout=10, interval=0.05)
        if self.pid is None:
            raise RuntimeError("could not find the bridge pid in /proc")
        return self

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported through _failure
            if self._failure is None:
                self._failure = exc
        finally:
            self._ready.set()
            self._done.set()

    async def _main(self) -> None:
        try:
            async with stdio_client(self.params, errlog=self._errlog) as (read, write):
                async with ClientSession(read, write, message_handler=self._on_message) as session:
                    self.init_result = await session.initialize()
                    self._stop = asyncio.Event()
                    self.loop = asyncio.get_running_loop()
                    self.session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001
            # After a deliberate SIGKILL the transport may end with an error; record it only.
            self._failure = exc
            raise

    async def _on_message(self, message: Any) -> None:
        if not isinstance(message, Exception):
            self.notifications.append(message)

    def close(self) -> None:
        """Closes the session: the SDK closes the bridge's stdin, waits, then kills the tree."""
        if self.loop is not None and self._stop is not None and not self._done.is_set():
            try:
                self.loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass  # loop already closed
        self._done.wait(CLOSE_WAIT)
        self._thread.join(timeout=5)
        try:
            self._errlog.close()
        except OSError:
            pass

    def sigkill(self) -> None:
        """Kills the bridge process hard (its children are not signalled)."""
        assert self.pid is not None
        os.kill(self.pid, signal.SIGKILL)

    @property
    def closed(self) -> bool:
        return self._done.is_set()

    # -- requests -----------------------------------------------------------------------------

    def submit(self, factory: Callable[[ClientSession], Any]) -> concurrent.futures.Future:
        """Schedules `factory(session)` (a coroutine) on the bridge's loop."""
        assert self.loop is not None and self.session is not None, "bridge not started"
        return asyncio.run_coroutine_threadsafe(factory(self.session), self.loop)

    def request(self, factory: Callable[[ClientSession], Any], wait: float = CALL_WAIT) -> Any:
        fut = self.submit(factory)
        try:
            return fut.result(wait)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise AssertionError(f"no answer from the bridge within {wait} s\n{self.stderr_tail()}") from None

    def run_async(
        self, code: str, timeout: int | None = None, wait: float = CALL_WAIT, servers: list[str] | None = None
    ) -> concurrent.futures.Future:
        """Starts a run_python call (loading `servers` when given); the future resolves to a `Result`."""
        args: dict[str, Any] = {"code": code}
        if timeout is not None:
            args["timeout"] = timeout
        if servers is not None:
            args["servers"] = list(servers)

        async def call(session: ClientSession) -> Result:
            t0 = time.monotonic()
            raw = await session.call_tool("run_python", args, read_timeout_seconds=_read_timeout(wait))
            return _flatten(raw, time.monotonic() - t0)

        return self.submit(call)

    def run(
        self, code: str, timeout: int | None = None, wait: float = CALL_WAIT, servers: list[str] | None = None
    ) -> Result:
        """Runs code through tools/call (loading `servers` when given) and returns the flattened result."""
        fut = self.run_async(code, timeout=timeout, wait=wait, servers=servers)
        try:
            return fut.result(wait + 5)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise AssertionError(f"run_python got no answer within {wait} s\n{self.stderr_tail()}") from None

    def call_raw(self, arguments: dict[str, Any] | None, name: str = "run_python", wait: float = CALL_WAIT) -> Any:
        return self.request(lambda s: s.call_tool(name, arguments, read_timeout_seconds=_read_timeout(wait)), wait=wait + 5)

    # -- diagnostics --------------------------------------------------------------------------

    def stderr_tail(self, lines: int = 40) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return "(no bridge stderr)"
        return "--- bridge stderr (tail) ---\n" + "\n".join(text.splitlines()[-lines:])

    def containers(self, running_only: bool = False) -> list[str]:
        assert self.pid is not None
        return bridge_containers(self.pid, running_only=running_only)


def _base_env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_") and k != "MCP_SERVERS_CONFIG"}
    # Keep an explicit runtime/image choice from the caller's environment.
    for keep in ("MCP_BRIDGE_RUNTIME", "MCP_BRIDGE_IMAGE"):
        if os.environ.get(keep):
            env[keep] = os.environ[keep]
    env["MCP_BRIDGE_STATE_DIR"] = str(workdir / "state")
    env["MCP_BRIDGE_CONFIG_DIR"] = str(workdir / "mcps")
    env.setdefault("MCP_BRIDGE_LOG_LEVEL", "info")
    # Most tests read the result's fields from structuredContent, so their bridges turn it on;
    # test_client_view.py checks the default (text only) with "MCP_BRIDGE_STRUCTURED_CONTENT": "0".
    env["MCP_BRIDGE_STRUCTURED_CONTENT"] = "1"
    return env


def cli_env_for(state_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for one CLI run: the caller's, minus MCP_BRIDGE_* (but the runtime and image
    choice), with `state_dir` and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_") and k != "MCP_SERVERS_CONFIG"}
    for keep in ("MCP_BRIDGE_RUNTIME", "MCP_BRIDGE_IMAGE"):
        if os.environ.get(keep):
            env[keep] = os.environ[keep]
    env["MCP_BRIDGE_STATE_DIR"] = str(state_dir)
    env.update(extra)
    return env


def home_env(home: Path) -> dict[str, str]:
    """HOME pointed at a temp dir; XDG dirs pinned to the real ones so a rootless container
    runtime keeps finding its storage and configuration."""
    real = Path.home()
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME") or str(real / ".config"),
        "XDG_DATA_HOME": os.environ.get("XDG_DATA_HOME") or str(real / ".local" / "share"),
    }


def servers_cli(bin_path: str, env: dict[str, str], cwd: Path, *args: str) -> types.SimpleNamespace:
    """Runs `mcp-code-bridge servers ARGS`. Returns `code`, `rows` {name: (transport, source,
    state, origin)}, `notes` and `problems` [(source, message)], `stdout`, `stderr`."""
    p = subprocess.run([bin_path, "servers", *args], env=env, cwd=str(cwd), capture_output=True, text=True,
                       timeout=60)
    out = types.SimpleNamespace(code=p.returncode, rows={}, notes=[], problems=[], stdout=p.stdout,
                                stderr=p.stderr)
    for line in p.stdout.splitlines():
        cols = line.split("\t")
        if cols[0] in ("problem", "note") and len(cols) >= 3:
            (out.problems if cols[0] == "problem" else out.notes).append((cols[1], "\t".join(cols[2:])))
        elif len(cols) == 5:
            out.rows[cols[0]] = tuple(cols[1:])
    assert p.returncode in (0, 1, 3), f"`servers` exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return out


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
    return _base_env(d)


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
