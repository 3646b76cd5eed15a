"""The sandbox's confinement (GUIDE.md, "The sandbox"), checked from inside the sandbox by run_python
code: who the code runs as (nobody, no capabilities, no new privileges), no network, a read-only
root and writable but non-executable scratch directories.

Each probe prints one JSON line so a failure shows exactly what the sandbox saw. The `sec` bridge
is in shared_bridges.py.
"""

from __future__ import annotations

import pytest
from helpers_sandbox import probe

pytestmark = pytest.mark.engine  # confinement the engine applies to the container


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
