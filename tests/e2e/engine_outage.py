"""Engine outages a test controls: an engine API socket that goes away mid-call and comes back.

Tests give the bridge `DOCKER_HOST=unix://<outage.path>`, then call `cut()` and `restore()`.
- `EngineProxy`: a Unix-socket proxy in front of a real engine's socket. `cut()` makes the engine
  vanish the way a dead one does: the socket file disappears and every open connection (the
  attach stream, the wait request, pooled idle connections) is torn down. `restore()` listens on
  the same path again. Works for podman and docker alike, since it only moves bytes.
- `PodmanService`: a `podman system service` the test owns. `cut()` SIGKILLs it (its socket file
  stays, refusing connections); `restore()` starts it again on the same path.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time


class PodmanService:
    """A `podman system service` on `path`, killed and restarted at will."""

    def __init__(self, path: str):
        self.path = path
        self._proc: subprocess.Popen | None = None

    def start(self) -> PodmanService:
        assert self._proc is None, "already running"
        self._proc = subprocess.Popen(
            ["podman", "system", "service", "--time=0", f"unix://{self.path}"],
            cwd=os.path.dirname(self.path), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not _answers(self.path):
            assert self._proc.poll() is None, f"podman system service exited ({self._proc.returncode})"
            assert time.monotonic() < deadline, "podman system service did not answer within 30 s"
            time.sleep(0.05)
        return self

    def cut(self) -> None:
        """Kills the service hard (SIGKILL): no cleanup, the socket file stays."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    restore = start

    def close(self) -> None:
        self.cut()


def _answers(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
        return s.recv(64).startswith(b"HTTP/1.")
    except OSError:
        return False
    finally:
        s.close()


class EngineProxy:
    """Forwards connections on `path` to the engine socket at `upstream`."""

    def __init__(self, upstream: str, path: str):
        self.upstream = upstream
        self.path = path
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    # -- control ------------------------------------------------------------------------------

    def start(self) -> EngineProxy:
        """Listens on `path` (replacing a stale socket file)."""
        assert self._listener is None, "already listening"
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        os.chmod(self.path, 0o666)
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, args=(listener,), daemon=True, name="engine-proxy")
        self._thread.start()
        return self

    def cut(self) -> None:
        """Stops listening, removes the socket file and breaks every open connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        with self._lock:
            conns, self._open = list(self._open), set()
        for s in conns:
            _close(s)

    restore = start

    def close(self) -> None:
        self.cut()

    # -- forwarding ---------------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(self.upstream)
            except OSError:
                _close(client)
                _close(up)
                continue
            with self._lock:
                if self._listener is not listener:  # cut while connecting
                    _close(client)
                    _close(up)
                    return
                self._open.update((client, up))
            done = threading.Semaphore(0)
            for src, dst in ((client, up), (up, client)):
                threading.Thread(target=self._pump, args=(src, dst, done), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, done: threading.Semaphore) -> None:
        failed = False
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    dst.shutdown(socket.SHUT_WR)  # pass half-closes through (stdin EOF)
                    break
                dst.sendall(data)
        except OSError:
            failed = True
        # A broken side, or the second pump to finish, closes the pair.
        if failed or done.acquire(blocking=False):
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            _close(src)
            _close(dst)
        else:
            done.release()


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
