"""The sandbox's confinement (CONTRACT §4), checked from inside the sandbox by run_python code.

Each probe prints one JSON line so a failure shows exactly what the sandbox saw.
"""

from __future__ import annotations

import json
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
