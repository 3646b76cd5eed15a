"""The sandbox's own rules against ways out of a shared folder (ARCHITECTURE.md, "Shared
folders"), installed by the entrypoint once the frame channel is connected, before any other
thread exists, and inherited by everything sandbox code starts:

- a seccomp filter refusing `socket(AF_UNIX, ...)`, `socketpair(AF_UNIX, ...)` of any type but
  SOCK_STREAM (a datagram pair can `sendto` a path) and io_uring (which can make sockets without
  the `socket` syscall), plus every syscall of a foreign ABI (i386, x32) that would dodge those
  numbers: no code can reach a unix socket by path, whoever made it and whenever. A connected
  stream pair (asyncio's self-pipe, multiprocessing) stays allowed: it cannot be re-aimed.
- a Landlock rule (only when folders are shared, `MCP_BRIDGE_SHARED`): files may be opened for
  writing only beneath the sandbox's scratch places, so a FIFO or device node in a shared folder
  (which a read-only mount does not stop) cannot be opened for writing.

Each step reports whether it is in force (selfcheck.py reads `state`); nothing here raises."""
import ctypes
import errno
import os
import platform
import struct

# What selfcheck reports: True once a rule is in force, None when not asked for, else False.
state = {"unix_sockets_blocked": False, "shared_writes_blocked": None, "why": []}

SCRATCH = ("/tmp", "/workspace", "/var/tmp", "/dev", "/proc", "/opt/packages")  # writable beneath these

_AF_UNIX, _SOCK_STREAM, _SOCK_TYPE_MASK = 1, 1, 0xF
# machine -> (AUDIT_ARCH_*, seccomp, socket, socketpair, io_uring_setup, has x32 numbers)
_ARCHES = {
    "x86_64": (0xC000003E, 317, 41, 53, 425, True),
    "aarch64": (0xC00000B7, 277, 198, 199, 425, False),
}
_X32_BIT = 0x40000000
_PR_SET_NO_NEW_PRIVS, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 38, 1, 1
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# classic BPF opcodes
_LD_ABS, _JEQ, _JGE, _AND, _RET = 0x20, 0x15, 0x35, 0x54, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24  # struct seccomp_data, little-endian


def _assemble(lines):
    """Classic BPF from (op, k, jump_if_true, jump_if_false) lines whose jumps are label names
    (None: next line) and ("label", name) markers; returns packed sock_filter bytes."""
    labels, code = {}, []
    for line in lines:
        if line[0] == "label":
            labels[line[1]] = len(code)
        else:
            code.append(line)
    out = []
    for at, (op, k, jt, jf) in enumerate(code):
        rel = [0 if j is None else labels[j] - at - 1 for j in (jt, jf)]
        out.append(struct.pack("<HBBI", op, rel[0], rel[1], k))
    return b"".join(out)


def filter_program(machine):
    """The seccomp program for `machine` (platform.machine()), or None when it is unknown."""
    if machine not in _ARCHES:
        return None
    arch, _, socket_nr, pair_nr, uring_nr, x32 = _ARCHES[machine]
    lines = [
        (_LD_ABS, _OFF_ARCH, None, None),
        (_JEQ, arch, None, "deny"),
        (_LD_ABS, _OFF_NR, None, None),
    ]
    if x32:
        lines.append((_JGE, _X32_BIT, "deny", None))
    lines += [
        (_JEQ, socket_nr, "socket", None),
        (_JEQ, pair_nr, "pair", None),
        (_JEQ, uring_nr, "nosys", None),
        (_RET, _RET_ALLOW, None, None),
        ("label", "socket"),
        (_LD_ABS, _OFF_ARG0, None, None),
        (_JEQ, _AF_UNIX, "deny", None),
        (_RET, _RET_ALLOW, None, None),
        ("label", "pair"),
        (_LD_ABS, _OFF_ARG0, None, None),
        (_JEQ, _AF_UNIX, None, "allow"),
        (_LD_ABS, _OFF_ARG1, None, None),
        (_AND, _SOCK_TYPE_MASK, None, None),
        (_JEQ, _SOCK_STREAM, "allow", "deny"),
        ("label", "allow"),
        (_RET, _RET_ALLOW, None, None),
        ("label", "deny"),
        (_RET, _RET_ERRNO | errno.EPERM, None, None),
        ("label", "nosys"),
        (_RET, _RET_ERRNO | errno.ENOSYS, None, None),
    ]
    return _assemble(lines)


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def install_socket_filter(machine=None):
    """Installs the seccomp filter on every thread; True when it is in force."""
    machine = machine or platform.machine()
    program = filter_program(machine)
    if program is None:
        state["why"].append("no seccomp filter for machine %r" % machine)
        return False
    try:
        libc = _libc()
        buf = ctypes.create_string_buffer(program, len(program))
        prog = _Prog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        rc = libc.syscall(_ARCHES[machine][1], _SECCOMP_SET_MODE_FILTER,
                          _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog))
        if rc != 0:
            state["why"].append("seccomp: %s" % os.strerror(ctypes.get_errno()))
            return False
    except (OSError, AttributeError) as exc:
        state["why"].append("seccomp: %s" % exc)
        return False
    state["unix_sockets_blocked"] = unix_sockets_blocked()
    return state["unix_sockets_blocked"]


def unix_sockets_blocked():
    """Probe: True when a new unix socket is refused (the filter is in force)."""
    import socket
    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    except PermissionError:
        return True
    except OSError:
        return False
    return False


_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446  # the same on every architecture
_LL_WRITE_FILE, _LL_RULE_PATH_BENEATH, _LL_VERSION = 1 << 1, 1, 1 << 0


def install_write_rule(scratch=SCRATCH):
    """Landlock: files may be opened for writing only beneath `scratch` (this thread and every
    process it starts; call before other threads exist). True when it is in force."""
    state["shared_writes_blocked"] = False
    if _task_count() != 1:
        state["why"].append("landlock: other threads already run")
        return False
    libc = _libc()
    if libc.syscall(_LL_CREATE, None, 0, _LL_VERSION) < 1:
        state["why"].append("landlock: %s" % os.strerror(ctypes.get_errno()))
        return False
    attr = struct.pack("<Q", _LL_WRITE_FILE)
    ruleset = libc.syscall(_LL_CREATE, attr, len(attr), 0)
    if ruleset < 0:
        state["why"].append("landlock ruleset: %s" % os.strerror(ctypes.get_errno()))
        return False
    try:
        for path in scratch:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not there: nothing beneath it to write to either
            try:
                rule = struct.pack("<Qi", _LL_WRITE_FILE, fd)
                if libc.syscall(_LL_ADD_RULE, ruleset, _LL_RULE_PATH_BENEATH, rule, 0) != 0:
                    state["why"].append("landlock rule %s: %s"
                                        % (path, os.strerror(ctypes.get_errno())))
                    return False
            finally:
                os.close(fd)
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if libc.syscall(_LL_RESTRICT, ruleset, 0) != 0:
            state["why"].append("landlock: %s" % os.strerror(ctypes.get_errno()))
            return False
    finally:
        os.close(ruleset)
    state["shared_writes_blocked"] = True
    return True


def _task_count():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def install(shared):
    """Both rules; the Landlock one only when `shared` (the shared folders) is not empty."""
    if shared:
        install_write_rule()
    install_socket_filter()
