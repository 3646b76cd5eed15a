"""Downstream servers under `serve --http`: one process of a server shared by every client, its
replies never crossing between them (two clients flood it with interleaved calls); a `perClient`
server gets a process per client, closed with the client's sandbox; audit lines name the token."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers_host import pid_alive, poll
from helpers_http import MODES, Agent, ServeBridge, connect, go, last_line, new_token

import servers as S

pytestmark = pytest.mark.host_only  # downstream servers shared under serve: host-side

ALICE, BOB = new_token(), new_token()
CALLS = 200


def flood(me: str) -> str:
    """Code making CALLS concurrent echo calls that carry `me`, printing how many came back
    as sent (and the stub's pid)."""
    return (
        "import asyncio, json\n"
        f"sent = [f'{me}-{{i}}' for i in range({CALLS})]\n"
        "got = await asyncio.gather(*(mcp_shared.echo(text=t) for t in sent))\n"
        "texts = [g['text'] if isinstance(g, dict) else str(g) for g in got]\n"
        "who = await mcp_shared.whoami()\n"
        "print(json.dumps({'same': sum(a == b for a, b in zip(sent, texts)), 'pid': who['pid']}))"
    )


def test_one_shared_server_keeps_each_clients_replies_its_own(e2e_tmp: Path) -> None:
    b = ServeBridge(
        e2e_tmp,
        {"alice": ALICE, "bob": BOB},
        servers={"shared": S.stub("shared")},
        name="shared",
    ).start()
    try:

        async def body() -> list[dict]:
            async with connect(b.url, ALICE, MODES[0]) as a, connect(b.url, BOB, MODES[1]) as c:
                alice, bob = Agent(a), Agent(c)
                replies = await asyncio.gather(
                    alice.run(flood("alice"), servers=["shared"]),
                    bob.run(flood("bob"), servers=["shared"]),
                )
                out = []
                for r in replies:
                    assert not r.is_error, r.text
                    out.append(json.loads(last_line(r.text)))
                return out

        alice, bob = go(body())
        assert alice["same"] == CALLS and bob["same"] == CALLS, (alice, bob)
        assert alice["pid"] == bob["pid"], "a shared server is one process"
    finally:
        b.close()


WHOAMI = "who = await mcp_solo.whoami()\nprint(json.dumps(who))"


def test_a_per_client_server_gets_a_process_per_client_and_the_audit_names_the_token(e2e_tmp: Path) -> None:
    entry = S.stub("solo")
    entry["perClient"] = True
    audit = e2e_tmp / "serve-audit" / "audit.jsonl"
    audit.parent.mkdir(mode=0o700)
    b = ServeBridge(
        e2e_tmp,
        {"alice": ALICE, "bob": BOB},
        servers={"solo": entry},
        env={"MCP_BRIDGE_AUDIT_LOG": str(audit)},
        name="perclient",
    ).start()
    try:

        async def body() -> tuple[int, int, int]:
            async with connect(b.url, BOB, MODES[1]) as c:
                bob = Agent(c)
                async with connect(b.url, ALICE, MODES[0]) as a:
                    alice = Agent(a)
                    pids = []
                    for agent in (alice, bob, alice):
                        r = await agent.run("import json\n" + WHOAMI, servers=["solo"])
                        assert not r.is_error, r.text
                        pids.append(json.loads(last_line(r.text))["pid"])
                    assert pids[0] == pids[2], "one client keeps its process"
                    assert pids[0] != pids[1], "two clients, two processes"
                # Alice's session ended: her process goes, bob's stays.
                gone = await asyncio.to_thread(poll, lambda: not pid_alive(pids[0]) or None, 30)
                assert gone, f"alice's process {pids[0]} outlived her session"
                assert pid_alive(pids[1])
                r = await bob.run("import json\n" + WHOAMI, servers=["solo"])
                return pids[0], pids[1], json.loads(last_line(r.text))["pid"]

        _, bob_pid, bob_again = go(body())
        assert bob_again == bob_pid
    finally:
        b.close()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    calls = [x for x in lines if x.get("tool") == "whoami"]
    assert sorted(x.get("token") for x in calls) == ["alice", "alice", "bob", "bob"], calls
    assert all(ALICE not in line and BOB not in line for line in audit.read_text().splitlines())


def test_a_sandbox_put_to_sleep_closes_its_per_client_processes(e2e_tmp: Path) -> None:
    entry = S.stub("solo")
    entry["perClient"] = True
    env = {"MCP_BRIDGE_SANDBOXES_PER_TOKEN": "1", "MCP_BRIDGE_WARM_POOL": "0"}
    b = ServeBridge(e2e_tmp, {"alice": ALICE}, servers={"solo": entry}, env=env, name="sleepy").start()
    try:

        async def body() -> None:
            async with connect(b.url, ALICE, MODES[1]) as a:
                first = Agent(a)
                r = await first.run("import json\n" + WHOAMI, servers=["solo"])
                assert not r.is_error, r.text
                pid = json.loads(last_line(r.text))["pid"]
                # A second sandbox at alice's cap of 1: the first sleeps, and its process goes.
                second = Agent(a)
                assert last_line((await second.run("print(2)")).text) == "2"
                gone = await asyncio.to_thread(poll, lambda: not pid_alive(pid) or None, 30)
                assert gone, f"the sleeping sandbox's process {pid} outlived its sleep"
                # Woken, it gets a process of its own again.
                r = await first.run("import json\n" + WHOAMI, servers=["solo"])
                assert not r.is_error, r.text
                assert pid_alive(json.loads(last_line(r.text))["pid"])

        go(body())
    finally:
        b.close()
