"""Reading host frames from two places (ARCHITECTURE.md, "Entrypoint execution model"): the reader
thread, and the exec's event loop while it waits in `select`. Whoever reads holds the lock and
dispatches every complete frame in arrival order, so frames are never split or reordered.

The loop reading for itself saves a hand-off per reply (a wake-up of the reader thread, then one
of the loop). The thread stays the reader whenever the loop cannot be: between execs, during
synchronous code, while the main thread waits in a `_sync` call, and once the loop has been out of
`select` for STALL seconds (code blocking inside a coroutine), so interrupts and replies always
get through."""
import collections
import contextlib
import fcntl
import os
import select
import selectors
import socket
import threading
import time

from . import protocol

STALL = 0.005  # seconds the loop may stay out of `select` before the thread reads again
MAX_WAIT = 86400.0  # seconds: the longest single `select` wait (asyncio's own bound)


PRIVATE_FD_MIN = 100  # like the frame fds: out of the way of code that reuses low fds


def _private(fd):
    """`fd` moved to a close-on-exec descriptor >= PRIVATE_FD_MIN."""
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, PRIVATE_FD_MIN)
    except OSError:
        return fd
    os.close(fd)
    return moved


_SOCKETS = []  # socket objects over channel fds, kept alive: closing one closes the channel


def _nonblocking_recv(fd):
    """`recv` of a socket object over `fd` (sharing it, never closing it), or None when `fd` is
    not a socket (the stdio channel's pipe)."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    if sock.type != socket.SOCK_STREAM:
        sock.detach()
        return None
    _SOCKETS.append(sock)
    return sock.recv


class TrackedSelector(selectors.DefaultSelector):
    """The exec loop's selector; `busy_since` is when the loop last left `select` (None while
    it waits inside).

    A wait that returned events is usually followed by a zero-timeout poll: the callbacks it
    ran (a reply settling its future) scheduled the task that awaited it. That poll is skipped
    once, as a syscall that almost never finds anything; the next one always polls, so I/O
    still gets through at least every other loop iteration."""

    def __init__(self):
        super().__init__()
        self.busy_since = time.monotonic()
        self._just_woke = False

    def select(self, timeout=None):
        if timeout is not None and timeout <= 0 and self._just_woke:
            self._just_woke = False
            return []
        self.busy_since = None
        try:
            ready = super().select(timeout)
        finally:
            self.busy_since = time.monotonic()
        self._just_woke = bool(ready) and (timeout is None or timeout > 0)
        return ready


def _loop_queues(loop):
    """(ready callbacks, timer heap) of `loop` when it keeps them as CPython's asyncio does
    (`_ready` a deque, `_scheduled` a list of TimerHandles, `_stopping` a bool), for
    `Inbox.settle_inline`; None for any other loop (another implementation or Python version),
    whose calls then simply await their futures."""
    ready = getattr(loop, "_ready", None)
    timers = getattr(loop, "_scheduled", None)
    stopping = getattr(loop, "_stopping", None)
    if type(ready) is collections.deque and type(timers) is list and type(stopping) is bool:
        return ready, timers
    return None


class Inbox:
    """The read side of the frame channel. `dispatch(line)` handles one line and returns False
    when reading must stop (shutdown); it must not raise. `guard` (runner.ExecState) defers a
    SIGINT while the main thread dispatches, so an interrupt never lands between two frames."""

    def __init__(self, fd, dispatch, guard, leftover=b""):
        self.fd, self._dispatch, self._guard = fd, dispatch, guard
        self.closed = None  # why reading ended, once it has
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._lines = collections.deque(protocol.split_lines(self._buf, leftover))
        self._ready = select.poll()
        self._ready.register(fd, select.POLLIN)
        self._recv = _nonblocking_recv(fd)  # None unless fd is a socket
        self._kick_r, self._kick_w = (_private(fd) for fd in os.pipe())
        os.set_blocking(self._kick_w, False)
        self._thread_poll = select.poll()
        self._thread_poll.register(fd, select.POLLIN)
        self._thread_poll.register(self._kick_r, select.POLLIN)
        self._loop = self._selector = self._queues = None
        self._waiting_sync = 0  # main-thread `_sync` calls waiting while the loop is attached
        self._nudge = threading.Event()

    # -- reading ---------------------------------------------------------------------------
    def pump(self):
        """Dispatch the frames already read, then what one read finds (never blocks). Returns
        False once reading has ended."""
        with self._lock:
            if self.closed:
                return False
            if not self._lines:
                chunk = self._read()
                if chunk == b"":
                    if self._buf.strip():
                        protocol.log("the channel ended inside a frame; %d bytes dropped"
                                     % len(self._buf))
                    self.closed = "stdin closed"
                    return False
                if chunk is not None:
                    self._lines.extend(protocol.split_lines(self._buf, chunk))
            while self._lines:
                if not self._dispatch(self._lines.popleft()):
                    self.closed = "shutdown requested"
                    return False
            return True

    def _read(self):
        """What one read finds without blocking: bytes, b"" at the end, None when nothing is
        there yet."""
        try:
            if self._recv is not None:  # a socket: one call, no readiness check first
                return self._recv(1 << 16, socket.MSG_DONTWAIT)
            if not self._ready.poll(0):
                return None
            return os.read(self.fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            protocol.log("reading frames failed: %s" % exc)
            return b""

    def run_thread(self):
        """The reader thread's loop; returns why reading ended."""
        self.pump()  # frames that came with the boot frame
        while not self.closed:
            if self._loop_reads():
                self._nudge.wait(STALL)
                self._nudge.clear()
                continue
            timeout = -1 if self._loop is None else STALL * 1000
            events = dict(self._thread_poll.poll(timeout))
            if self._kick_r in events:
                os.read(self._kick_r, 512)
            if self.fd in events and not self.pump():
                break
        return self.closed

    def _loop_reads(self):
        if self._loop is None or self._waiting_sync:
            return False
        busy = self._selector.busy_since
        return busy is None or time.monotonic() - busy < STALL

    # -- the exec loop ---------------------------------------------------------------------
    def attach(self, loop, selector):
        """The exec's event loop (using `selector`) reads too, until `detach`."""
        if self.closed or self._loop is not None:
            return
        self._loop, self._selector = loop, selector
        self._queues = _loop_queues(loop)
        selector.busy_since = time.monotonic()
        loop.add_reader(self.fd, self._on_loop)
        self._kick()

    def detach(self):
        """The loop stops reading; the thread takes over at once."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            try:
                loop.remove_reader(self.fd)
            except (ValueError, RuntimeError, OSError):
                pass
        self._nudge.set()
        self._kick()

    def settle_inline(self, loop, fut):
        """Wait for the reply that settles `fut` right here, in the exec's own task, while its
        loop has nothing else to do; saves a suspension and a loop iteration per sequential call.

        Returns once `fut` is done, or leaves it pending as soon as anything else could run: a
        ready callback, a due timer, or any other registered descriptor (the loop's self-pipe,
        a subprocess pipe) becoming readable. The loop's `select` then takes over, so no other
        task waits longer than it would have. It reads the loop's private queues: a loop that
        does not keep them as CPython does (`_loop_queues`) gets no inline wait, and the caller
        awaits `fut` as usual."""
        if loop is not self._loop or self._waiting_sync or self._queues is None:
            return
        selector = self._selector
        channel = self.fd
        ready, timers = self._queues
        while not fut.done():
            if ready or loop._stopping:  # noqa: SLF001 - checked to be a bool by _loop_queues
                return
            timeout = None
            if timers:
                try:
                    timeout = min(timers[0].when() - loop.time(), MAX_WAIT)
                except (AttributeError, TypeError):  # not CPython's TimerHandle: stop trying
                    self._queues = None
                    return
                if timeout <= 0:
                    return
            events = selector.select(timeout)
            if not events:
                return
            for key, _ in events:
                if key.fd != channel:
                    return
            if not self._on_loop():
                return

    def _on_loop(self):
        """Dispatch what the channel has, from the loop; False once reading has ended."""
        with self._guard:
            alive = self.pump()
        if not alive:
            self.detach()  # the thread sees `closed` and ends reading
        return alive

    @contextlib.contextmanager
    def waiting_sync(self):
        """The main thread blocks in a `_sync` call meanwhile: the thread must read."""
        self._waiting_sync += 1
        self._nudge.set()
        try:
            yield
        finally:
            self._waiting_sync -= 1

    def _kick(self):
        try:
            os.write(self._kick_w, b"k")
        except OSError:  # full: the thread is being woken anyway
            pass

