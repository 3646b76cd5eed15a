"""The container engine going away mid-call and coming back (GUIDE.md, "Timeouts, crashes and
restarts"): a private podman service killed, the engine's socket cut and restored (socket and
stdio frame channels), and an idle sandbox that keeps the engine idle.

Every test gets its own bridge (these tests kill things).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time

import pytest
from helpers_host import pid_alive
from helpers_lifecycle import STATE_RESET
from helpers_lifecycle import own_running_container as _own_running_container
from helpers_lifecycle import proc_cmdlines_containing as _proc_cmdlines_containing

pytestmark = pytest.mark.engine  # the engine lost and back

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
