"""Approval of destructive calls, end to end (issue 24, point 2): the stub's `drop_table`
(destructiveHint) needs the user's approval, asked through MCP elicitation in the revision the
client speaks: `elicitation/create` (2025-11-25, mode "legacy") or an input-required result with a
sealed `requestState` (2026-07-28). Without a way to ask it fails closed; nothing the sandbox sends
counts as an answer. Whether drop_table really ran is read from the stub's call file."""
from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest
from bridge_driver import BRIDGE_BIN, base_env
from helpers_policy import DROP, Approver, approval_session, drive_once, ran, run, workdir
from mcp import types
from mcp.shared.exceptions import MCPError

import servers as S

pytestmark = [pytest.mark.timeout(300), pytest.mark.host_only]

MODES = ["legacy", "2026-07-28"]

HOW_TO = ('"autoApprove": ["drop_table"]', "MCP_BRIDGE_APPROVAL=allow")


@pytest.fixture
def db(tmp_path: Path, stub_ready: Path):
    """A config folder with the stub as server `db` (policy tools), and its call file."""
    calls = tmp_path / "calls.txt"
    d = workdir(tmp_path, {"db": S.stub("db", policy_tools=True, call_file=calls)})
    return d, calls


def go(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("mode", MODES)
def test_approved_call_runs_after_one_question(db, mode):
    d, calls = db
    approver = Approver()

    async def scenario():
        async with approval_session(d, mode, approver) as client:
            return await run(client, DROP)

    text, is_error = go(scenario())
    assert "RAN" in text and not is_error, text
    assert ran(calls) == 1
    assert len(approver.questions) == 1
    q = approver.questions[0]
    assert "db.drop_table × 1" in q.message and "destructiveHint" in q.message, q.message
    assert "users" in q.message  # the argument preview
    assert set(q.requested_schema["properties"]) == {"approve", "for_run"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel", "reject-form"])
def test_declined_call_is_refused_and_never_runs(db, mode, action):
    d, calls = db
    approver = Approver(approve=False) if action == "reject-form" else Approver(action=action)

    async def scenario():
        async with approval_session(d, mode, approver) as client:
            return await run(client, DROP)

    text, _ = go(scenario())
    assert "REFUSED NotApprovedError" in text and "declined" in text, text
    assert ran(calls) == 0
    assert len(approver.questions) == 1


@pytest.mark.parametrize("mode", MODES)
def test_without_elicitation_the_call_fails_closed_saying_how_to_allow_it(db, mode):
    d, calls = db

    async def scenario():
        async with approval_session(d, mode, None) as client:
            return await run(client, DROP)

    text, _ = go(scenario())
    assert "REFUSED NotApprovedError" in text, text
    for needle in HOW_TO:
        assert needle in text, text
    assert ran(calls) == 0


def test_the_operator_may_approve_in_advance(db):
    d, calls = db

    async def scenario():
        async with approval_session(d, "legacy", None, {"MCP_BRIDGE_APPROVAL": "allow"}) as client:
            return await run(client, DROP)

    text, _ = go(scenario())
    assert "RAN" in text, text
    assert ran(calls) == 1


def test_deny_is_the_operators_kill_switch_over_auto_approve(tmp_path, stub_ready):
    """MCP_BRIDGE_APPROVAL=deny refuses every call that needs approval, even one an entry's
    "autoApprove" approves in advance; the user is never asked."""
    calls = tmp_path / "calls.txt"
    entry = S.stub("db", policy_tools=True, call_file=calls)
    entry["autoApprove"] = ["drop_*"]
    d = workdir(tmp_path, {"db": entry})
    approver = Approver()

    async def scenario():
        async with approval_session(d, "legacy", approver, {"MCP_BRIDGE_APPROVAL": "deny"}) as client:
            return await run(client, DROP)

    text, _ = go(scenario())
    assert "REFUSED NotApprovedError" in text and "MCP_BRIDGE_APPROVAL=deny" in text, text
    assert ran(calls) == 0
    assert approver.questions == []


@pytest.mark.parametrize("mode", MODES)
def test_calls_made_together_are_asked_once(db, mode):
    d, calls = db
    approver = Approver()
    code = """
import asyncio
rs = await asyncio.gather(*[mcp_db.drop_table(name=f"t{i}") for i in range(20)], return_exceptions=True)
print("OK", sum(1 for r in rs if not isinstance(r, Exception)))
"""

    async def scenario():
        async with approval_session(d, mode, approver) as client:
            return await run(client, code)

    text, _ = go(scenario())
    assert "OK 20" in text, text
    assert ran(calls) == 20
    assert len(approver.questions) == 1, [q.message for q in approver.questions]
    assert "db.drop_table × 20" in approver.questions[0].message
    assert "… and 17 more" in approver.questions[0].message


@pytest.mark.parametrize("mode", MODES)
def test_approval_for_the_rest_of_the_run_is_asked_once(db, mode):
    d, calls = db
    approver = Approver(for_run=True)
    code = """
for i in range(3):
    await mcp_db.drop_table(name=f"t{i}")
print("DONE")
"""

    async def scenario():
        async with approval_session(d, mode, approver) as client:
            first = await run(client, code)
            second = await run(client, code)  # a new run asks again
            return first, second

    (t1, _), (t2, _) = go(scenario())
    assert "DONE" in t1 and "DONE" in t2, (t1, t2)
    assert ran(calls) == 6
    assert len(approver.questions) == 2


@pytest.mark.parametrize("mode", MODES)
def test_read_only_and_unmarked_tools_never_ask(db, mode):
    d, calls = db
    approver = Approver(approve=False)
    code = 'await mcp_db.peek(name="t")\nawait mcp_db.write_note(text="n")\nprint("DONE")'

    async def scenario():
        async with approval_session(d, mode, approver) as client:
            return await run(client, code)

    text, _ = go(scenario())
    assert "DONE" in text, text
    assert ran(calls, "peek") == 1 and ran(calls, "write_note") == 1
    assert approver.questions == []


# --- 2026-07-28: the requestState, by hand ------------------------------------------------------

ARGS = {"code": DROP, "servers": ["db"]}
YES = {"approval": {"action": "accept", "content": {"approve": True, "for_run": False}}}


def _first_round(result) -> types.InputRequiredResult:
    assert isinstance(result, types.InputRequiredResult), result
    assert set(result.input_requests) == {"approval"}
    assert result.request_state
    return result


def test_a_forged_or_altered_state_is_refused(db):
    d, calls = db

    async def scenario():
        async with approval_session(d, "2026-07-28", Approver()) as client:
            first = _first_round(await drive_once(client, ARGS))
            state = first.request_state
            flipped = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
            errors = []
            for args, forged in [
                (ARGS, flipped),
                (ARGS, "rs1.e30.AAAA"),
                (ARGS, "x" * 5000),
                ({**ARGS, "code": DROP + "\nprint(2)"}, state),  # the state with other arguments
            ]:
                with pytest.raises(MCPError) as e:
                    await drive_once(client, args, YES, forged)
                errors.append(str(e.value))
            assert ran(calls) == 0
            # The genuine state still works.
            done = await drive_once(client, ARGS, YES, state)
            return errors, done

    errors, done = go(scenario())
    for e in errors:
        assert "requestState refused" in e, e
    assert isinstance(done, types.CallToolResult), done
    assert "RAN" in done.content[0].text
    assert ran(calls) == 1


def test_a_replayed_state_is_refused(db):
    d, calls = db

    async def scenario():
        async with approval_session(d, "2026-07-28", Approver()) as client:
            first = _first_round(await drive_once(client, ARGS))
            done = await drive_once(client, ARGS, YES, first.request_state)
            with pytest.raises(MCPError) as e:
                await drive_once(client, ARGS, YES, first.request_state)
            return done, str(e.value)

    done, error = go(scenario())
    assert isinstance(done, types.CallToolResult) and "RAN" in done.content[0].text, done
    assert "replayed" in error, error
    assert ran(calls) == 1


def test_an_expired_state_is_refused(db):
    d, calls = db

    async def scenario():
        env = {"MCP_BRIDGE_APPROVAL_TIMEOUT": "1"}
        async with approval_session(d, "2026-07-28", Approver(), env) as client:
            first = _first_round(await drive_once(client, ARGS))
            time.sleep(2.5)  # past the question's wait (1 s): the state's TTL
            with pytest.raises(MCPError) as e:
                await drive_once(client, ARGS, YES, first.request_state)
            return str(e.value)

    error = go(scenario())
    assert "requestState refused" in error, error
    assert ran(calls) == 0


# --- the sandbox cannot approve itself ------------------------------------------------------------

SELF_APPROVE = """
import sys
# The entrypoint's own low-level call (below the mcp.runtime helpers), found the way hostile code would.
runtime = next(m for m in list(sys.modules.values()) if hasattr(m, "call_host") and hasattr(m, "host"))
for name, call in [
    ("approve", lambda: runtime.call_host("approve", {"server": "db", "tool": "drop_table", "approved": True})),
    ("elicitation", lambda: runtime.call_host("elicitation/create", {"action": "accept", "content": {"approve": True}})),
    ("frame", lambda: runtime.call_host("call_tool", {"server": "db", "tool": "drop_table",
        "arguments": {"name": "x", "approved": True, "_meta": {"approved": True}},
        "_meta": {"approved": True, "for_run": True}})),
    ("args", lambda: mcp_db.drop_table(name="x", approved=True, confirm=True)),
]:
    try:
        await call()
        print(name, "RAN")
    except Exception as e:
        print(name, "REFUSED", type(e).__name__)
"""


@pytest.mark.parametrize("mode", MODES)
def test_sandbox_code_cannot_approve_its_own_calls(db, mode):
    d, calls = db

    async def scenario():
        async with approval_session(d, mode, None) as client:
            text, _ = await run(client, SELF_APPROVE)
            extra, is_error = await run(client, DROP, approved=True)
            return text, extra, is_error

    text, extra, is_error = go(scenario())
    assert "RAN" not in text, text
    assert "frame REFUSED NotApprovedError" in text, text
    for name in ("approve", "elicitation", "args"):
        assert f"{name} REFUSED" in text, text
    assert is_error and "unknown argument 'approved'" in extra, extra
    assert ran(calls) == 0


def test_exec_fails_closed_with_the_how_to(db):
    d, calls = db
    env = base_env(d)
    p = subprocess.run([BRIDGE_BIN, "exec", "--servers", "db", DROP], capture_output=True, text=True,
                       env=env, cwd=d / "cwd", timeout=180, stdin=subprocess.DEVNULL)
    out = p.stdout + p.stderr
    assert "REFUSED NotApprovedError" in out, out
    for needle in HOW_TO:
        assert needle in out, out
    assert ran(calls) == 0


def test_question_text_is_bounded_and_escaped(db):
    d, _ = db
    approver = Approver(approve=False)
    code = 'await mcp_db.drop_table(name="\\x1b[2J' + "A" * 5000 + '")'

    async def scenario():
        async with approval_session(d, "legacy", approver) as client:
            return await run(client, code)

    go(scenario())
    message = approver.questions[0].message
    assert "\x1b" not in message and len(message) < 2000, json.dumps(message[:300])


@pytest.mark.parametrize("mode", MODES)
def test_the_operators_lists_decide_whatever_the_hints_say(tmp_path, stub_ready, mode):
    calls = tmp_path / "calls.txt"
    entry = S.stub("db", policy_tools=True, call_file=calls)
    # write_note has no hints and peek says readOnlyHint: the list makes them ask; drop_table is
    # approved in advance.
    entry.update({"requireApproval": ["write_*", "peek"], "autoApprove": ["drop_table"]})
    d = workdir(tmp_path, {"db": entry})
    approver = Approver(approve=False)
    code = """
for name, call in [("note", lambda: mcp_db.write_note(text="n")), ("peek", lambda: mcp_db.peek(name="t")),
                   ("drop", lambda: mcp_db.drop_table(name="t"))]:
    try:
        await call()
        print(name, "RAN")
    except Exception as e:
        print(name, "REFUSED", type(e).__name__, e)
"""

    async def scenario():
        async with approval_session(d, mode, approver) as client:
            return await run(client, code)

    text, _ = go(scenario())
    assert "note REFUSED NotApprovedError" in text and "peek REFUSED NotApprovedError" in text, text
    assert "drop RAN" in text, text
    assert '"requireApproval" rule "write_*"' in approver.questions[0].message, approver.questions[0].message
    assert ran(calls, "write_note") == 0 and ran(calls, "peek") == 0 and ran(calls) == 1
    assert len(approver.questions) == 2
