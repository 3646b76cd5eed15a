"""Downstream servers under `serve --http`: one process of a server shared by every client, its
replies never crossing between them (two clients flood it with interleaved calls)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from helpers_http import MODES, Agent, ServeBridge, connect, go, last_line, new_token

import servers as S

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
