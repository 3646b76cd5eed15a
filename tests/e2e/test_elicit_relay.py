"""Questions from downstream servers reach the user (issue 32, point 6): a real FastMCP server
(tests/e2e/elicit_server.py) asks during a tool call; the bridge relays the question through
`run_python` to its own client (the official Python client, 2025-11-25 `elicitation/create`) and
the answer back to the server, whose result reaches the sandbox. A client without elicitation
gets a decline at once; hostile questions (huge, malformed, endless) are bounded; `exec` answers
with `--answer-defaults` or declines; under `serve --http` a question reaches only the caller
whose call made it."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from bridge_driver import BRIDGE_BIN
from helpers_cli import cli_env_for
from helpers_policy import Answerer, approval_session, text_of, workdir
from mcp import types

pytestmark = [pytest.mark.timeout(300), pytest.mark.host_only]

SERVER = Path(__file__).with_name("elicit_server.py")


def asker_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER)]}


def call(tool: str, **args: Any) -> str:
    return f"print(await mcp_asker.{tool}(**{args!r}))"


MODES = ["legacy", "2026-07-28"]


async def _run(d: Path, answerer: Answerer | None, code: str, env: dict[str, str] | None = None,
               mode: str = "legacy") -> tuple[str, bool]:
    async with approval_session(d, mode, answerer, env) as client:
        r = await client.call_tool("run_python", {"code": code, "servers": ["asker"]})
        return text_of(r)


def go(d: Path, answerer: Answerer | None, code: str, env: dict[str, str] | None = None,
       mode: str = "legacy") -> tuple[str, bool]:
    return asyncio.run(_run(d, answerer, code, env, mode))


@pytest.fixture
def d(tmp_path: Path) -> Path:
    return workdir(tmp_path, {"asker": asker_entry()})


@pytest.mark.parametrize("mode", MODES)
def test_a_form_question_is_relayed_and_the_answer_reaches_the_server(d, mode):
    a = Answerer(content={"name": "Ada", "age": 36})
    text, is_error = go(d, a, call("ask_name"), mode=mode)
    assert "accept name=Ada age=36" in text and not is_error, text
    assert len(a.questions) == 1
    q = a.questions[0]
    assert "What is your name?" in q.message and '"asker"' in q.message, q.message
    assert set(q.requested_schema["properties"]) == {"name", "age"}, q.requested_schema


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_question_is_declined_at_the_server(d, action, mode):
    a = Answerer(action=action)
    text, _ = go(d, a, call("ask_name"), mode=mode)
    assert text.strip().endswith(action), text
    assert len(a.questions) == 1


def test_an_answer_that_does_not_fit_the_form_is_a_decline(d):
    a = Answerer(content={"name": 5, "age": "old"})
    text, _ = go(d, a, call("ask_name"))
    assert "decline" in text, text


@pytest.mark.parametrize("mode", MODES)
def test_without_an_elicitation_client_the_question_is_declined_at_once(d, mode):
    t0 = time.monotonic()
    text, _ = go(d, None, call("ask_name"), mode=mode)
    assert "decline" in text, text
    assert time.monotonic() - t0 < 30


def test_a_link_is_relayed_in_url_mode_as_sent(d):
    a = Answerer(content=None)
    text, _ = go(d, a, call("ask_link"))
    assert "accept" in text, text
    q = a.questions[0]
    assert q.mode == "url" and q.url == "https://example.com/sign?id=7", q


def test_a_servers_word_that_a_link_is_done_reaches_the_client_once_under_the_id_it_was_asked(d):
    done: list[str] = []

    async def notes(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            done.append(message.params.elicitation_id)

    async def go_() -> str:
        a = Answerer(content=None)
        async with approval_session(d, "legacy", a, message_handler=notes) as client:
            r = await client.call_tool("run_python", {"code": call("ask_link_done"), "servers": ["asker"]})
            for _ in range(50):
                if done:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)
            asked = a.questions[0]
            assert asked.mode == "url", asked
            return text_of(r)[0], asked.elicitation_id

    text, asked_id = asyncio.run(go_())
    assert "accept" in text, text
    # The bridge's own id (a server cannot name another's question); the forged id and the
    # repeat are dropped.
    assert asked_id != "el-8"
    assert done == [asked_id], done


def test_a_2026_07_28_client_gets_a_link_in_url_mode_in_its_input_request(d):
    # The client declared URL-mode elicitation in the request (a client that did not gets the
    # link in a form's message: server::approve::elicit's unit tests).
    a = Answerer(content=None)
    text, _ = go(d, a, call("ask_link"), mode="2026-07-28")
    assert "accept" in text, text
    q = a.questions[0]
    assert q.mode == "url" and q.url == "https://example.com/sign?id=7", q


@pytest.mark.parametrize("kind", ["huge", "bad_schema", "bad_link"])
def test_a_hostile_question_is_refused_without_asking(d, kind):
    a = Answerer(content={"x": "y"})
    text, is_error = go(d, a, call("hostile", kind=kind))
    assert "error:" in text and not is_error, text
    assert a.questions == [], "nothing was asked"
    assert "A" * 1000 not in text


def test_endless_questions_are_bounded_per_run(d):
    # Legacy only: the official client stops a 2026-07-28 call after 10 input-required rounds.
    a = Answerer(content={"x": "y"})
    text, _ = go(d, a, call("hostile", kind="endless"))
    assert "endless: 16 accepted, then decline" in text, text
    assert len(a.questions) == 16


def test_a_question_gets_cancel_after_the_question_timeout(d):
    class Silent(Answerer):
        async def __call__(self, context, params):
            self.questions.append(params)
            await asyncio.sleep(30)
            return types.ElicitResult(action="accept", content={"name": "late"})

    a = Silent()
    t0 = time.monotonic()
    text, _ = go(d, a, call("ask_name"), env={"MCP_BRIDGE_QUESTION_TIMEOUT": "2"})
    assert text.strip().endswith("cancel"), text
    assert time.monotonic() - t0 < 25


def test_the_wait_for_the_user_does_not_count_against_the_runs_timeout(d):
    class Slow(Answerer):
        async def __call__(self, context, params):
            self.questions.append(params)
            await asyncio.sleep(8)
            return types.ElicitResult(action="accept", content={"name": "Slow", "age": 2})

    async def scenario():
        async with approval_session(d, "legacy", Slow()) as client:
            # The question waits 8 s, longer than the run's whole timeout (5 s).
            code = call("ask_name") + "\nimport time\ntime.sleep(0.5)\nprint('after')"
            r = await client.call_tool("run_python", {"code": code, "servers": ["asker"], "timeout": 5})
            return text_of(r)

    text, is_error = asyncio.run(scenario())
    assert "accept name=Slow age=2" in text and "after" in text and not is_error, text


def _exec(d: Path, *flags: str, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    env = cli_env_for(d / "state", MCP_BRIDGE_CONFIG_DIR=str(d / "mcps"))
    return subprocess.run([BRIDGE_BIN, "exec", "--servers", "asker", *flags, call("hostile", kind="endless")],
                          env=env, cwd=d / "cwd", capture_output=True, text=True, timeout=120, stdin=stdin)


def test_exec_asks_on_its_terminal(d):
    import os
    import pty

    master, slave = pty.openpty()
    try:
        # Typed ahead: the terminal keeps the lines until exec reads them.
        os.write(master, b"y\nZed\n\n")
        env = cli_env_for(d / "state", MCP_BRIDGE_CONFIG_DIR=str(d / "mcps"))
        p = subprocess.run([BRIDGE_BIN, "exec", "--servers", "asker", call("ask_name")], env=env, cwd=d / "cwd",
                           capture_output=True, text=True, timeout=120, stdin=slave)
    finally:
        os.close(slave)
        os.close(master)
    assert "accept name=Zed age=30" in p.stdout, p.stdout + p.stderr
    assert "What is your name?" in p.stderr and "age (integer) Your age [30]" in p.stderr, p.stderr


def test_exec_answer_defaults_accepts_a_form_with_its_defaults(d):
    p = _exec(d, "--answer-defaults")
    assert "endless: 16 accepted, then decline" in p.stdout, p.stdout + p.stderr
    p = _exec(d)
    assert "endless: 0 accepted, then decline" in p.stdout, p.stdout + p.stderr


def test_under_serve_a_question_reaches_only_the_caller_whose_call_made_it(e2e_tmp: Path) -> None:
    from helpers_http import LEGACY, ServeBridge, connect, new_token, run

    alice_token, bob_token = new_token(), new_token()
    b = ServeBridge(e2e_tmp, {"alice": alice_token, "bob": bob_token}, servers={"asker": asker_entry()},
                    env={"MCP_BRIDGE_WARM_POOL": "0"}, name="ask-two").start()
    try:

        async def body() -> tuple[str, str, str, list[Any], list[Any]]:
            asked, bob_done = asyncio.Event(), asyncio.Event()

            class Held(Answerer):
                """Alice's client: holds her answer until bob's call is over."""

                async def __call__(self, context, params):
                    self.questions.append(params)
                    asked.set()
                    await asyncio.wait_for(bob_done.wait(), 120)
                    return types.ElicitResult(action="accept", content={"name": "alice", "age": 1})

            alice, bob = Held(), Answerer(content={"name": "bob", "age": 2})
            async with (
                connect(b.url, alice_token, LEGACY, elicitation_callback=alice) as a,
                connect(b.url, bob_token, LEGACY, elicitation_callback=bob) as c,
            ):
                # Alone in flight, bob's question reaches bob.
                alone = await run(c, call("slow_ask", tag="bob-alone"), servers=["asker"])
                first = asyncio.create_task(run(a, call("slow_ask", tag="alice"), servers=["asker"]))
                await asyncio.wait_for(asked.wait(), 120)
                # Alice's call is in flight on the same server: whose bob's question is cannot be
                # told apart by the server's request, so it is declined, never shown to alice.
                both = await run(c, call("slow_ask", tag="bob"), servers=["asker"])
                bob_done.set()
                return alone.text, (await first).text, both.text, alice.questions, bob.questions

        alone, alice_text, bob_text, alice_q, bob_q = asyncio.run(body())
        assert "bob-alone:accept" in alone, alone
        assert "alice:accept" in alice_text, alice_text
        assert "bob:decline" in bob_text, bob_text
        assert [q.message.splitlines()[-1] for q in alice_q] == ["question for alice"], alice_q
        assert [q.message.splitlines()[-1] for q in bob_q] == ["question for bob-alone"], bob_q
    finally:
        b.close()


def test_a_question_is_withdrawn_when_its_run_ends(tmp_path: Path):
    log = tmp_path / "answers.txt"
    d = workdir(tmp_path, {"asker": {**asker_entry(), "env": {"ELICIT_LOG": str(log)}}})

    class Never(Answerer):
        async def __call__(self, context, params):
            self.questions.append(params)
            await asyncio.sleep(120)
            return types.ElicitResult(action="accept", content={"name": "late"})

    async def scenario():
        async with approval_session(d, "legacy", Never(), {"MCP_BRIDGE_QUESTION_TIMEOUT": "120"}) as client:
            # The client gives up on the run after 5 s and cancels it.
            with pytest.raises(Exception):  # noqa: B017 - the SDK's timeout error
                await client.session.call_tool("run_python", {"code": call("slow_ask", tag="gone"),
                                                              "servers": ["asker"]}, read_timeout_seconds=5)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 20 and not log.exists():
                await asyncio.sleep(0.2)

    asyncio.run(scenario())
    # Withdrawn at once, as `cancel` (nobody chose): not left to MCP_BRIDGE_QUESTION_TIMEOUT, and
    # not a `decline` the user never made.
    assert log.exists() and log.read_text() == "gone:cancel\n", log.read_text() if log.exists() else "no answer"
