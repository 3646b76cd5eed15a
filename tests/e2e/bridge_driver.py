"""The bridge driver: a real `mcp-code-bridge run` process driven by the official MCP Python SDK.

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

MCP_BRIDGE_BIN is the path of the bridge binary (default: <repo>/target/debug/mcp-code-bridge).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers_host import bridge_containers, find_pid_by_marker, poll
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # SDK v2 name; v2 takes read timeouts as float seconds
    from mcp.shared.exceptions import MCPError as McpError  # noqa: F401 - conftest's `helpers` hands it to tests

    def _read_timeout(seconds: float) -> Any:
        return seconds

except ImportError:  # SDK v1 name; v1 takes read timeouts as timedelta
    from datetime import timedelta

    from mcp.shared.exceptions import McpError  # type: ignore[no-redef]  # noqa: F401

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
        full_env = base_env(self.dir)
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


def base_env(workdir: Path) -> dict[str, str]:
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
