"""`serve --http`'s limits, each hit with a clear refusal: the request body (HTTP 413), requests
in flight per token (HTTP 429), sandboxes per token and in total while every one runs code (a
JSON-RPC error naming the setting); and the warm pool: a new client's first call runs in a sandbox started before it came,
with MCP_BRIDGE_PRELOAD's modules imported."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import httpx2
import pytest
from helpers_host import engine, poll
from helpers_http import LEGACY, STATELESS, ServeBridge, connect, go, last_line, new_token, run
from mcp.shared.exceptions import MCPError

ALICE, BOB, CAROL = new_token(), new_token(), new_token()
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


# Engine markers per test (engine_markers.py): `engine` where the outcome depends on the container
# engine (why, beside it; the docker pass runs these too), `host_only` where the subject is on the host.
@pytest.mark.host_only
def test_body_and_requests_in_flight_are_capped(e2e_tmp: Path) -> None:
    env = {"MCP_BRIDGE_HTTP_MAX_BODY": "65536", "MCP_BRIDGE_REQUESTS_PER_TOKEN": "1", "MCP_BRIDGE_WARM_POOL": "0"}
    b = ServeBridge(e2e_tmp, {"alice": ALICE, "bob": BOB}, env=env, name="caps").start()
    try:
        auth = {**HEADERS, "Authorization": f"Bearer {ALICE}"}
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 70_000}})
        too_big = httpx2.post(b.url, headers=auth, content=big, timeout=30)
        assert too_big.status_code == 413, too_big.text

        async def body() -> None:
            async with connect(b.url, ALICE, STATELESS) as a:
                slow = asyncio.create_task(run(a, "import time; time.sleep(4); print('done')"))
                # While alice's one request is in flight, her next is refused; bob's is not.

                def second(token: str) -> int:
                    h = {**HEADERS, "Authorization": f"Bearer {token}"}
                    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
                    return httpx2.post(b.url, headers=h, content=ping, timeout=30).status_code

                refused = await asyncio.to_thread(
                    poll, lambda: (lambda c: c if c == 429 else None)(second(ALICE)), 20, 0.1
                )
                assert refused == 429
                assert await asyncio.to_thread(second, BOB) != 429
                assert last_line((await slow).text) == "done"
            # The permit is given back once the response is done.
            assert second(ALICE) != 429

        go(body())
    finally:
        b.close()


@pytest.mark.host_only
def test_sandboxes_per_token_and_in_total(e2e_tmp: Path) -> None:
    """At a cap an idle sandbox is put to sleep (test_serve_hostile_state.py); a new one is refused,
    naming the setting, only while every one it counts runs code."""
    env = {"MCP_BRIDGE_SANDBOXES_PER_TOKEN": "1", "MCP_BRIDGE_MAX_SANDBOXES": "2", "MCP_BRIDGE_WARM_POOL": "0"}
    b = ServeBridge(e2e_tmp, {"alice": ALICE, "bob": BOB, "carol": CAROL}, env=env, name="slots").start()
    try:

        async def body() -> None:
            slow = "import time; time.sleep(8); print('slow')"
            async with connect(b.url, ALICE, STATELESS) as a, connect(b.url, BOB, LEGACY) as bob:
                first = await run(a, "print(1)")
                assert first.sandbox, first
                assert last_line((await run(bob, "print(4)")).text) == "4"
                busy = [
                    asyncio.create_task(run(a, slow, sandbox=first.sandbox)),
                    asyncio.create_task(run(bob, slow)),
                ]
                await asyncio.sleep(3)
                with pytest.raises(MCPError) as per_token:
                    await run(a, "print(2)")  # no handle: a second sandbox for alice
                assert "MCP_BRIDGE_SANDBOXES_PER_TOKEN=1" in str(per_token.value)
                async with connect(b.url, CAROL, STATELESS) as carol:
                    with pytest.raises(MCPError) as total:
                        await run(carol, "print(5)")
                    assert "MCP_BRIDGE_MAX_SANDBOXES=2" in str(total.value)
                    for done in await asyncio.gather(*busy):
                        assert last_line(done.text) == "slow"
                    # Both idle again: carol gets one (the least recently used sleeps).
                    assert last_line((await run(carol, "print(6)")).text) == "6"

        go(body())
    finally:
        b.close()


def _hostname(container: str) -> str:
    eng = engine()
    assert eng
    out = subprocess.run(
        [eng, "inspect", "--format", "{{.Config.Hostname}}", container], capture_output=True, text=True, timeout=60
    )
    return out.stdout.strip()


@pytest.mark.engine  # pool containers started ahead on the engine
def test_the_warm_pool_serves_a_new_clients_first_call(e2e_tmp: Path) -> None:
    pool_env = {"MCP_BRIDGE_WARM_POOL": "1", "MCP_BRIDGE_PRELOAD": "colorsys"}
    b = ServeBridge(e2e_tmp, {"alice": ALICE}, env=pool_env, name="pool").start()
    try:
        # Before any client: one sandbox started, waiting.
        waiting = poll(lambda: b.containers(running_only=True) or None, 60)
        assert waiting and len(waiting) == 1, waiting
        ready = _hostname(waiting[0])

        async def body() -> tuple[str, str]:
            async with connect(b.url, ALICE, STATELESS) as a:
                # A pool sandbox imported MCP_BRIDGE_PRELOAD's modules while it waited.
                r = await run(a, "import socket, sys; print('colorsys' in sys.modules, socket.gethostname())")
                return last_line(r.text), r.sandbox or ""

        line, handle = go(body())
        preloaded, host = line.split()
        assert preloaded == "True", line
        assert host == ready, "the first call did not run in the pooled sandbox"
        assert handle.startswith("sbx_")
        # The pool is refilled: a second sandbox starts for the next client.
        assert poll(lambda: len(b.containers(running_only=True)) >= 2 or None, 60), b.stderr_tail()
    finally:
        b.close()

    off = ServeBridge(e2e_tmp, {"alice": ALICE}, env={"MCP_BRIDGE_WARM_POOL": "0"}, name="nopool").start()
    try:
        assert off.containers() == [], "no pool: nothing starts before a client"
    finally:
        off.close()
