"""The sandbox's resource limits (GUIDE.md, "The sandbox"): the pids limit against fork bombs and
orphans, the memory limit (an OOM kill, then a fresh sandbox), and an output flood that leaves no
container log on the host; the bridge keeps serving after each.

Each probe prints one JSON line so a failure shows exactly what the sandbox saw. The `sec` bridge
is in shared_bridges.py.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from helpers_sandbox import probe
from helpers_sandbox import sandbox_of as _sandbox

pytestmark = pytest.mark.engine  # pids and memory limits and the log driver of the engine


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
