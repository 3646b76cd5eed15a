"""`serve --http`'s per-client state against a hostile client (issue 31, point 3): a 2026-07-28
approval round answered only by the caller it was asked of; sandboxes at the caps put to sleep
(least recently used idle first, brought back with their variables) instead of refusing, refused
only while every one runs code; a client releasing its handle; and a token whose secret is
rotated losing what the old secret made."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers_host import poll
from helpers_http import LEGACY, STATELESS, ServeBridge, connect, go, last_line, new_token, run
from helpers_policy import DROP, Approver, drive_once, ran
from mcp import types
from mcp.shared.exceptions import MCPError

import servers as S

# Sandboxes put to sleep and woken, released and revoked: their containers stop and start on the
# engine.
pytestmark = [pytest.mark.timeout(300), pytest.mark.engine]

ALICE, BOB, CAROL = new_token(), new_token(), new_token()
UNKNOWN = "unknown or expired sandbox handle"

ARGS = {"code": DROP, "servers": ["db"]}
YES = {"approval": {"action": "accept", "content": {"approve": True, "for_run": False}}}


def test_an_approval_round_is_answered_only_by_its_own_caller(e2e_tmp: Path, stub_ready: Path) -> None:
    calls = e2e_tmp / "rounds-calls.txt"
    servers = {"db": S.stub("db", policy_tools=True, call_file=calls)}
    env = {"MCP_BRIDGE_WARM_POOL": "0"}
    b = ServeBridge(e2e_tmp, {"alice": ALICE, "bob": BOB}, servers=servers, env=env, name="rounds").start()
    try:

        async def body() -> tuple[str, str, types.CallToolResult]:
            async with (
                connect(b.url, ALICE, STATELESS, elicitation_callback=Approver()) as a,
                connect(b.url, BOB, STATELESS, elicitation_callback=Approver()) as bob,
            ):
                first = await drive_once(a, ARGS)
                assert isinstance(first, types.InputRequiredResult), first
                assert first.request_state
                # Bob holds alice's requestState and arguments: told exactly what a forged state is told.
                with pytest.raises(MCPError) as stolen:
                    await drive_once(bob, ARGS, YES, first.request_state)
                with pytest.raises(MCPError) as forged:
                    await drive_once(bob, ARGS, YES, "rs1.e30.AAAA")
                assert ran(calls) == 0
                # Alice's own retry still answers her run.
                done = await drive_once(a, ARGS, YES, first.request_state)
                return str(stolen.value), str(forged.value), done

        stolen, forged, done = go(body())
        assert "requestState refused" in stolen and stolen == forged, (stolen, forged)
        assert isinstance(done, types.CallToolResult), done
        assert "RAN" in done.content[0].text, done
        assert ran(calls) == 1
    finally:
        b.close()


def test_at_the_caps_the_least_recently_used_idle_sandbox_sleeps_and_comes_back(e2e_tmp: Path) -> None:
    env = {"MCP_BRIDGE_SANDBOXES_PER_TOKEN": "1", "MCP_BRIDGE_MAX_SANDBOXES": "2", "MCP_BRIDGE_WARM_POOL": "0"}
    b = ServeBridge(e2e_tmp, {"alice": ALICE, "bob": BOB, "carol": CAROL}, env=env, name="sleep").start()
    try:

        async def body() -> None:
            async with connect(b.url, ALICE, STATELESS) as a:
                first = await run(a, "kept = 41")
                h1 = first.sandbox
                assert h1, first
                # A lost handle does not hold alice's one sandbox: a new one is made, h1 sleeps.
                second = await run(a, "print(2)")
                assert last_line(second.text) == "2" and second.sandbox not in (None, h1), second
                # h1 comes back with its variables (h2 sleeps in turn).
                back = await run(a, "print(kept + 1)", sandbox=h1)
                assert last_line(back.text) == "42", back.text
                assert "make room" in back.text, back.text
                got = await asyncio.to_thread(poll, lambda: len(b.containers(running_only=True)) <= 1 or None, 60)
                assert got, b.containers(running_only=True)
                # While her one sandbox runs code, a new one is refused (nothing idle to put to sleep).
                slow = asyncio.create_task(run(a, "import time; time.sleep(8); print('slow')", sandbox=h1))
                await asyncio.sleep(3)
                with pytest.raises(MCPError) as busy:
                    await run(a, "print(3)")
                assert "MCP_BRIDGE_SANDBOXES_PER_TOKEN=1" in str(busy.value), busy.value
                assert last_line((await slow).text) == "slow"
                # The total cap: bob and carol each get one, the least recently used idle one sleeps.
                async with connect(b.url, BOB, LEGACY) as bob, connect(b.url, CAROL, STATELESS) as carol:
                    assert last_line((await run(bob, "print(4)")).text) == "4"
                    assert last_line((await run(carol, "print(5)")).text) == "5"
                    again = await run(a, "print(kept)", sandbox=h1)
                    assert last_line(again.text) == "41", again.text
                    assert last_line((await run(bob, "print(6)")).text) == "6"

        go(body())
    finally:
        b.close()


def test_a_client_releases_its_sandbox(e2e_tmp: Path) -> None:
    env = {"MCP_BRIDGE_WARM_POOL": "0"}
    b = ServeBridge(e2e_tmp, {"alice": ALICE, "bob": BOB}, env=env, name="release").start()
    try:

        async def body() -> None:
            async with connect(b.url, ALICE, STATELESS) as a, connect(b.url, BOB, STATELESS) as bob:
                h = (await run(a, "x = 1")).sandbox
                assert h
                # Not bob's to release: the same answer as any unknown handle; alice's stays.
                with pytest.raises(MCPError) as foreign:
                    await run(bob, "", sandbox=h, release=True)
                assert UNKNOWN in str(foreign.value)
                assert last_line((await run(a, "print(x)", sandbox=h)).text) == "1"
                released = await run(a, "", sandbox=h, release=True)
                assert not released.is_error and "released" in released.text, released.text
                with pytest.raises(MCPError) as gone:
                    await run(a, "print(x)", sandbox=h)
                assert UNKNOWN in str(gone.value)
                got = await asyncio.to_thread(poll, lambda: not b.containers() or None, 60)
                assert got, b.containers()
                # Code and release together: the code runs, then the sandbox goes.
                both = await run(a, "print('bye')", release=True)
                assert "bye" in both.text and "released" in both.text and both.sandbox is None, both.text
                got = await asyncio.to_thread(poll, lambda: not b.containers() or None, 60)
                assert got, b.containers()

        go(body())
    finally:
        b.close()


def test_rotating_a_tokens_secret_ends_what_the_old_secret_made(e2e_tmp: Path) -> None:
    old, new = new_token(), new_token()
    env = {"MCP_BRIDGE_WARM_POOL": "0"}
    b = ServeBridge(e2e_tmp, {"alice": old, "bob": BOB}, env=env, name="rotate").start()
    try:

        async def made() -> tuple[str, str]:
            async with connect(b.url, old, STATELESS) as a, connect(b.url, BOB, STATELESS) as bob:
                ha = (await run(a, "kept = 1")).sandbox
                hb = (await run(bob, "mine = 2")).sandbox
                assert ha and hb
                return ha, hb

        ha, hb = go(made())
        assert len(b.containers()) == 2
        b.set_tokens({"alice": new, "bob": BOB})
        assert poll(lambda: "reloaded the tokens file" in b.stderr_path.read_text() or None, 30), b.stderr_tail()

        async def after() -> None:
            async with connect(b.url, new, STATELESS) as a, connect(b.url, BOB, STATELESS) as bob:
                with pytest.raises(MCPError) as gone:
                    await run(a, "print(kept)", sandbox=ha)
                assert UNKNOWN in str(gone.value)
                # Bob's secret did not change: his sandbox stays.
                assert last_line((await run(bob, "print(mine)", sandbox=hb)).text) == "2"

        go(after())
        got = poll(lambda: len(b.containers()) == 1 or None, 60)
        assert got, b.containers()
    finally:
        b.close()
