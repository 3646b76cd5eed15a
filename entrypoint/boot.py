"""Sandbox bootstrap (`python3 -I -c "$(cat boot.py)"`): read the boot frame from fd 0 with raw
os.read, install its files as an in-memory package (nothing touches the disk), then run
<package>.__main__.main(bytes_after_the_boot_line, channel_offer). Stdlib only; any boot failure
exits 2.

As the container's pid 1 it first forks: the parent stays behind as a minimal init that reaps
the processes re-parented to it (orphans of sandbox code would otherwise stay zombies and use up
the pids limit), forwards termination signals, and exits with the entrypoint's status. Run as an
ordinary process (the test double, tests) it does the same as a child subreaper, so orphans stay
in its tree there too; the entrypoint then dies with it (PR_SET_PDEATHSIG). Either way the init's
pid is handed to cellprocs, which kills what an interrupted exec started."""
import importlib.abc
import importlib.util
import json
import linecache
import os
import signal
import sys
import time
import traceback


def _fail(msg):
    sys.stderr.write("mcp-bridge boot: %s\n" % msg), sys.stderr.flush(), os._exit(2)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, pkg, files):
        self.pkg, self.files = pkg, files

    def _key(self, name):
        if name == self.pkg:
            return "__init__.py"
        sub = name[len(self.pkg) + 1:] if name.startswith(self.pkg + ".") else ""
        return sub + ".py" if sub and "." not in sub and sub + ".py" in self.files else None

    def find_spec(self, name, path=None, target=None):
        key = self._key(name)
        return None if key is None else importlib.util.spec_from_loader(
            name, self, origin="<%s/%s>" % (self.pkg, key), is_package=(name == self.pkg))

    def exec_module(self, module):
        src, module.__file__ = self.get_source(module.__name__), module.__spec__.origin
        linecache.cache[module.__file__] = (len(src), None, src.splitlines(True), module.__file__)
        exec(compile(src, module.__file__, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, name):
        return self.files.get(self._key(name), "")


REAP_PAUSE = 1.0  # seconds orphans wait to be reaped while the pids limit is nearly used up
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def _prctl(option, value):
    """prctl(2) through ctypes; False when it is not available or fails."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no ctypes, no libc: run without
        return False


def _pids_nearly_used_up():
    """True when the cgroup's pids are at 90% of its limit, or when that is unknown."""
    for d in ("/sys/fs/cgroup", "/sys/fs/cgroup/pids"):
        try:
            with open(d + "/pids.max") as f:
                limit = f.read().strip()
            with open(d + "/pids.current") as f:
                current = int(f.read())
        except (OSError, ValueError):
            continue
        return limit != "max" and current >= int(limit) * 9 // 10
    return True


def _init():
    """Returns the init's pid (None without one) in the entrypoint process; never returns in
    the init.

    Orphans are reaped as they exit, except while the pids limit is nearly used up: then they
    wait REAP_PAUSE. A fork bomb, whose processes each end at their first failed fork, so sees
    every fork fail and dies, instead of living on in the slots an eager reaper would free.
    The entrypoint's own children are not the init's, so `subprocess` keeps its exit statuses."""
    init = os.getpid()
    if init != 1 and not _prctl(PR_SET_CHILD_SUBREAPER, 1):
        return None  # an ordinary process that cannot adopt orphans: no init
    child = os.fork()
    if child == 0:
        if init != 1 and not (_prctl(PR_SET_PDEATHSIG, signal.SIGKILL) and os.getppid() == init):
            os._exit(1)  # the init is already gone
        return init
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0), os.dup2(null, 1)  # the frame channel belongs to the entrypoint alone

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})

    def done(status):
        code = os.waitstatus_to_exitcode(status)
        os._exit(128 - code if code < 0 else code)

    reaped_at = time.monotonic()
    while True:
        signal.sigtimedwait({signal.SIGCHLD}, REAP_PAUSE)
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            done(status)
        if time.monotonic() - reaped_at < REAP_PAUSE and _pids_nearly_used_up():
            continue
        reaped_at = time.monotonic()
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                os._exit(1)
            if not pid:
                break
            if pid == child:
                done(status)


def _boot(init_pid):
    buf, nl = bytearray(), -1
    while nl < 0:
        chunk = os.read(0, 1 << 16) or _fail("stdin closed before the boot frame")
        buf += chunk
        nl = buf.find(b"\n", len(buf) - len(chunk))
    try:
        frame = json.loads(bytes(buf[:nl]).decode("utf-8"))
        pkg, files = frame["package"], frame["files"]
        if frame.get("t") != "boot" or frame.get("v") != 1 or not pkg.isidentifier() \
                or not {"__init__.py", "__main__.py"} <= set(files) \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise ValueError("want {t:boot, v:1, package, files:{__init__.py, __main__.py, ...}}")
        sys.meta_path.insert(0, _Finder(pkg, files))
        if "cellprocs.py" in files:
            importlib.import_module(pkg + ".cellprocs").enable(init_pid)
        entry = importlib.import_module(pkg + ".__main__")
    except Exception as exc:  # noqa: BLE001 - any boot failure is fatal and reported
        traceback.print_exc()
        _fail("bad boot frame or package: %s: %s" % (type(exc).__name__, exc))
    return entry.main(bytes(buf[nl + 1:]), frame.get("channel"))


rc = _boot(_init())  # main() flushes its own streams; os._exit skips joining user threads
os._exit(rc if isinstance(rc, int) else 0)
