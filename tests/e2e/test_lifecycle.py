"""Timeouts, sandbox deaths, the engine going away, bridge exits and huge output (GUIDE.md, "Timeouts, crashes and restarts").

Every test gets its own bridge (these tests kill things).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest
from conftest import pid_alive, processes

STATE_RESET = re.compile(r"state|variables|gone|afresh|restarted", re.I)


def _proc_cmdlines_containing(needle: str) -> list[tuple[int, str]]:
    found = []
    for pid, argv in processes():
        cmd = b" ".join(argv).decode(errors="replace")
        if needle in cmd:
            found.append((pid, cmd.strip()))
    return found


def _warm(bridge, name: str = "warm") -> None:
    """Starts the sandbox so later timings exclude the container start."""
    r = bridge.run(f"print('{name}')")
    assert not r.is_error and r.text.strip() == name, str(r)


def _own_running_container(bridge, helpers) -> str:
    cids = helpers.poll(lambda: bridge.containers(running_only=True), timeout=10)
    assert len(cids) == 1, f"expected exactly one running sandbox for bridge {bridge.pid}, got {cids}"
    return cids[0]


# --- timeouts -------------------------------------------------------------------------------------


def test_busy_loop_times_out_promptly(bridge):
    _warm(bridge)
    t0 = time.monotonic()
    r = bridge.run("while True:\n    pass\n", timeout=2)
    wall = time.monotonic() - t0
    assert r.is_error, str(r)
    assert r.status == "timeout", str(r)
    assert re.search(r"timed out", r.text, re.I), str(r)
    assert wall < 4.0, f"timeout=2 took {wall:.2f} s of wall time\n{r}"

    nxt = bridge.run("print('after busy loop')")
    assert not nxt.is_error and "after busy loop" in nxt.text, str(nxt)


def test_sleep_is_interrupted_and_state_survives(bridge):
    r = bridge.run("lc_x = 5")
    assert not r.is_error, str(r)
    t0 = time.monotonic()
    r = bridge.run("import time\ntime.sleep(100)\n", timeout=2)
    wall = time.monotonic() - t0
    assert r.is_error, str(r)
    assert r.status == "timeout", str(r)
    assert "interrupted" in r.text.lower(), str(r)
    assert wall < 4.0, f"timeout=2 took {wall:.2f} s of wall time\n{r}"

    nxt = bridge.run("print(lc_x)")
    assert not nxt.is_error, str(nxt)
    assert nxt.text.strip() == "5", str(nxt)
    assert "notice" not in (nxt.structured or {}), str(nxt)


def test_default_timeout_is_capped_by_max_timeout(bridge_factory):
    # MCP_BRIDGE_MAX_TIMEOUT caps what a call may ask for.
    b = bridge_factory(env={"MCP_BRIDGE_TIMEOUT": "1", "MCP_BRIDGE_MAX_TIMEOUT": "2"}, name="maxtimeout")
    try:
        _warm(b)
        t0 = time.monotonic()
        r = b.run("import time\ntime.sleep(60)\n", timeout=100)
        wall = time.monotonic() - t0
        assert r.is_error and r.status == "timeout", str(r)
        assert wall < 4.0, f"asked for 100 s with MCP_BRIDGE_MAX_TIMEOUT=2, took {wall:.2f} s\n{r}"
        t0 = time.monotonic()
        r = b.run("import time\ntime.sleep(60)\n")
        wall = time.monotonic() - t0
        assert r.is_error and r.status == "timeout", str(r)
        assert wall < 3.0, f"default MCP_BRIDGE_TIMEOUT=1 took {wall:.2f} s\n{r}"
    finally:
        b.close()


# --- the sandbox dies -----------------------------------------------------------------------------


def test_container_killed_between_calls(bridge, helpers):
    r = bridge.run("lc_y = 'doomed'\nprint('set')")
    assert not r.is_error, str(r)
    cid = _own_running_container(bridge, helpers)
    helpers.kill_container(cid)
    gone = helpers.poll(lambda: cid not in bridge.containers(running_only=True), timeout=10)
    assert gone, f"container {cid} still running after kill"
    # "Between calls": give the bridge a moment to observe the death (a call racing the kill
    # is covered by test_call_right_after_outside_kill below).
    time.sleep(1.0)

    r = bridge.run("print('after kill', 'lc_y' in globals())")
    assert not r.is_error, f"the call after an outside kill should work\n{r}\n{bridge.stderr_tail()}"
    assert r.text.strip().endswith("after kill False"), str(r)
    notice = (r.structured or {}).get("notice", "")
    assert notice and STATE_RESET.search(notice), f"the result must say that state was reset\n{r}"
    assert "[note]" in r.text, str(r)

    # And the session continues normally, without repeating the notice.
    again = bridge.run("print('steady')")
    assert not again.is_error and "notice" not in (again.structured or {}), str(again)


def test_call_right_after_outside_kill(bridge, helpers):
    r = bridge.run("lc_z = 1")
    assert not r.is_error, str(r)
    cid = _own_running_container(bridge, helpers)
    helpers.kill_container(cid)
    r = bridge.run("print('right after kill')")
    assert not r.is_error, f"{r}\n{bridge.stderr_tail()}"
    assert "right after kill" in r.text and (r.structured or {}).get("notice"), str(r)


def test_container_killed_during_call(bridge, helpers):
    _warm(bridge)
    cid = _own_running_container(bridge, helpers)
    fut = bridge.run_async("import time\ntime.sleep(30)\nprint('should not get here')", timeout=60)
    time.sleep(1.0)
    assert not fut.done(), "the sleep call ended early"
    killed_at = [0.0]

    def killer() -> None:
        killed_at[0] = time.monotonic()
        helpers.kill_container(cid)

    t = threading.Thread(target=killer)
    t.start()
    t.join(30)
    r = fut.result(30)
    after_kill = time.monotonic() - killed_at[0]
    assert after_kill < 10.0, f"the call took {after_kill:.1f} s to return after the kill\n{r}"
    assert r.is_error, str(r)
    assert "should not get here" not in r.text, str(r)
    assert re.search(r"died|killed|stopped|exit", r.text, re.I), str(r)

    nxt = bridge.run("print('after kill during call')")
    assert not nxt.is_error, f"{nxt}\n{bridge.stderr_tail()}"
    assert "after kill during call" in nxt.text, str(nxt)
    notice = (nxt.structured or {}).get("notice", "")
    assert notice and STATE_RESET.search(notice), str(nxt)


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


# --- output ---------------------------------------------------------------------------------------


def test_huge_output_is_cut_and_the_session_survives(bridge):
    _warm(bridge)
    t0 = time.monotonic()
    r = bridge.run("print('x' * 50_000_000)", timeout=60)
    wall = time.monotonic() - t0
    assert not r.is_error, str(r)
    assert wall < 20.0, f"50 MB of output took {wall:.1f} s"
    assert "characters cut" in r.text, str(r)
    m = re.search(r"(\d+) characters cut", r.text)
    assert m and int(m.group(1)) > 49_000_000, str(r)
    assert len(r.text.encode()) < 200_000, f"text is {len(r.text.encode())} bytes"
    whole = r.raw.model_dump_json(by_alias=True, exclude_none=True) if hasattr(r.raw, "model_dump_json") else json.dumps(r.structured)
    assert len(whole.encode()) < 200_000, f"the whole result is {len(whole.encode())} bytes"
    # Head and tail are kept around the marker.
    assert r.text.startswith("xxxx") and r.text.rstrip("\n").endswith("xxxx"), str(r)

    nxt = bridge.run("print('after huge output')")
    assert not nxt.is_error and nxt.text.strip() == "after huge output", str(nxt)


def test_huge_stderr_is_cut_too(bridge):
    r = bridge.run("import sys\nsys.stderr.write('e' * 5_000_000)\nprint('out ok')", timeout=60)
    assert not r.is_error, str(r)
    s = r.structured or {}
    assert s.get("stdout") == "out ok\n", str(r)
    assert "characters cut" in s.get("stderr", ""), str(r)
    assert len(s.get("stderr", "")) < 100_000, len(s.get("stderr", ""))
    assert not bridge.run("print(1)").is_error


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


# --- the engine goes away -------------------------------------------------------------------------
#
# The sandbox runs under the engine (podman's conmon, dockerd's shim) and, with the socket frame
# channel, exchanges frames with the bridge directly; only starting, watching and removing
# containers go through the engine's API socket. So a call in progress may finish normally when
# the engine vanishes; if it cannot, it must fail saying so. The next call must work once an
# engine answers again (a fresh sandbox, with a notice, when state was lost), fail at once with
# a clear message while none does, and nothing may be left behind when the bridge exits.

ENGINE_NAMED = re.compile(r"engine|podman|docker", re.I)
SLEEP_THEN_DONE = "import time\ntime.sleep(3)\nprint('done')"


def _podman_services_of(pid: int) -> list[int]:
    """`podman system service` processes started by bridge `pid` (its sockets are podman-<pid>.sock, then podman-<pid>.<n>.sock)."""
    return [p for p, cmd in _proc_cmdlines_containing(f"podman-{pid}.")
            if "system service" in cmd and pid_alive(p)]


def _check_affected_call(r) -> None:
    """The call running when the engine vanished finished, or failed saying the engine went away."""
    if r.is_error:
        assert ENGINE_NAMED.search(r.text), f"the failure must name the engine\n{r}"
        assert r.status != "error", f"an engine failure is not the code's error\n{r}"
    else:
        assert r.text.strip() == "done", str(r)


def _check_next_call(r, var: str) -> None:
    """The first call after the engine came back works, and says so if state was lost."""
    assert not r.is_error, str(r)
    head, _, kept = (r.structured or {}).get("stdout", "").strip().rpartition(" ")
    assert head == "next", str(r)
    if kept == "False":
        notice = (r.structured or {}).get("notice", "")
        assert notice and STATE_RESET.search(notice), f"{var} is gone, so the result must say state was reset\n{r}"


def _check_nothing_left(b, helpers) -> None:
    pid = b.pid
    b.close()
    assert helpers.poll(lambda: not helpers.pid_alive(pid), timeout=15), "the bridge did not exit"
    assert helpers.poll(lambda: not helpers.bridge_containers(pid), timeout=20), (
        f"containers left by bridge {pid}: {helpers.bridge_containers(pid)}\n{b.stderr_tail()}"
    )
    assert helpers.poll(lambda: not _podman_services_of(pid), timeout=10), (
        f"podman service of bridge {pid} still runs\n{b.stderr_tail()}"
    )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _bridge_on_own_podman_service(bridge_factory, helpers, name: str, code: str):
    """A bridge on a podman service of its own, after a successful run of `code`: (bridge,
    service pid). Skips unless the engine is podman and the bridge started its own service."""
    if helpers.engine != "podman":
        pytest.skip("the bridge starts a podman service of its own only with podman")
    b = bridge_factory(name=name, env={"DOCKER_HOST": ""})
    r = b.run(code)
    assert not r.is_error, str(r)
    services = _podman_services_of(b.pid)
    if not services:
        b.close()
        pytest.skip("the bridge found a podman socket of the host and started no service of its own")
    assert len(services) == 1, services
    return b, services[0]


def test_an_idle_sandbox_keeps_the_engine_idle(bridge_factory, helpers):
    """The bridge watches its sandbox for the whole session. podman before 4.5 answers the
    Docker-API `wait` by polling without a pause (more than one CPU busy for as long as the
    sandbox lives); the bridge must not make the engine spin while nothing runs. (dockerd's
    wait does not poll: podman only.)"""
    b, service = _bridge_on_own_podman_service(bridge_factory, helpers, "idle-engine", "print('warm')")
    try:
        time.sleep(0.5)  # let start-up work settle
        before, start = _cpu_seconds(service), time.monotonic()
        time.sleep(3.0)
        share = (_cpu_seconds(service) - before) / (time.monotonic() - start)
        assert share < 0.25, f"the podman service used {share:.0%} of a CPU while the sandbox idled"
        r = b.run("print('still here')")
        assert not r.is_error and "still here" in r.text, str(r)
    finally:
        b.close()


def test_private_podman_service_killed_mid_call(bridge_factory, helpers):
    b, service = _bridge_on_own_podman_service(bridge_factory, helpers, "service-killed",
                                               "lc_svc = 1\nprint('warm')")
    try:
        old = _own_running_container(b, helpers)

        fut = b.run_async(SLEEP_THEN_DONE, timeout=60)
        time.sleep(1.0)
        assert not fut.done(), "the call ended early"
        os.kill(service, signal.SIGKILL)
        r = fut.result(60)
        _check_affected_call(r)

        nxt = b.run("print('next', 'lc_svc' in globals())")
        _check_next_call(nxt, "lc_svc")
        again = _podman_services_of(b.pid)
        assert again and service not in again, f"no new podman service: {again}\n{b.stderr_tail()}"
        # The sandbox the dead service left behind is removed once an engine answers again.
        assert helpers.poll(lambda: old not in b.containers(), timeout=20), (
            f"the old sandbox {old} is still there\n{b.stderr_tail()}"
        )
        _check_nothing_left(b, helpers)
    finally:
        b.close()


OUTAGES = [
    pytest.param("proxy-cut", "socket", id="proxy-cut"),
    pytest.param("proxy-cut", "stdio", id="proxy-cut-stdio-frames"),
    pytest.param("service-killed", "socket", id="service-killed"),
]


@pytest.fixture
def outage(request, helpers):
    """An engine socket the test can take away and bring back (see engine_outage.py): a proxy in
    front of dockerd (`DOCKER_HOST`) or of a podman service this test starts, or (podman only)
    that podman service itself, SIGKILLed and restarted on the same path."""
    from engine_outage import EngineProxy, PodmanService

    kind = request.param
    d = tempfile.mkdtemp(prefix="e2e-engine-", dir="/tmp")
    owned = []
    try:
        if helpers.engine == "docker":
            if kind == "service-killed":
                pytest.skip("the test kills a podman service of its own; dockerd is shared")
            host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            if not host.startswith("unix://"):
                pytest.skip(f"DOCKER_HOST={host} is not a unix socket")
            upstream = host[len("unix://"):]
        else:
            service = PodmanService(f"{d}/podman.sock").start()
            owned.append(service)
            if kind == "service-killed":
                yield service
                return
            upstream = service.path
        proxy = EngineProxy(upstream, f"{d}/engine.sock").start()
        owned.append(proxy)
        yield proxy
    finally:
        for o in reversed(owned):
            o.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("outage,frames", OUTAGES, indirect=["outage"])
def test_engine_socket_gone_mid_call_then_back(bridge_factory, helpers, outage, frames):
    env = {"DOCKER_HOST": f"unix://{outage.path}"}
    if frames == "stdio":
        env["MCP_BRIDGE_CHANNEL"] = "stdio"  # every frame crosses the engine's attach stream
    b = bridge_factory(name="engine-gone", env=env)
    try:
        r = b.run("lc_cut = 1\nprint('warm')")
        assert not r.is_error, str(r)
        old = _own_running_container(b, helpers)

        fut = b.run_async(SLEEP_THEN_DONE, timeout=60)
        time.sleep(1.0)
        assert not fut.done(), "the call ended early"
        outage.cut()
        affected = fut.result(60)
        _check_affected_call(affected)
        if frames == "stdio":
            assert affected.is_error, f"frames crossed the engine, so the call cannot have finished\n{affected}"

        # While the socket stays gone: a clear failure at once, and the server keeps serving.
        t0 = time.monotonic()
        gone = b.run("print('while gone')", wait=60)
        took = time.monotonic() - t0
        assert gone.is_error and gone.status != "error", str(gone)
        assert outage.path in gone.text and "unreachable" in gone.text, str(gone)
        assert took < 30, f"the call took {took:.1f} s to report the engine missing"
        tools = b.request(lambda s: s.list_tools())
        assert [t.name for t in tools.tools] == ["run_python"], tools

        outage.restore()
        nxt = b.run("print('next', 'lc_cut' in globals())")
        _check_next_call(nxt, "lc_cut")
        assert helpers.poll(lambda: old not in b.containers(), timeout=20), (
            f"the old sandbox {old} is still there\n{b.stderr_tail()}"
        )
        _check_nothing_left(b, helpers)
    finally:
        b.close()
