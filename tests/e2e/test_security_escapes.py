"""Escapes tried from inside the sandbox and refused (GUIDE.md, "The sandbox"): host and downstream
secrets, engine sockets and host paths, state persisting into the next session, ptrace of
processes outside the sandbox or that forbid it, and set-uid binaries.

Each probe prints one JSON line so a failure shows exactly what the sandbox saw. The `sec` bridge
is in shared_bridges.py.
"""

from __future__ import annotations

import json
import os

import pytest
from helpers_sandbox import probe
from helpers_sandbox import sandbox_of as _sandbox

pytestmark = pytest.mark.engine  # escapes from the engine's container

# --- escapes tried and refused --------------------------------------------------------------------

_SCAN_SECRETS = r"""
import json, os
needles = {needles!r}
hits = [k for k, v in os.environ.items() if any(n in k or n in v for n in needles)]
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for name in ('environ', 'cmdline'):
            try:
                data = open('/proc/%s/%s' % (pid, name), 'rb').read().decode('utf-8', 'replace')
            except OSError:
                continue
            hits += ['/proc/%s/%s' % (pid, name) for n in needles if n in data]
print(json.dumps({{'hits': hits, 'pids': sorted(p for p in os.listdir('/proc') if p.isdigit())}}))
"""


def test_host_env_and_downstream_secrets_are_not_visible_inside(bridge_factory, stub_ready):
    import servers as S

    host_secret, server_secret = "host-secret-6d1f0b", "server-secret-93ac27"
    config = {"mcpServers": {"stub": S.stub("stub", env={"API_TOKEN": server_secret})}}
    b = bridge_factory(name="secrets", env={"HOST_ONLY_TOKEN": host_secret}, config=config)
    try:
        # Load the server so its process (with the secret in its env) is running during the scan.
        r = b.run("r = await mcp_stub.echo(text='hi')\nprint(r['text'])", servers=["stub"])
        assert r.text.strip() == "hi", str(r)
        seen = probe(b, _SCAN_SECRETS.format(needles=[host_secret, server_secret]))
        assert seen["hits"] == [], seen
        assert len(seen["pids"]) < 10, f"only the sandbox's own processes are visible: {seen['pids']}"
    finally:
        b.close()


def test_engine_sockets_and_host_paths_are_not_reachable(sec):
    seen = probe(sec, r"""
import glob, json, os, socket
paths = ['/var/run/docker.sock', '/run/docker.sock', '/run/podman/podman.sock', '/var/run/podman/podman.sock',
         '/run/user/0/podman/podman.sock', '/tmp/mcp-code-bridge-0', '/var/lib/containers', '/var/lib/docker',
         '/run/containerd', '/run/mcp-bridge/frames.sock']
found = [p for p in paths if os.path.exists(p)]
import stat
socks = []
for top in ('/run', '/var', '/tmp', '/workspace', '/etc', '/mnt', '/srv', '/opt', '/home', '/dev'):
    for root, dirs, files in os.walk(top):
        for f in files:
            try:
                if stat.S_ISSOCK(os.lstat(os.path.join(root, f)).st_mode):
                    socks.append(os.path.join(root, f))
            except OSError:
                pass
print(json.dumps({'found': found, 'sockets': socks}))
""")
    assert seen["found"] == [], seen
    assert seen["sockets"] == [], seen


def test_nothing_persists_into_the_next_session(bridge_factory):
    a = bridge_factory(name="persist-a")
    try:
        r = a.run("import os\nfor d in ('/tmp', '/workspace', '/var/tmp'):\n    open(d + '/persist-probe', 'w').write('x')\n"
                  "import sys\nsys.modules['persist_marker'] = 1\nprint('written')")
        assert r.text.strip() == "written", str(r)
    finally:
        a.close()
    b = bridge_factory(name="persist-b")
    try:
        seen = probe(b, "import json, os, sys\nprint(json.dumps({'files': [d for d in ('/tmp', '/workspace', '/var/tmp') "
                        "if os.path.exists(d + '/persist-probe')], 'module': 'persist_marker' in sys.modules}))")
        assert seen == {"files": [], "module": False}, seen
    finally:
        b.close()


def _host_ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2 :].split()[1])


# Sandbox-side helpers for the ptrace probes: PTRACE_SEIZE (detached again at once when it
# succeeds), process_vm_readv and /proc/<pid>/mem, each reported as 'ok' or the errno's name.
_PTRACE_PRELUDE = r"""
import ctypes, errno, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
libc.process_vm_readv.restype = ctypes.c_ssize_t
PTRACE_SEIZE, PTRACE_DETACH, PR_SET_DUMPABLE = 0x4206, 17, 4

class IoVec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]

def errname(e):
    return errno.errorcode.get(e, str(e))

def seize(pid):
    ctypes.set_errno(0)
    if libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0:
        libc.ptrace(PTRACE_DETACH, pid, None, None)
        return 'ok'
    return errname(ctypes.get_errno())

ADDR = id(b'probe')  # mapped at the same address in every fork of this interpreter

def vm_read(pid, addr=ADDR):
    buf = ctypes.create_string_buffer(8)
    local, remote = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8), IoVec(addr, 8)
    ctypes.set_errno(0)
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 8:
        return 'ok'
    return errname(ctypes.get_errno())

def mem_read(pid, addr=ADDR):
    try:
        with open('/proc/%d/mem' % pid, 'rb', buffering=0) as f:
            f.seek(addr)
            f.read(8)
        return 'ok'
    except OSError as e:
        return errname(e.errno)
"""


def test_ptrace_cannot_reach_processes_outside_the_sandbox(sec, helpers):
    """Protection: the sandbox's private pid namespace.

    The processes worth attacking live on the host: the bridge (it holds the downstream servers'
    secrets and the engine socket), its children (podman API service, downstream servers), the
    engine's monitor (conmon / containerd-shim) and the test runner. Their pids are handed to
    sandbox code, which tries PTRACE_SEIZE, kill(pid, 0), process_vm_readv and /proc/<pid>: every
    one must answer ESRCH (no such process), and /proc must list only uid-65534 processes.
    With the host's pid namespace (`--pid=host`) these pids would exist inside: the calls would
    fail with EPERM instead (or succeed against same-uid processes) and /proc would show them,
    so this test fails.
    """
    _cid, info = _sandbox(sec, helpers)
    sandbox_host_pid = int(info["State"]["Pid"])
    assert sandbox_host_pid > 0, info["State"]
    targets = {"bridge": sec.pid, "test-runner": os.getpid(), "sandbox-pid1-host-number": sandbox_host_pid}
    monitor = _host_ppid(sandbox_host_pid)
    if monitor and monitor > 1:
        targets["engine-monitor"] = monitor
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _host_ppid(int(entry)) == sec.pid:
            targets[f"bridge-child-{entry}"] = int(entry)

    seen = probe(sec, _PTRACE_PRELUDE + r"""
targets = json.loads(__TARGETS__)
out = {'pidns': os.readlink('/proc/self/ns/pid'), 'visible': {}, 'targets': {}}
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            out['visible'][p] = [l.split()[1:] for l in open('/proc/%s/status' % p) if l.startswith('Uid:')][0]
        except OSError:
            pass
for name, pid in targets.items():
    r = {'pid': pid, 'proc_entry': os.path.exists('/proc/%d' % pid), 'seize': seize(pid), 'vm_read': vm_read(pid)}
    try:
        os.kill(pid, 0)
        r['kill0'] = 'ok'
    except OSError as e:
        r['kill0'] = errname(e.errno)
    out['targets'][name] = r
print(json.dumps(out))
""".replace("__TARGETS__", repr(json.dumps(targets))))

    # The probe ran in the sandbox's own pid namespace, not in the host's.
    assert seen["pidns"] != os.readlink("/proc/self/ns/pid"), seen
    try:
        assert seen["pidns"] == os.readlink(f"/proc/{sandbox_host_pid}/ns/pid"), (seen["pidns"], sandbox_host_pid)
    except PermissionError:
        pass  # the engine's processes belong to another user: the cross-check is not possible
    # Only the sandbox's own processes are visible, all running as nobody.
    assert seen["visible"], seen
    for pid, uids in seen["visible"].items():
        assert uids == ["65534"] * 4, f"pid {pid} in the sandbox runs with uids {uids}: {seen}"
    for name, r in seen["targets"].items():
        assert r["proc_entry"] is False, (name, r)
        assert r["seize"] == "ESRCH", (name, r)
        assert r["kill0"] == "ESRCH", (name, r)
        # docker's seccomp profile refuses process_vm_readv (EPERM) before looking the pid up.
        assert r["vm_read"] in {"ESRCH", "EPERM"}, (name, r)


def test_ptrace_of_a_process_that_forbids_it_is_refused(bridge):
    """Protection: no CAP_SYS_PTRACE inside the sandbox (cap-drop ALL, non-root user).

    Between two processes of the same uid the kernel allows ptrace (this kernel has no Yama, whose
    default scope would still allow tracing one's children, and the engines' default seccomp
    profiles allow ptrace), so sandbox code may trace its own children and they it;
    they are no more privileged than the code itself. What it must not do is trace a process that
    made itself non-dumpable (PR_SET_DUMPABLE 0, as privileged or secret-holding programs do):
    only CAP_SYS_PTRACE overrides that. A child that opts out is attacked with PTRACE_SEIZE,
    process_vm_readv and /proc/<pid>/mem; each must be refused. Measured with the same image
    under podman: with `--cap-add SYS_PTRACE` (as uid 65534 or root) the seize and the
    process_vm_readv succeed, so this test fails if the capability comes back.
    """
    # A fresh bridge, so that no earlier test's processes are around.
    seen = probe(bridge, _PTRACE_PRELUDE + r"""
def child_then(mark_nondumpable):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if mark_nondumpable:
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        os.write(w, b'x')
        time.sleep(60)
        os._exit(0)
    os.close(w)
    os.read(r, 1)  # the child is set up
    os.close(r)
    try:
        status = {l.split(':')[0]: l.split()[1:] for l in open('/proc/%d/status' % pid) if l.startswith(('Uid:', 'CapEff:'))}
        res = {'seize': seize(pid), 'vm_read': vm_read(pid), 'mem': mem_read(pid), 'status': status}
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return res
out = {'nondumpable_child': child_then(True),
       'plain_child': child_then(False),  # observed only: same-uid tracing is allowed by design
       'my_caps': [l.split()[1] for l in open('/proc/self/status') if l.startswith(('CapEff:', 'CapPrm:', 'CapBnd:'))]}
print(json.dumps(out))
""")
    assert seen["my_caps"] == ["0000000000000000"] * 3, seen
    nd = seen["nondumpable_child"]
    assert nd["status"]["Uid"] == ["65534"] * 4, seen  # same uid: only the dumpable flag protects it
    assert nd["seize"] == "EPERM", seen
    assert nd["vm_read"] == "EPERM", seen
    assert nd["mem"] in {"EACCES", "EPERM"}, seen


def test_setuid_binaries_do_not_raise_privileges(bridge):
    """Protection: no-new-privileges (NoNewPrivs=1), which makes execve ignore set-uid/set-gid bits.

    The image keeps the usual set-uid-root and set-gid-shadow programs (su, passwd, mount,
    chage, unix_chkpwd...) and its root filesystem is not mounted nosuid, so no-new-privileges
    is what stands between sandbox code and euid 0 (root owns /etc/shadow and every system file,
    capabilities or not). Every such binary found in the image is executed:
      - with LD_SHOW_AUXV=1, the dynamic loader prints the kernel's verdict: AT_EUID/AT_EGID must
        stay 65534 and AT_SECURE 0. After a real set-uid exec, AT_SECURE is 1 and the loader drops
        LD_SHOW_AUXV, so nothing is printed and the test fails;
      - the password prompters (su, passwd, chfn) are caught while they wait for a password,
        and their /proc/<pid>/status must show uid and gid 65534 in all four slots (real,
        effective, saved, filesystem).
    Measured with the same image under podman without `--security-opt no-new-privileges`: no
    auxv is printed and `su` waits with `Uid: 65534 0 0 0`. Planting a new set-uid binary is
    covered elsewhere: / is read-only and every writable tmpfs is nosuid,noexec
    (test_root_mount_is_read_only, test_scratch_dirs_writable_but_not_executable).
    """
    # A fresh bridge, as in test_ptrace_of_a_process_that_forbids_it_is_refused: this probe forks.
    seen = probe(bridge, r"""
import json, os, select, stat, subprocess, time
found = {}
for root, dirs, files in os.walk('/'):
    if root == '/':
        dirs[:] = [d for d in dirs if d not in ('proc', 'sys', 'dev', 'tmp', 'workspace', 'run')]
    for f in files:
        p = os.path.join(root, f)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            found[os.path.realpath(p)] = {'setuid': bool(st.st_mode & stat.S_ISUID), 'setgid': bool(st.st_mode & stat.S_ISGID),
                                          'owner': st.st_uid, 'group': st.st_gid}
env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'LANG': 'C', 'LD_SHOW_AUXV': '1'}
# Harmless arguments; unix_chkpwd sleeps 10 s unless called the way PAM calls it.
args = {'unix_chkpwd': ['nobody', 'chkexpiry']}
for path, info in found.items():
    p = subprocess.Popen([path] + args.get(os.path.basename(path), ['--help']), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, _ = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()  # the loader prints the auxv before main() runs: what was printed still counts
        out, _ = p.communicate()
    lines = out.decode('utf-8', 'replace').splitlines()
    aux = dict(l.split(':', 1) for l in lines if l.startswith('AT_') and ':' in l)
    info['auxv'] = {k: aux[k].strip() for k in ('AT_UID', 'AT_EUID', 'AT_GID', 'AT_EGID', 'AT_SECURE') if k in aux}
prompts = {}
for argv in (['su', 'root', '-c', 'id'], ['passwd'], ['chfn']):
    path = '/usr/bin/' + argv[0]
    if os.path.realpath(path) not in found:
        continue
    p = subprocess.Popen([path] + argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    said, deadline = b'', time.monotonic() + 20
    while b'assword' not in said and time.monotonic() < deadline:
        ready, _, _ = select.select([p.stderr], [], [], 0.5)
        if ready:
            chunk = os.read(p.stderr.fileno(), 4096)
            if not chunk:
                break
            said += chunk
    try:
        # Read while it waits for the password (a zombie still shows its final ids).
        ids = {l.split(':')[0]: l.split()[1:] for l in open('/proc/%d/status' % p.pid) if l.startswith(('Uid:', 'Gid:'))}
    except OSError as e:
        ids = str(e)
    p.kill()
    p.communicate()
    prompts[argv[0]] = {'prompted': b'assword' in said, 'ids': ids, 'said': said.decode('utf-8', 'replace')[-200:]}
print(json.dumps({'found': found, 'prompts': prompts}))
""", timeout=120)
    found = seen["found"]
    assert any(i["setuid"] and i["owner"] == 0 for i in found.values()), (
        f"no set-uid-root binary in the image, so this test tries nothing; found {found}"
    )
    for path, info in found.items():
        assert info["auxv"] == {"AT_UID": "65534", "AT_EUID": "65534", "AT_GID": "65534", "AT_EGID": "65534",
                                "AT_SECURE": "0"}, f"{path} ran with raised privileges (or hid its auxv): {info}"
    assert seen["prompts"], f"none of su/passwd/chfn is set-uid in the image: {found}"
    for name, p in seen["prompts"].items():
        assert p["prompted"], (name, p)
        assert p["ids"] == {"Uid": ["65534"] * 4, "Gid": ["65534"] * 4}, (name, p)
