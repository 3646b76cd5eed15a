"""What the sandbox looks like from inside (ARCHITECTURE.md, "Posture check"): the facts sent in
the `ready` frame so the host can refuse a sandbox weaker than configured (an engine that ignored
a limit), and that `mcp-code-bridge doctor` prints. Read-only probes of /proc, /sys and statvfs;
never raises (a probe that fails reports None). The two rules of confine.py are reported as
`unix_sockets_blocked` (probed) and `shared_writes_blocked` (None when no folder is shared)."""
import os

from . import confine

_CGROUP_FILES = {
    "memory_limit": ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    "pids_limit": ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"),
}


def _status_fields():
    fields = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    except OSError:
        pass
    return fields


def _limit(paths):
    """A cgroup limit as an int; -1 for "max" (unlimited); None when unreadable."""
    for path in paths:
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text == "max":
            return -1
        try:
            value = int(text)
        except ValueError:
            return None
        return -1 if value >= 1 << 62 else value  # cgroup v1 writes "unlimited" as a huge number
    return None


def _flags(path):
    try:
        return os.statvfs(path).f_flag
    except OSError:
        return None


def _has(flags, bit):
    return None if flags is None else bool(flags & bit)


def posture():
    """The sandbox's security-relevant facts as a JSON-ready dict."""
    status = _status_fields()

    def num(key, base=10):
        try:
            return int(status[key], base)
        except (KeyError, ValueError):
            return None

    try:
        interfaces = sorted(n for n in os.listdir("/sys/class/net") if n != "lo")
    except OSError:
        interfaces = None
    tmp = _flags("/tmp")
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "cap_eff": num("CapEff", 16),
        "cap_bnd": num("CapBnd", 16),
        "no_new_privs": num("NoNewPrivs"),
        "seccomp": num("Seccomp"),
        "root_read_only": _has(_flags("/"), os.ST_RDONLY),
        "tmp_noexec": _has(tmp, os.ST_NOEXEC),
        "tmp_nosuid": _has(tmp, os.ST_NOSUID),
        "network_interfaces": interfaces,
        "memory_limit": _limit(_CGROUP_FILES["memory_limit"]),
        "pids_limit": _limit(_CGROUP_FILES["pids_limit"]),
        "unix_sockets_blocked": confine.unix_sockets_blocked(),
        "shared_writes_blocked": confine.state["shared_writes_blocked"],
    }
