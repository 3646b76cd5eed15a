"""The bridge's exit (GUIDE.md, "Timeouts, crashes and restarts"): leftovers of a SIGKILLed bridge
removed by the next one (and only those), its container removed on a clean exit, an exit on stdin
close without a signal, and a client leaving mid-call.

Every test gets its own bridge (these tests kill things).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from helpers_host import processes
from helpers_lifecycle import proc_cmdlines_containing as _proc_cmdlines_containing

pytestmark = pytest.mark.engine  # containers left over, removed, labelled on the engine

# --- the bridge exits -----------------------------------------------------------------------------


def test_sigkilled_bridge_leftovers_are_removed_by_the_next_bridge(bridge_factory, helpers):
    first = bridge_factory(name="doomed-bridge")
    dead_pid = first.pid
    try:
        r = first.run("print('first bridge')")
        assert not r.is_error, str(r)
        before = first.containers()
        assert before, "the first bridge should own a sandbox container"
        first.sigkill()
        assert helpers.poll(lambda: not helpers.pid_alive(dead_pid), timeout=10), "bridge survived SIGKILL"
        # Its private podman service must not outlive it either (PR_SET_PDEATHSIG).
        service = helpers.poll(lambda: not _proc_cmdlines_containing(f"podman-{dead_pid}."), timeout=10)
        assert service, f"podman service of the killed bridge still runs: {_proc_cmdlines_containing(f'podman-{dead_pid}.')}"
    finally:
        first.close()

    second = bridge_factory(name="next-bridge")
    try:
        r = second.run("print('second bridge')")
        assert not r.is_error, str(r)
        left = helpers.poll(lambda: not helpers.bridge_containers(dead_pid), timeout=10)
        assert left, f"containers of dead bridge {dead_pid} remain: {helpers.bridge_containers(dead_pid)}"
        # The new bridge kept its own sandbox.
        assert second.containers(running_only=True), "the new bridge's sandbox should be running"
    finally:
        second.close()


def _unused_pid() -> int:
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    for pid in range(pid_max - 1, 1, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    raise AssertionError("no free pid")


def _start_ticks(pid: int) -> str:
    stat = open(f"/proc/{pid}/stat").read()
    return stat[stat.rfind(")") + 2 :].split()[19]


def test_start_removes_only_leftovers_of_dead_bridges_on_this_host(bridge_factory, helpers):
    """Planted containers: a dead bridge's on this host must go; a live one's and another
    host's must stay (the bridge never touches anything that is not provably its leftover)."""
    import uuid

    eng = helpers.engine
    tag = uuid.uuid4().hex[:8]
    dead = _unused_pid()
    me = os.getpid()
    plants = {
        "dead-here": {"mcp-code-bridge.pid": str(dead), "mcp-code-bridge.host": helpers.HOSTNAME,
                      "mcp-code-bridge.pid-start": "1"},
        "live-here": {"mcp-code-bridge.pid": str(me), "mcp-code-bridge.host": helpers.HOSTNAME,
                      "mcp-code-bridge.pid-start": _start_ticks(me)},
        "dead-elsewhere": {"mcp-code-bridge.pid": str(dead), "mcp-code-bridge.host": f"e2e-other-host-{tag}",
                           "mcp-code-bridge.pid-start": "1"},
    }
    ids: dict[str, str] = {}
    try:
        for name, labels in plants.items():
            cmd = [eng, "create", "--name", f"e2e-plant-{name}-{tag}", "--label", "mcp-code-bridge=1",
                   "--label", f"e2e-plant={tag}"]
            for k, v in labels.items():
                cmd += ["--label", f"{k}={v}"]
            cmd += [helpers.IMAGE, "true"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            ids[name] = out.stdout.strip()

        b = bridge_factory(name="janitor")
        try:
            r = b.run("print('janitor')")
            assert not r.is_error, str(r)

            def present(cid: str) -> bool:
                return cid in helpers.containers({"e2e-plant": tag})

            assert helpers.poll(lambda: not present(ids["dead-here"]), timeout=10), (
                f"leftover of dead bridge pid {dead} on this host was not removed\n{b.stderr_tail()}"
            )
            assert present(ids["live-here"]), "a container of a live process was removed"
            assert present(ids["dead-elsewhere"]), "a container of another host's bridge was removed"
        finally:
            b.close()
    finally:
        for cid in ids.values():
            subprocess.run([eng, "rm", "-f", cid], capture_output=True, timeout=60)


def test_bridge_exit_removes_its_container(bridge_factory, helpers):
    b = bridge_factory(name="clean-exit")
    pid = b.pid
    r = b.run("print('about to exit')")
    assert not r.is_error, str(r)
    assert b.containers(), "the bridge should own a sandbox container"
    t0 = time.monotonic()
    b.close()  # closes the bridge's stdin, as MCP clients do
    exited = helpers.poll(lambda: not helpers.pid_alive(pid), timeout=15)
    exit_s = time.monotonic() - t0
    assert exited, "the bridge did not exit after its stdin closed"
    gone = helpers.poll(lambda: not helpers.bridge_containers(pid), timeout=10)
    assert gone, f"containers left by bridge {pid}: {helpers.bridge_containers(pid)}\n{b.stderr_tail()}"
    assert helpers.poll(lambda: not _proc_cmdlines_containing(f"podman-{pid}."), timeout=10), (
        f"podman service of bridge {pid} still runs"
    )
    log = b.stderr_path.read_text(errors="replace")
    assert exit_s < 12, f"exit took {exit_s:.1f} s"
    assert "MCP session ended" in log or "input stream terminated" in log, b.stderr_tail()


def test_bridge_exits_on_stdin_close_without_being_signalled(bridge_factory, helpers):
    # The bridge must end on stdin EOF by itself, not because the MCP SDK escalates to SIGTERM
    # (after 2 s). Which path ran is read from its log, not from wall time (shared machines).
    b = bridge_factory(name="prompt-exit")
    pid = b.pid
    assert not b.run("print(1)").is_error
    b.close()
    assert helpers.poll(lambda: not helpers.pid_alive(pid), timeout=15, interval=0.02), "bridge still runs"
    log = b.stderr_path.read_text(errors="replace")
    assert "MCP session ended" in log, b.stderr_tail()
    assert "SIGTERM received" not in log, f"the bridge needed a SIGTERM to exit\n{b.stderr_tail()}"


# --- the client goes away mid-call --------------------------------------------------------------


def test_client_disconnecting_mid_call_leaves_nothing_running(bridge_factory, helpers, stub_ready):
    import servers as S

    marker = "disconnect-" + str(os.getpid())
    config = {"mcpServers": {"stub": S.stub("stub", env={"DISCONNECT_MARKER": marker})}}
    b = bridge_factory(name="disconnect", config=config)
    pid = b.pid
    assert not b.run("print(1)", servers=["stub"]).is_error
    stubs = [p for p, argv in processes() if argv and argv[0].endswith(b"stub-mcp")
             and _env_has(p, f"DISCONNECT_MARKER={marker}")]
    assert stubs, "the stub server was started"
    pending = b.run_async("import time\ntime.sleep(60)", timeout=90, wait=120)
    assert helpers.poll(lambda: b.containers(running_only=True), timeout=10)
    time.sleep(0.5)  # the call is running in the sandbox now
    b.close()  # the client goes away (stdin EOF) in the middle of the call
    pending.cancel()
    assert helpers.poll(lambda: not helpers.pid_alive(pid), timeout=15, interval=0.05), "bridge still runs"
    assert "SIGTERM received" not in b.stderr_path.read_text(errors="replace"), b.stderr_tail()
    assert helpers.poll(lambda: not helpers.containers({"mcp-code-bridge.pid": str(pid)}), timeout=20), \
        "the sandbox was removed"
    assert helpers.poll(lambda: not any(helpers.pid_alive(p) for p in stubs), timeout=15), \
        "the downstream server was stopped"


def _env_has(pid: int, entry: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry.encode() in f.read().split(b"\0")
    except OSError:
        return False


def test_execs_at_once_warn_only_of_leftovers_really_left(helpers, cli_env, cli_cwd):
    """Several `exec`s at once, each sweeping the same dead bridge's leftovers while it exits
    (issue 31): a removal cut short by the bridge's own exit (its podman service stopped: "client
    error (Connect)") or won by another bridge is no warning; a warning means a container is
    really left. The leftovers are running and slow to stop, so every sweep is still removing
    them when its `exec` ends."""
    import uuid

    eng = helpers.engine
    tag = uuid.uuid4().hex[:8]
    labels = {"mcp-code-bridge": "1", "mcp-code-bridge.pid": str(_unused_pid()),
              "mcp-code-bridge.host": helpers.HOSTNAME, "mcp-code-bridge.pid-start": "1", "e2e-plant": tag}
    ids = []
    try:
        for i in range(3):
            cmd = [eng, "run", "-d", "--name", f"e2e-slow-leftover-{i}-{tag}", "--stop-timeout", "60",
                   "--entrypoint", "sleep"]
            for k, v in labels.items():
                cmd += ["--label", f"{k}={v}"]
            out = subprocess.run(cmd + [helpers.IMAGE, "600"], capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            ids.append(out.stdout.strip())
        runs = [subprocess.Popen([helpers.BRIDGE_BIN, "exec", f"print({n})"], cwd=cli_cwd, env=cli_env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for n in range(6)]
        done = [(p, *p.communicate(timeout=300)) for p in runs]
        for n, (p, out, err) in enumerate(done):
            assert p.returncode == 0 and out.strip() == str(n), f"rc={p.returncode}\n{out}\n{err[-3000:]}"
        warned = [line for _, _, err in done for line in err.splitlines() if "could not remove a sandbox" in line]
        left = helpers.containers({"e2e-plant": tag})  # the next bridge's to remove
        assert not warned, f"warned of removals cut short by the bridges' exits ({len(left)} left for the " \
                           "next bridge):\n" + "\n".join(warned[:5])
    finally:
        for cid in ids:
            subprocess.run([eng, "kill", cid], capture_output=True, timeout=120)
            subprocess.run([eng, "rm", "-f", cid], capture_output=True, timeout=120)
