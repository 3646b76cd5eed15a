"""Killing the processes an interrupted exec started (ARCHITECTURE.md, "Entrypoint execution
model"). Nothing happens per exec but one clock read (`ExecState.begin`): the process tree is read
from /proc only when an exec is interrupted.

Which processes: those in our tree started at or after the exec began (their /proc start time,
in clock ticks since boot, against CLOCK_BOOTTIME read when it began), reached from a root only
through other such processes. The roots are the entrypoint and, when boot.py ran it, our own
init: pid 1 of the container's pid namespace, or outside a container (the test double) a child
subreaper whose only forked child is the entrypoint. Orphans re-parent to that init, so a
double-forked daemon or a `setsid` child is still found; nothing outside the init's tree is ever
looked at. A process that existed before the exec (a helper an earlier cell started) is left
alone, and so are its children. A process is signalled through a pidfd opened after checking its
start time again, so a reused pid is never hit."""
import os
import signal
import threading
import time

from . import protocol

CLK_TCK = os.sysconf("SC_CLK_TCK")
ROUNDS = 50  # scan-and-kill passes per sweep: a forking process may add children meanwhile
BUDGET = 0.5  # seconds one sweep may take
ACTIVE = None  # the CellProcesses of this process once boot.py enabled it


def enable(init_pid):
    """Called by boot.py: the entrypoint's processes are managed from now on. `init_pid` is our
    init (its pid namespace's pid 1, or a local subreaper), or None (then only the entrypoint's
    own descendants are found)."""
    global ACTIVE
    ACTIVE = CellProcesses(init_pid)
    return ACTIVE


def boottime():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _stat(pid):
    """(state, ppid, start tick) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return fields[0], int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _children(pid):
    """Child pids of every thread of `pid` (needs CONFIG_PROC_CHILDREN); None when unknown."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(int(p) for p in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None  # the kernel has no children files
        except (OSError, ValueError):
            continue
    return kids


def _children_by_scan():
    """ppid -> child pids, from every /proc entry (kernels without children files)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                table.setdefault(st[1], []).append(int(name))
    return table


def started_since(roots, since_tick):
    """{pid: start tick} of the live processes below `roots` started at `since_tick` or later,
    reached only through such processes."""
    table = None
    found, seen = {}, set(roots)

    def kids(pid):
        nonlocal table
        if table is None:
            got = _children(pid)
            if got is not None:
                return got
            table = _children_by_scan()
        return table.get(pid, ())

    todo = [k for root in roots for k in kids(root)]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        st = _stat(pid)
        if st is None or st[0] in (b"Z", b"X") or st[2] < since_tick:
            continue  # gone, dead, or older than the exec: its subtree is its own
        found[pid] = st[2]
        todo.extend(kids(pid))
    return found


def kill(pid, start):
    """SIGKILL `pid` if it is still the process that started at tick `start`."""
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):  # no pidfds here: check, then kill (a tiny reuse window)
        pass
    try:
        st = _stat(pid)
        if st is None or st[2] != start:
            return False
        if fd is None:
            os.kill(pid, signal.SIGKILL)
        else:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except OSError:  # gone meanwhile, or not ours to signal after all
        return False
    finally:
        if fd is not None:
            os.close(fd)


class CellProcesses:
    """Sweeps for one process: `sweep` kills what an exec started; `sweep_soon` does it on a
    thread, for an interrupt that arrives while the main thread may be stuck."""

    def __init__(self, init_pid=None):
        self.roots = (os.getpid(),) + ((init_pid,) if init_pid and init_pid != os.getpid()
                                       else ())
        self._lock = threading.Lock()

    def sweep(self, since, still=None):
        """SIGKILL every process started since `since` (CLOCK_BOOTTIME seconds), pass after
        pass until a pass finds none, within ROUNDS and BUDGET; `still()` False stops it.
        Returns how many were signalled."""
        tick = int(since * CLK_TCK)
        deadline, signalled = time.monotonic() + BUDGET, set()
        with self._lock:
            for _ in range(ROUNDS):
                if still is not None and not still():
                    break
                found = set(started_since(self.roots, tick).items())
                if not found:
                    break
                if found <= signalled:  # all of them are dying already: give them a moment
                    time.sleep(0.002)
                for pid, start in found - signalled:
                    if kill(pid, start):
                        signalled.add((pid, start))
                if time.monotonic() > deadline:
                    break
        return len(signalled)

    def sweep_soon(self, since, still):
        """`sweep` on a daemon thread, stopping once `still()` is False."""
        threading.Thread(target=self._sweep_quietly, args=(since, still),
                         name="mcp-cell-sweep", daemon=True).start()

    def _sweep_quietly(self, since, still):
        try:
            self.sweep(since, still)
        except Exception as exc:  # noqa: BLE001 - a sweep must never take the process down
            protocol.log(f"killing the interrupted exec's processes failed: {exc!r}")
