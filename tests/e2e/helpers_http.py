"""Helpers for the `serve --http` end-to-end tests (no tests here): a real `mcp-code-bridge serve`
process on a free loopback port with a tokens file, and the official MCP Python client connected to
it over streamable HTTP with a bearer token, in either protocol revision.

Process
-------
`ServeBridge(tmp_root, tokens, servers=..., env=...)` prepares a private folder (state, config,
working directory, and a 0700 `XDG_RUNTIME_DIR` of its own, so the sockets it leaves are easy to
find), writes the tokens file (`TOKEN NAME` lines, mode 0600), and `.start()` runs
`mcp-code-bridge serve --http 127.0.0.1:0 --token-file PATH` and waits for the stderr line
`serving MCP on http://IP:PORT/mcp`; `.url` is that address. `.set_tokens({...})` rewrites the file
and sends SIGHUP; `.sigterm()`, `.wait_exit(seconds)` and `.close()` end it. `.leftovers()` lists
what the process left behind (containers with its labels, live processes carrying its marker,
files in its snapshot and runtime folders): empty means clean.

Every process the bridge starts inherits the environment variable `E2E_MARKER=<uuid>` (downstream
servers and a podman service included), which is how `.processes()` finds them.

Clients
-------
`connect(url, token, mode)` is an async context manager yielding a connected
`mcp.client.client.Client`: mode `LEGACY` (initialize, an MCP session: the session is the sandbox)
or `STATELESS` ("2026-07-28": no session; the sandbox is a handle that `run_python` returns in
`_meta["mcp-code-bridge/sandbox"]` and takes back as its `sandbox` argument). `Agent(client)` keeps
that handle between calls so one test body works in both modes: `await agent.run("x = 1")`.
`go(coro)` runs a coroutine to completion from a synchronous test.

Raw connections
---------------
`raw_request(url, method, headers=..., body=...)` sends one HTTP/1.1 request on a socket of its
own and returns `RawReply(status, headers, body, sock)` with the socket still open, so a test can
see whether the server closes it (`closed_within(sock, seconds)`). `hold_connections_as(uid, url,
count, seconds)` starts a process as another local user (setpriv; needs root) that opens `count`
connections, sends nothing, and reports as JSON how long each stayed open (`HeldReport`).

Binaries: MCP_BRIDGE_BIN (default <repo>/target/debug/mcp-code-bridge), as in bridge_driver.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from bridge_driver import BRIDGE_BIN, base_env
from helpers_host import bridge_containers, pid_alive, poll, proc_environ, processes
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

import servers as S

LEGACY = "legacy"
"""Client mode: the 2025-11-25 revision (initialize; one MCP session, one sandbox)."""
STATELESS = "2026-07-28"
"""Client mode: the 2026-07-28 revision (no session; the sandbox travels as a handle)."""
MODES = (LEGACY, STATELESS)
"""Both revisions, for `pytest.mark.parametrize("mode", MODES)`."""

SANDBOX_META = "mcp-code-bridge/sandbox"
"""The `_meta` key of a 2026-07-28 result carrying the sandbox handle."""

SERVING = re.compile(r"serving MCP on (http://\S+/mcp)")
"""The stderr line `serve` logs once it listens; group 1 is the endpoint."""

START_WAIT = 60.0  # process start until the "serving MCP on" line
CALL_WAIT = 120.0  # one tools/call over HTTP, including a cold sandbox start
CLOSE_WAIT = 60.0  # SIGTERM until exit in `close` (the drain bound is 10 s by default)


def write_tokens(path: Path, tokens: Mapping[str, str]) -> None:
    """Writes a tokens file: one `SECRET NAME` line per entry of `tokens` (name -> secret), mode
    0600, replaced atomically (a rename, so a reload never reads half a file)."""
    lines = ["# tokens for an e2e serve bridge: SECRET NAME"]
    lines += [f"{secret} {name}" for name, secret in tokens.items()]
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def new_token() -> str:
    """A fresh random bearer token."""
    return "tok-" + uuid.uuid4().hex


class ServeBridge:
    """A `mcp-code-bridge serve --http` process with its own folders and tokens file."""

    def __init__(
        self,
        tmp_root: Path,
        tokens: Mapping[str, str],
        *,
        servers: Mapping[str, dict[str, Any]] | None = None,
        env: Mapping[str, str] | None = None,
        name: str = "serve",
        addr: str = "127.0.0.1:0",
    ):
        """`tokens`: name -> secret; `servers`: config entries (servers.py) written to its config
        folder; `env`: extra variables (MCP_BRIDGE_* settings) over the e2e defaults."""
        self.marker = uuid.uuid4().hex
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_root))
        self.state_dir = self.dir / "state"
        self.config_dir = self.dir / "mcps"
        self.cwd = self.dir / "cwd"
        self.runtime_dir = self.dir / "run"
        for d in (self.state_dir, self.config_dir, self.cwd, self.runtime_dir):
            d.mkdir(mode=0o700)
        if servers:
            S.write_config(self.config_dir, dict(servers))
        self.tokens_path = self.dir / "tokens"
        self.tokens = dict(tokens)
        write_tokens(self.tokens_path, self.tokens)
        self.stderr_path = self.dir / "serve-stderr.log"
        full = base_env(self.dir)
        full["E2E_MARKER"] = self.marker
        full["XDG_RUNTIME_DIR"] = str(self.runtime_dir)
        full.update(env or {})
        self.env = full
        self.addr = addr
        self.proc: subprocess.Popen[bytes] | None = None
        self.url: str | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, wait: float = START_WAIT) -> ServeBridge:
        """Starts the process and waits for its "serving MCP on" line; returns self."""
        argv = [BRIDGE_BIN, "serve", "--http", self.addr, "--token-file", str(self.tokens_path)]
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=self.cwd, env=self.env
            )

        def listening() -> str | None:
            found = SERVING.search(self.stderr_path.read_text(errors="replace"))
            if found is None and self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode} before listening\n{self.stderr_tail()}")
            return found.group(1) if found else None

        self.url = poll(listening, timeout=wait, interval=0.05)
        if self.url is None:
            self.kill()
            raise RuntimeError(f"serve did not listen within {wait} s\n{self.stderr_tail()}")
        return self

    @property
    def pid(self) -> int:
        """The bridge's pid (it is the process started, no wrapper)."""
        assert self.proc is not None, "not started"
        return self.proc.pid

    def set_tokens(self, tokens: Mapping[str, str]) -> None:
        """Rewrites the tokens file with `tokens` (name -> secret) and sends SIGHUP to reload it."""
        self.tokens = dict(tokens)
        write_tokens(self.tokens_path, self.tokens)
        self.reload()

    def reload(self) -> None:
        """Sends SIGHUP (the tokens file is read again)."""
        os.kill(self.pid, signal.SIGHUP)

    def sigterm(self) -> None:
        """Sends SIGTERM (drain, then every container removed)."""
        os.kill(self.pid, signal.SIGTERM)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code once the process ended within `timeout` seconds, else None."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        """Ends the process if it still runs: SIGTERM, then SIGKILL after CLOSE_WAIT s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.sigterm()
        if self.wait_exit(CLOSE_WAIT) is None:
            self.kill()

    # -- what it holds --------------------------------------------------------------------------

    def containers(self, running_only: bool = False) -> list[str]:
        """Containers labelled with this bridge's pid."""
        return bridge_containers(self.pid, running_only=running_only)

    def processes(self) -> list[int]:
        """Live processes, other than the bridge, carrying this bridge's E2E_MARKER (what it
        started: downstream servers, a podman service)."""
        want = f"E2E_MARKER={self.marker}".encode()
        own = self.proc.pid if self.proc is not None else None
        return [pid for pid, _ in processes() if pid != own and want in proc_environ(pid) and pid_alive(pid)]

    def files(self) -> list[Path]:
        """Files (not folders) under its snapshot folder and its runtime folder (frame-channel
        and podman sockets). The outbox is left out: delivered files are kept by design."""
        found: list[Path] = []
        for root in (self.state_dir / "snapshots", self.runtime_dir):
            if root.is_dir():
                found += sorted(p for p in root.rglob("*") if not p.is_dir())
        return found

    def leftovers(self) -> list[str]:
        """What the bridge left behind, one line each (empty = nothing)."""
        out = [f"container {c}" for c in self.containers()]
        out += [f"process {p}: {_cmdline(p)}" for p in self.processes()]
        out += [f"file {p}" for p in self.files()]
        return out

    def stderr_tail(self, lines: int = 40) -> str:
        """The end of the bridge's stderr, for assertion messages."""
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return "(no serve stderr)"
        return "--- serve stderr (tail) ---\n" + "\n".join(text.splitlines()[-lines:])


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


# --------------------------------------------------------------------------------------------
# Clients


@contextlib.asynccontextmanager
async def connect(
    url: str,
    token: str | None,
    mode: str = LEGACY,
    *,
    read_timeout: float = CALL_WAIT,
    elicitation_callback: Any = None,
) -> AsyncIterator[Client]:
    """The official client on `url` with `Authorization: Bearer <token>` (none when `token` is
    None), connected in `mode` (LEGACY or STATELESS); with `elicitation_callback` it declares
    elicitation (the bridge then asks it to approve calls)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    timeout = httpx2.Timeout(30.0, read=read_timeout + 30.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(
            transport, mode=mode, read_timeout_seconds=read_timeout, elicitation_callback=elicitation_callback
        ) as client:
            yield client


@dataclass
class Reply:
    """One run_python result, flattened."""

    text: str
    is_error: bool
    sandbox: str | None
    raw: Any = field(repr=False)


def sandbox_of(result: Any) -> str | None:
    """The sandbox handle a 2026-07-28 result carries, if any."""
    meta = getattr(result, "meta", None) or {}
    handle = meta.get(SANDBOX_META)
    return handle if isinstance(handle, str) else None


def flatten(result: Any) -> Reply:
    """A CallToolResult as a `Reply` (text blocks joined)."""
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    return Reply("\n".join(texts), bool(result.is_error), sandbox_of(result), result)


async def run(client: Client, code: str, *, sandbox: str | None = None, **args: Any) -> Reply:
    """One run_python call (`sandbox` passed when given; other arguments as they are)."""
    arguments: dict[str, Any] = {"code": code, **args}
    if sandbox is not None:
        arguments["sandbox"] = sandbox
    return flatten(await client.call_tool("run_python", arguments))


class Agent:
    """One client's conversation with its sandbox, in either mode: the handle a STATELESS result
    returns is passed back on the next call (a LEGACY session needs none)."""

    def __init__(self, client: Client):
        self.client = client
        self.sandbox: str | None = None

    async def run(self, code: str, **args: Any) -> Reply:
        """run_python in this agent's sandbox; keeps the handle the reply names."""
        reply = await run(self.client, code, sandbox=self.sandbox, **args)
        if reply.sandbox is not None:
            self.sandbox = reply.sandbox
        return reply


def go(coro: Any) -> Any:
    """Runs `coro` to completion on a fresh event loop (from a synchronous test)."""
    return asyncio.run(coro)


def last_line(text: str) -> str:
    """The last non-empty line of a result's text (a notice line may come first)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


# --------------------------------------------------------------------------------------------
# Raw connections


@dataclass
class RawReply:
    """One response read off a raw socket; `sock` is still open (the caller closes it)."""

    status: int
    headers: dict[str, str]
    body: bytes
    sock: socket.socket = field(repr=False)


def host_port(url: str) -> tuple[str, int]:
    """The host and port of an `http://HOST:PORT/...` URL (`0.0.0.0` and `[::]` as loopback)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    return host, parts.port or 80


def raw_request(
    url: str, method: str = "POST", headers: Mapping[str, str] | None = None, body: bytes = b"", timeout: float = 30.0
) -> RawReply:
    """Sends one HTTP/1.1 request to `url` on a new socket and reads the response (head, then a
    Content-Length body; at most 1 MiB); the socket is left open."""
    host, port = host_port(url)
    path = urlsplit(url).path or "/"
    sock = socket.create_connection((host, port), timeout=timeout)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 1 << 20:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    found = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    want = int(found.get("content-length", "0") or 0)
    while len(rest) < min(want, 1 << 20):
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return RawReply(int(status_line.split()[1]), found, rest, sock)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the peer closes `sock` (EOF or reset) within `seconds`; bytes it sends before
    are read and dropped (at most 1 MiB)."""
    deadline = time.monotonic() + seconds
    dropped = 0
    while dropped < 1 << 20:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            return False
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not chunk:
            return True
        dropped += len(chunk)
    return False


_HOLD = r"""
import json, selectors, socket, sys, time
host, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
sel = selectors.DefaultSelector()
socks, lived, closed = [], [], []
start = time.monotonic()
def watch(timeout):
    for key, _ in sel.select(timeout):
        s = key.fileobj
        try:
            gone = s.recv(4096) == b""
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if gone:
            now = time.monotonic()
            lived.append(round(now - key.data, 4))
            closed.append([round(key.data - start, 4), round(now - start, 4)])
            sel.unregister(s)
for _ in range(count):
    s = socket.create_connection((host, port), timeout=10)
    s.setblocking(False)
    socks.append(s)
    sel.register(s, selectors.EVENT_READ, time.monotonic())
    watch(0)
print("open", len(socks), flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end and len(lived) < len(socks):
    watch(0.05)
print(json.dumps({"opened": len(socks), "lived": sorted(lived), "spans": closed}), flush=True)
"""


@dataclass
class HeldReport:
    """What `hold_connections_as` saw: connections opened, and for each one the server closed
    (within the time given), how many seconds it had stayed open (`lived`, sorted) and when it
    opened and closed (`spans`, seconds since the first opened, in the order they closed)."""

    opened: int
    lived: list[float]
    spans: list[tuple[float, float]]

    def most_at_once(self, held_for: float, margin: float) -> int:
        """The most connections the server held at one moment among those it closed after
        about `held_for` seconds (a timeout), each taken as held over the `held_for` before it
        closed, narrowed by `margin` at both ends so that jitter in when a close was seen does
        not make two that followed each other look simultaneous."""
        edges: list[tuple[float, int]] = []
        for opened, closed in self.spans:
            if closed - opened >= held_for - margin:
                edges.append((closed - held_for + margin, 1))
                edges.append((closed - margin, -1))
        most = now = 0
        for _, step in sorted(edges):
            now += step
            most = max(most, now)
        return most


class HeldConnections:
    """A process holding idle connections as another user; `.wait_open()` once they are open,
    `.report()` when it is done."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.proc = proc

    def wait_open(self, timeout: float = 60.0) -> int:
        """How many connections it opened, once it opened them all."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        assert line.startswith("open "), (line, self.proc.stderr.read() if self.proc.stderr else "")
        return int(line.split()[1])

    def report(self, timeout: float = 120.0) -> HeldReport:
        """Its report, once it ended."""
        # Read through the same buffered reader as `wait_open`: when the connections were
        # closed at once, the report line came with the `open` line and sits in its buffer,
        # where `communicate` (which reads the pipe itself) would never see it. Read before
        # waiting: the report (a span per connection) may be more than a pipe holds.
        assert self.proc.stdout is not None and self.proc.stderr is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "the holder wrote no report"
        out = self.proc.stdout.read()  # to its end: the holder exits once it has reported
        self.proc.wait(timeout=timeout)
        err = self.proc.stderr.read()
        assert self.proc.returncode == 0, err
        doc = json.loads(out.strip().splitlines()[-1])
        return HeldReport(doc["opened"], doc["lived"], [(a, b) for a, b in doc["spans"]])


def hold_connections_as(uid: int, url: str, count: int, seconds: float) -> HeldConnections:
    """Starts a process as user `uid` (setpriv; the caller must be root) that opens `count`
    connections to `url`'s port, sends nothing, and watches them for `seconds`."""
    setpriv = shutil.which("setpriv")
    assert setpriv, "util-linux setpriv is needed to act as another user"
    host, port = host_port(url)
    proc = subprocess.Popen(
        [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable, "-c", _HOLD]
        + [host, str(port), str(count), str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    return HeldConnections(proc)
