"""The sandbox's confinement (GUIDE.md, "The sandbox"), checked from inside the sandbox by run_python code.

Each probe prints one JSON line so a failure shows exactly what the sandbox saw.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest


def probe(bridge, code: str, timeout: int | None = None) -> dict:
    """Runs `code`, which must print exactly one JSON object as its last stdout line."""
    r = bridge.run(code, timeout=timeout)
    assert not r.is_error, str(r)
    lines = r.text.strip().splitlines()
    assert lines, str(r)
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def sec(bridge_factory):
    b = bridge_factory(name="security")
    yield b
    b.close()


def test_runs_as_nobody(sec):
    seen = probe(sec, "import os, json\nprint(json.dumps({'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(), 'groups': os.getgroups()}))")
    assert seen["uid"] == 65534 and seen["euid"] == 65534, seen
    assert seen["gid"] == 65534, seen
    assert 0 not in seen["groups"], seen


def test_no_capabilities_and_no_new_privs(sec):
    seen = probe(
        sec,
        "import json\n"
        "fields = {}\n"
        "for line in open('/proc/self/status'):\n"
        "    k, _, v = line.partition(':')\n"
        "    fields[k] = v.strip()\n"
        "print(json.dumps({k: fields.get(k) for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp')}))",
    )
    assert seen["CapEff"] == "0000000000000000", seen
    assert seen["CapPrm"] == "0000000000000000", seen
    assert seen["CapAmb"] == "0000000000000000", seen
    assert seen["NoNewPrivs"] == "1", seen


def test_no_network(sec):
    seen = probe(
        sec,
        "import json, socket, time\n"
        "out = {'ifaces': sorted(n for _, n in socket.if_nameindex())}\n"
        "t0 = time.monotonic()\n"
        "try:\n"
        "    s = socket.create_connection(('1.1.1.1', 53), timeout=5)\n"
        "    out['connect'] = 'connected'\n"
        "    s.close()\n"
        "except OSError as e:\n"
        "    out['connect'] = type(e).__name__ + ': ' + str(e)\n"
        "out['connect_s'] = round(time.monotonic() - t0, 2)\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 443)\n"
        "    out['dns'] = 'resolved'\n"
        "except OSError as e:\n"
        "    out['dns'] = type(e).__name__\n"
        "print(json.dumps(out))",
    )
    assert seen["connect"] != "connected", seen
    assert seen["dns"] != "resolved", seen
    assert seen["ifaces"] == ["lo"], seen


@pytest.mark.parametrize("directory", ["/", "/etc", "/usr", "/usr/lib", "/root", "/home"])
def test_root_filesystem_is_read_only(sec, directory):
    seen = probe(
        sec,
        "import errno, json, os\n"
        f"d = {directory!r}\n"
        "out = {'exists': os.path.isdir(d)}\n"
        "try:\n"
        "    with open(os.path.join(d, 'e2e-write-probe'), 'w') as f:\n"
        "        f.write('x')\n"
        "    out['write'] = 'ok'\n"
        "except OSError as e:\n"
        "    out['write'] = errno.errorcode.get(e.errno, str(e.errno))\n"
        "try:\n"
        "    os.mkdir(os.path.join(d, 'e2e-dir-probe'))\n"
        "    out['mkdir'] = 'ok'\n"
        "except OSError as e:\n"
        "    out['mkdir'] = errno.errorcode.get(e.errno, str(e.errno))\n"
        "print(json.dumps(out))",
    )
    if not seen["exists"]:
        pytest.skip(f"{directory} does not exist in the image")
    assert seen["write"] != "ok" and seen["mkdir"] != "ok", seen
    # As uid 65534 the kernel reports EACCES before it looks at the read-only mount; the mount
    # itself is checked in test_root_mount_is_read_only.
    assert seen["write"] in {"EROFS", "EACCES", "EPERM"}, seen
    assert seen["mkdir"] in {"EROFS", "EACCES", "EPERM"}, seen


def test_root_mount_is_read_only(sec):
    seen = probe(
        sec,
        "import json\n"
        "mounts = [l.split() for l in open('/proc/self/mounts')]\n"
        "root = [m for m in mounts if m[1] == '/']\n"
        "print(json.dumps({'root_opts': root[-1][3].split(',') if root else None,\n"
        "    'tmpfs': {m[1]: m[3].split(',') for m in mounts if m[1] in ('/tmp', '/workspace', '/var/tmp')}}))",
    )
    assert seen["root_opts"] is not None and "ro" in seen["root_opts"], seen
    for mnt in ("/tmp", "/workspace", "/var/tmp"):
        assert mnt in seen["tmpfs"], seen
        opts = seen["tmpfs"][mnt]
        assert "rw" in opts and "noexec" in opts and "nosuid" in opts, (mnt, opts)


@pytest.mark.parametrize("directory", ["/tmp", "/workspace", "/var/tmp"])
def test_scratch_dirs_writable_but_not_executable(sec, directory):
    seen = probe(
        sec,
        "import json, os, shutil, subprocess, stat\n"
        f"d = {directory!r}\n"
        "out = {}\n"
        "p = os.path.join(d, 'e2e-data.txt')\n"
        "with open(p, 'w') as f:\n"
        "    f.write('hello')\n"
        "out['roundtrip'] = open(p).read()\n"
        "true_bin = shutil.which('true') or '/bin/true'\n"
        "exe = os.path.join(d, 'e2e-true')\n"
        "shutil.copy(true_bin, exe)\n"
        "os.chmod(exe, 0o755)\n"
        "script = os.path.join(d, 'e2e-script.sh')\n"
        "with open(script, 'w') as f:\n"
        "    f.write('#!/bin/sh\\necho pwned\\n')\n"
        "os.chmod(script, 0o755)\n"
        "out['mode'] = oct(stat.S_IMODE(os.stat(script).st_mode))\n"
        "for name, path in (('binary', exe), ('script', script)):\n"
        "    try:\n"
        "        r = subprocess.run([path], capture_output=True, text=True, timeout=10)\n"
        "        out[name] = 'ran rc=%d %s' % (r.returncode, r.stdout.strip())\n"
        "    except OSError as e:\n"
        "        out[name] = type(e).__name__\n"
        "print(json.dumps(out))",
    )
    assert seen["roundtrip"] == "hello", seen
    assert seen["mode"] == "0o755", seen
    assert seen["binary"] == "PermissionError", seen
    assert seen["script"] == "PermissionError", seen


def test_fork_bomb_is_stopped_by_the_pids_limit(sec):
    # Forks until the kernel refuses; children just sleep (and are reaped below). The pids limit
    # (MCP_BRIDGE_PIDS, default 128) must stop it long before the timeout.
    code = (
        "import os, json, signal, time\n"
        "children, failure = [], None\n"
        "t0 = time.monotonic()\n"
        "try:\n"
        "    while len(children) < 5000 and time.monotonic() - t0 < 15:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            try:\n"
        "                time.sleep(60)\n"
        "            finally:\n"
        "                os._exit(0)\n"
        "        children.append(pid)\n"
        "except OSError as e:\n"
        "    failure = type(e).__name__ + ': ' + str(e)\n"
        "for pid in children:\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        "for pid in children:\n"
        "    try:\n"
        "        os.waitpid(pid, 0)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(json.dumps({'forked': len(children), 'failure': failure}))\n"
    )
    seen = probe(sec, code, timeout=40)
    assert seen["failure"] is not None, f"fork was never refused: {seen}"
    assert seen["forked"] < 128, seen
    # The bridge still answers and the interpreter (and its state) survived.
    r = sec.run("print('after fork bomb')")
    assert not r.is_error and r.text.strip() == "after fork bomb", str(r)


def test_real_fork_bomb_does_not_take_the_bridge_down(sec):
    # A genuine fork bomb: every child forks too, until the pids limit refuses. Children then
    # exit; the original process reaps what it can (orphans are re-parented to it or to the
    # container's init). The call must come back as a tool result and the bridge must answer.
    code = (
        "import os, time\n"
        "bomb_root = os.getpid()\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        if os.getpid() != bomb_root:\n"
        "            os._exit(0)\n"
        "        break\n"
        "reaped, t0 = 0, time.monotonic()\n"
        "while time.monotonic() - t0 < 5:\n"
        "    try:\n"
        "        pid, _ = os.waitpid(-1, os.WNOHANG)\n"
        "    except ChildProcessError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(0.05)\n"
        "    else:\n"
        "        reaped += 1\n"
        "print('bomb over', reaped > 0)\n"
    )
    r = sec.run(code, timeout=30)
    assert r.structured is not None and "status" in r.structured, str(r)
    assert not r.is_error, str(r)
    assert "bomb over True" in r.text, str(r)
    nxt = sec.run("print('alive after real fork bomb')", timeout=30)
    assert not nxt.is_error, str(nxt)
    assert "alive after real fork bomb" in nxt.text, str(nxt)


def test_orphans_are_reaped_and_a_fork_bomb_dies(sec):
    # Protection: the sandbox's pid 1 is a minimal init (entrypoint/boot.py) that reaps processes
    # re-parented to it, but not while the pids limit is nearly used up. So (1) the real fork
    # bomb of the test above dies out (with an eager reaper it lives on in the freed slots; with
    # none its zombies fill the pids limit for good), and (2) each `sh -c 'sleep 0.01 &'`
    # leaves an orphan that is reaped: without the init, fork fails with EAGAIN after about
    # MCP_BRIDGE_PIDS (128) of them.
    code = (
        "import json, os, subprocess, time\n"
        "def procs():\n"
        "    out = []\n"
        "    for p in filter(str.isdigit, os.listdir('/proc')):\n"
        "        try:\n"
        "            out.append(open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[0])\n"
        "        except (OSError, IndexError):\n"
        "            pass\n"
        "    return out\n"
        "t0 = time.monotonic()\n"
        "while len(procs()) > 2 and time.monotonic() - t0 < 10:\n"
        "    time.sleep(0.1)\n"
        "after_bomb = len(procs())\n"
        "failure = None\n"
        "for i in range(300):\n"
        "    try:\n"
        "        subprocess.run(['sh', '-c', 'sleep 0.01 &'], check=True)\n"
        "    except (OSError, subprocess.CalledProcessError) as e:\n"
        "        failure = '%d: %s' % (i, e)\n"
        "        break\n"
        "time.sleep(0.5)\n"
        "print(json.dumps({'after_bomb': after_bomb, 'failure': failure,\n"
        "                  'zombies': procs().count('Z'), 'pid': os.getpid(),\n"
        "                  'echo': subprocess.run(['echo', 'forked'], capture_output=True,\n"
        "                                         text=True).stdout.strip()}))\n"
    )
    seen = probe(sec, code, timeout=120)
    assert seen["after_bomb"] == 2, f"the fork bomb's processes are still there: {seen}"
    assert seen["failure"] is None, seen
    assert seen["zombies"] == 0, seen
    assert seen["echo"] == "forked", seen
    assert seen["pid"] != 1, f"the entrypoint should run under the init, not as pid 1: {seen}"


def test_memory_limit_kills_the_sandbox_and_next_call_works(bridge_factory):
    # Own bridge: this test deliberately destroys the sandbox's state.
    b = bridge_factory(name="oom")
    try:
        r = b.run("oom_marker = 'before'\nprint('ready')")
        assert not r.is_error, str(r)
        r = b.run("hog = bytearray(2 * 1024 ** 3)\nprint('allocated', len(hog))", timeout=60)
        assert r.is_error, f"allocating 2 GB should not succeed under the memory limit\n{r}"
        assert re.search(r"out of memory|killed|died|MemoryError", r.text, re.I), str(r)

        nxt = b.run("print('after oom', 'oom_marker' in globals())", timeout=60)
        assert not nxt.is_error, str(nxt)
        notice = (nxt.structured or {}).get("notice", "")
        if "MemoryError" in r.text and not notice:
            # The allocation failed in-process (no kill): state must then be intact.
            assert nxt.text.strip().endswith("after oom True"), str(nxt)
        else:
            assert nxt.text.strip().endswith("after oom False"), str(nxt)
            assert re.search(r"state|restarted|afresh|gone", notice, re.I), str(nxt)
            assert "[note]" in nxt.text, str(nxt)
    finally:
        b.close()


def test_oom_kill_leaves_no_file_in_the_bridge_working_dir(bridge_factory):
    b = bridge_factory(name="oom-cwd")
    try:
        r = b.run("hog = bytearray(2 * 1024 ** 3)", timeout=60)
        assert r.is_error, str(r)
        assert not b.run("print(1)").is_error
        stray = sorted(p.name for p in b.cwd.iterdir())
        assert stray == [], f"files appeared in the bridge's working directory {b.cwd}: {stray}"
    finally:
        b.close()


# --- mcp-code-bridge doctor -------------------------------------------------------------------------


def _doctor(env, bin_path, cwd):
    return subprocess.run([bin_path, "doctor"], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_doctor_passes_every_check_on_the_real_engine(cli_env, helpers, cli_cwd):
    p = _doctor(cli_env, helpers.BRIDGE_BIN, cli_cwd)
    assert p.returncode == 0, f"stdout={p.stdout}\nstderr={p.stderr[-2000:]}"
    names = [line[6:27].strip() for line in p.stdout.splitlines()]
    for name in ["engine", "image", "sandbox", "user", "capabilities", "no-new-privileges", "seccomp",
                 "read-only root", "noexec /tmp", "no network", "memory limit", "pids limit",
                 "network blocked", "/ not writable", "/usr not writable", "/tmp not executable"]:
        assert name in names, f"{name} missing:\n{p.stdout}"
    assert all(line.startswith("PASS") for line in p.stdout.splitlines()), p.stdout


def test_doctor_fails_clearly_without_the_engine(cli_env, helpers, cli_cwd):
    env = dict(cli_env, MCP_BRIDGE_RUNTIME="docker", DOCKER_HOST="unix:///nonexistent/docker.sock")
    p = _doctor(env, helpers.BRIDGE_BIN, cli_cwd)
    assert p.returncode != 0, p.stdout
    first = p.stdout.splitlines()[0]
    assert first.startswith("FAIL  engine"), p.stdout


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


def _inspect(helpers, cid: str) -> dict:
    """The engine's `inspect` document for container `cid`."""
    out = subprocess.run([helpers.engine, "inspect", cid], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{helpers.engine} inspect {cid} failed: {out.stderr}"
    return json.loads(out.stdout)[0]


def _sandbox(bridge, helpers) -> tuple[str, dict]:
    """Starts (if needed) the bridge's sandbox and returns its container id and inspect document."""
    r = bridge.run("print('sandbox up')")
    assert r.text.strip().endswith("sandbox up"), str(r)
    cids = bridge.containers(running_only=True)
    assert len(cids) == 1, f"expected one running sandbox for bridge {bridge.pid}: {cids}"
    return cids[0], _inspect(helpers, cids[0])


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


_FLOOD_TOKEN = "log-flood-7c41e9"


def _container_storage(helpers, cid: str, info: dict) -> list[str]:
    """The engine's on-disk directories (and log file) of container `cid`, where a log driver writes."""
    paths = [info.get("LogPath") or "", (info.get("HostConfig", {}).get("LogConfig") or {}).get("Path") or ""]
    if helpers.engine == "podman":
        paths.append(info.get("StaticDir") or "")
        out = subprocess.run(["podman", "info", "--format", "{{.Store.RunRoot}}"], capture_output=True, text=True, timeout=60)
        if out.returncode == 0 and out.stdout.strip():
            paths.append(os.path.join(out.stdout.strip(), "overlay-containers", cid, "userdata"))
    else:
        out = subprocess.run(["docker", "info", "--format", "{{.DockerRootDir}}"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        paths.append(os.path.join(out.stdout.strip(), "containers", cid))
    return [p for p in paths if p and os.path.exists(p)]


def _bytes_under(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            try:
                if os.path.isfile(p) and not os.path.islink(p):
                    total += os.path.getsize(p)
            except OSError:
                pass  # removed meanwhile
    return total


def test_output_flood_leaves_no_container_log_on_the_host(bridge, helpers):
    """Protection: the sandbox container's log driver is `none`.

    Sandbox code writes 64 MiB straight to the container's stdout/stderr file descriptors
    (os.write on fds 1 and 2, below the entrypoint's capture of print()). With the engines'
    default log drivers (podman k8s-file, docker json-file) every byte of that lands in a file
    in the engine's storage (measured: an 8 MiB flood leaves an 8.7 MiB ctr.log / -json.log),
    and with journald in the journal, so a looping sandbox could fill the host's disk.
    Checked: the engine reports log driver `none`; the container's storage directories did not
    grow by more than 1 MiB; the engine has no log to show (`logs` returns none of the flood,
    which also covers drivers that log outside those directories); the bridge's own stderr (kept
    by MCP clients as a log file) did not grow with it either; and the bridge keeps serving.
    """
    cid, info = _sandbox(bridge, helpers)
    assert (info["HostConfig"].get("LogConfig") or {}).get("Type") == "none", info["HostConfig"].get("LogConfig")
    storage = _container_storage(helpers, cid, info)
    assert storage, f"could not find {helpers.engine}'s storage for container {cid}"
    before = {p: _bytes_under(p) for p in storage}
    stderr_before = bridge.stderr_path.stat().st_size

    flood_mib = 64
    r = bridge.run(
        "import os\n"
        f"line = b'{_FLOOD_TOKEN} ' + b'x' * 1000 + b'\\n'\n"
        "chunk = line * 64\n"
        f"total, written = {flood_mib} * 1024 * 1024, 0\n"
        "while written < total:\n"
        "    written += os.write(1 + (written // len(chunk)) % 2, chunk)\n"
        "print('flooded', written)\n",
        timeout=180,
        wait=240,
    )
    assert not r.is_error, str(r)
    last = r.text.strip().splitlines()[-1].split()
    assert last[0] == "flooded" and int(last[1]) >= flood_mib * 1024 * 1024, str(r)

    grown = {p: _bytes_under(p) - before[p] for p in storage}
    assert all(g < 1024 * 1024 for g in grown.values()), f"the container's storage grew during the flood: {grown}"
    logs = subprocess.run([helpers.engine, "logs", "--tail", "20", cid], capture_output=True, text=True,
                          errors="replace", timeout=60)
    assert _FLOOD_TOKEN not in logs.stdout + logs.stderr, f"{helpers.engine} kept a log of the flood: {logs.stdout[-500:]}"
    stderr_grown = bridge.stderr_path.stat().st_size - stderr_before
    assert stderr_grown < 1024 * 1024, f"the bridge's stderr grew by {stderr_grown} bytes during the flood"

    nxt = bridge.run("print('still serving')")
    assert not nxt.is_error and nxt.text.strip().endswith("still serving"), str(nxt)
