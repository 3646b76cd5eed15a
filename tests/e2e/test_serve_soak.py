"""Soak of `serve --http` (issue 25, point 5): several clients over HTTP in both revisions, with
proxied calls to one shared stub server; one client process killed while its code sleeps, one
connection dropped while its code sleeps; a token revoked (tokens file rewritten + SIGHUP) while
its clients are connected and one of its runs is in flight; then SIGTERM with clients connected
and runs in flight. The bridge must exit within the drain bound plus slack and leave nothing:
no container with its labels, no process it started (the stub server, a podman service), no
file in its snapshot or runtime folders.

Along the way every reply must be its own client's (payload and state), the killed and dropped
clients must not disturb the others, the dropped client's sandbox must be reachable again with
its state, and the revoked token must be refused from then on while its sandboxes are released.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from helpers_host import pid_alive, poll
from helpers_http import LEGACY, STATELESS, Agent, ServeBridge, connect, go, last_line, new_token, run

import servers as S

pytestmark = [pytest.mark.timeout(300), pytest.mark.engine]  # sandboxes under serve left behind or not, on the engine

DRAIN = 3  # MCP_BRIDGE_DRAIN_TIMEOUT for this bridge, seconds
EXIT_SLACK = 30  # removing the containers and stopping the podman service after the drain
CALLS = 15  # proxied calls per working client
E2E_DIR = Path(__file__).resolve().parent

# The client that gets killed: a separate process (the official client, LEGACY) that sets
# state, says "ready", then sleeps in the sandbox until it is killed.
KILLED_CLIENT = """
import asyncio, sys
from helpers_http import connect, run

async def main(url, token):
    async with connect(url, token) as client:
        r = await run(client, "x = 'killed'\\nprint('ready')")
        print(r.text.strip().splitlines()[-1], flush=True)
        await run(client, "import time\\ntime.sleep(60)\\nprint('late')")

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

HOSTNAME = "import socket\nprint(socket.gethostname())"


@pytest.fixture
def serve(e2e_tmp: Path, stub_ready: Path):
    tokens = {name: new_token() for name in ("alice", "bob", "carol", "dave")}
    b = ServeBridge(
        e2e_tmp,
        tokens,
        servers={"stub": S.stub("stub")},
        env={"MCP_BRIDGE_DRAIN_TIMEOUT": str(DRAIN), "MCP_BRIDGE_WARM_POOL": "1"},
        name="serve-soak",
    ).start()
    yield b
    b.close()


async def _work(agent: Agent, who: str) -> list[str]:
    """Sets state, makes CALLS proxied echo calls of its own payload, reads the state back;
    returns the problems seen (empty = every reply was this client's own)."""
    problems = []
    r = await agent.run(f"x = {who!r}\nprint('set', x)", servers=["stub"])
    if r.is_error or last_line(r.text) != f"set {who}":
        problems.append(f"{who} set: {r.text!r}")
    for k in range(CALLS):
        payload = f"{who}-{k}"
        r = await agent.run(f"r = await mcp_stub.echo(text={payload!r})\nprint(r['text'])", servers=["stub"])
        if r.is_error or last_line(r.text) != payload:
            problems.append(f"{who} call {k}: {r.text[:200]!r}")
    r = await agent.run("print(x)")
    if r.is_error or last_line(r.text) != who:
        problems.append(f"{who} state: {r.text[:200]!r}")
    return problems


async def _container_of(agent: Agent) -> str:
    """The short id of the agent's sandbox container (its host name)."""
    r = await agent.run(HOSTNAME)
    assert not r.is_error, r.text
    return last_line(r.text)


def _live_ids(serve: ServeBridge) -> set[str]:
    return {cid[:12] for cid in serve.containers()}


async def _refused(url: str, token: str, mode: str, sandbox: str | None) -> str | None:
    """The error a fresh client with `token` meets, or None when its call went through."""
    try:
        async with connect(url, token, mode, read_timeout=30) as client:
            r = await run(client, "print('through')", sandbox=sandbox)
            return None if not r.is_error else f"tool error: {r.text[:200]}"
    except Exception as exc:  # noqa: BLE001 - any refusal counts; its text is reported
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return f"{type(exc).__name__}: {exc}"


def test_serve_soak_disconnects_revocation_and_sigterm_leave_nothing(serve: ServeBridge):
    url, tok = serve.url, dict(serve.tokens)
    assert url is not None

    seen: dict[str, object] = {}
    exited: list[int | None] = []
    # Waits for the exit from a thread of its own, so nothing the clients meet as the bridge goes
    # away (their streams cut) can stop the wait.
    waiter = threading.Thread(target=lambda: exited.append(serve.wait_exit(DRAIN + EXIT_SLACK)))

    async def scenario() -> None:
        # The killed client: its own process, asleep in the sandbox when it dies.
        env = dict(os.environ, PYTHONPATH=str(E2E_DIR))
        killed = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            KILLED_CLIENT,
            url,
            tok["dave"],
            cwd=str(E2E_DIR),
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )
        assert killed.stdout is not None
        ready = await asyncio.wait_for(killed.stdout.readline(), 120)
        assert ready.decode().strip() == "ready", ready

        # Closed by hand at the end: the bridge is gone by then, so closing may fail.
        clients = contextlib.AsyncExitStack()
        try:
            alice_c = await clients.enter_async_context(connect(url, tok["alice"], LEGACY))
            bob_c = await clients.enter_async_context(connect(url, tok["bob"], STATELESS))
            carol_c = await clients.enter_async_context(connect(url, tok["carol"], LEGACY))
            carol_s = await clients.enter_async_context(connect(url, tok["carol"], STATELESS))
            alice, bob = Agent(alice_c), Agent(bob_c)
            carol1, carol2 = Agent(carol_c), Agent(carol_s)
            await asyncio.sleep(1)  # dave's sleep has reached its sandbox
            killed.send_signal(signal.SIGKILL)
            await killed.wait()

            # Four clients at once, each with its own state and payloads.
            problems = await asyncio.gather(
                _work(alice, "alice"), _work(bob, "bob"), _work(carol1, "carol1"), _work(carol2, "carol2")
            )
            seen["problems"] = [p for ps in problems for p in ps]

            # A connection dropped while its code sleeps; the sandbox is reached again after.
            async with connect(url, tok["bob"], STATELESS) as erin_c:
                erin = Agent(erin_c)
                r = await erin.run("x = 'erin'\nprint('set')")
                assert not r.is_error and erin.sandbox, r.text
                sleeping = asyncio.ensure_future(erin.run("import time\ntime.sleep(8)\nprint('woke')"))
                await asyncio.sleep(1)
                sleeping.cancel()
                await asyncio.gather(sleeping, return_exceptions=True)
            erin_handle = erin.sandbox
            async with connect(url, tok["bob"], STATELESS) as again_c:
                r = await run(again_c, "print(x)", sandbox=erin_handle)
                seen["erin_again"] = (r.is_error, last_line(r.text))

            # Carol's token revoked while both her clients are connected and one runs.
            carol_ids = {await _container_of(carol1), await _container_of(carol2)}
            seen["carol_ids_live_before"] = carol_ids <= _live_ids(serve)
            in_flight = asyncio.ensure_future(carol2.run("import time\ntime.sleep(4)\nprint('done')"))
            await asyncio.sleep(0.5)
            serve.set_tokens({k: v for k, v in tok.items() if k != "carol"})
            outcome = await asyncio.gather(asyncio.wait_for(in_flight, 60), return_exceptions=True)
            seen["carol_in_flight_ended"] = True
            seen["carol_in_flight"] = repr(outcome[0])[:300]
            seen["carol_refused"] = [
                await _refused(url, tok["carol"], LEGACY, None),
                await _refused(url, tok["carol"], STATELESS, carol2.sandbox),
            ]
            try:
                r = await carol1.run("print('still here')")
                seen["carol_session_after"] = f"answered: {r.is_error} {r.text[:200]!r}"
            except Exception as exc:  # noqa: BLE001 - refused, as it should be
                seen["carol_session_after"] = None
                seen["carol_session_error"] = f"{type(exc).__name__}: {exc}"[:300]
            seen["carol_released"] = await asyncio.to_thread(poll, lambda: not (carol_ids & _live_ids(serve)), 30)

            # The others are untouched: their state survived everything above.
            r_alice, r_bob = await asyncio.gather(alice.run("print(x)"), bob.run("print(x)"))
            seen["after"] = (last_line(r_alice.text), last_line(r_bob.text))

            # SIGTERM with clients connected and runs in flight.
            sleepers = [
                asyncio.ensure_future(alice.run("import time\ntime.sleep(60)")),
                asyncio.ensure_future(bob.run("import time\ntime.sleep(60)")),
            ]
            await asyncio.sleep(1)
            seen["containers_before_sigterm"] = len(serve.containers())
            serve.sigterm()
            waiter.start()
            await asyncio.gather(*sleepers, return_exceptions=True)
        finally:
            try:
                await clients.aclose()
            except Exception as exc:  # noqa: BLE001 - the server is gone; closing may fail
                seen["close"] = repr(exc)[:200]

    try:
        go(scenario())
    except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - only once the bridge is going away
        if not waiter.is_alive() and not exited:
            raise
        seen["after_sigterm"] = repr(exc)[:300]
    waiter.join(DRAIN + EXIT_SLACK + 5)
    seen["exit"] = exited[0] if exited else None
    tail = serve.stderr_tail()
    assert seen["problems"] == [], f"{seen['problems']}\n{tail}"
    assert seen["erin_again"] == (False, "erin"), f"the dropped client's sandbox: {seen['erin_again']}\n{tail}"
    assert seen["carol_ids_live_before"], tail
    assert seen["carol_in_flight_ended"]
    assert all(seen["carol_refused"]), f"the revoked token was let through: {seen['carol_refused']}\n{tail}"
    assert seen["carol_session_after"] is None, (
        f"the revoked token's session still answered: {seen['carol_session_after']}"
    )
    assert seen["carol_released"], f"the revoked token's sandboxes are still there\n{tail}"
    assert seen["after"] == ("alice", "bob"), f"the other clients' state: {seen['after']}\n{tail}"
    assert seen["containers_before_sigterm"] >= 2
    assert seen["exit"] is not None, f"serve did not exit within {DRAIN} + {EXIT_SLACK} s of SIGTERM\n{tail}"

    # Nothing left: containers (right away: they are removed before the exit), then the processes
    # it started (reaped by now or shortly) and its files.
    assert serve.containers() == [], f"containers left: {serve.containers()}\n{tail}"
    assert poll(lambda: not serve.processes(), timeout=10), f"processes left: {serve.leftovers()}"
    assert serve.files() == [], f"files left: {serve.files()}"
    assert not pid_alive(serve.pid)
