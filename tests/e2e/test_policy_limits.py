"""Rate limits and run budgets (GUIDE.md, "Policy", "Rate limits and budgets") through the real bridge
and the official MCP client: a call over a limit raises LimitExceededError in the sandbox naming the
limit, its value and where it was set; the code catches it and the run goes on.

The rates are low (1 or 2 calls a minute) so that no token comes back while a run makes its calls.
Result-byte budgets hold against calls made together (asyncio.gather): each call in flight
reserves an estimate of its result.
"""

from __future__ import annotations

import json

import pytest

import servers as S

pytestmark = pytest.mark.host_only  # the policy is host-side: one engine is enough

# Calls `tool` of each server `n` times; records "ok" or [exception class, message]; prints after.
CALLS = """
import json

out = {}
for server, tool, args, n in PLAN:
    got = out.setdefault(server + "." + tool, [])
    for _ in range(n):
        try:
            await getattr(mcp_servers[server], tool)(**args)
            got.append("ok")
        except Exception as e:
            got.append([type(e).__name__, str(e)])
print("the run goes on")
print(json.dumps(out))
"""


def _calls(bridge, plan: list, servers: list[str]) -> dict:
    r = bridge.run(f"PLAN = {plan!r}\n" + CALLS, servers=servers)
    assert not r.is_error and r.status == "ok", f"run failed:\n{r}"
    lines = r.structured["stdout"].strip().splitlines()
    assert lines[-2] == "the run goes on", lines
    return json.loads(lines[-1])


def _split(results: list) -> tuple[int, list]:
    ok = [x for x in results if x == "ok"]
    assert results[: len(ok)] == ok, results
    return len(ok), results[len(ok):]


def test_the_rate_limit_per_server_from_the_setting_and_the_entry(bridge_factory, stub_ready):
    slow = S.stub("slow")
    slow["callsPerMinute"] = 1
    b = bridge_factory(
        name="rate",
        env={"MCP_BRIDGE_CALLS_PER_MINUTE": "2"},
        config={"mcpServers": {"stub": S.stub("stub"), "slow": slow}},
    )
    config_file = str(b.dir / "mcps" / "servers.json")
    echo = {"text": "x"}
    got = _calls(b, [("stub", "echo", echo, 4), ("slow", "echo", echo, 3)], ["stub", "slow"])
    ok, refused = _split(got["stub.echo"])
    assert ok == 2 and len(refused) == 2, got
    kind, message = refused[0]
    assert kind == "LimitExceededError", refused
    assert "rate limit of 2 calls per minute to server 'stub'" in message, message
    assert "(limit MCP_BRIDGE_CALLS_PER_MINUTE=2)" in message and "the run goes on" in message, message
    ok, refused = _split(got["slow.echo"])
    assert ok == 1 and len(refused) == 2, got
    assert f"(limit \"callsPerMinute\": 1 in {config_file})" in refused[0][1], refused
    # Over all runs: the next run finds the bucket still empty.
    again = _calls(b, [("stub", "echo", echo, 1)], ["stub"])
    assert again["stub.echo"][0][0] == "LimitExceededError", again


def test_run_budgets_of_calls_and_result_bytes(bridge_factory, stub_ready):
    capped = S.stub("capped")
    capped["maxCallsPerRun"] = 2
    capped["maxResultBytesPerRun"] = 1000
    b = bridge_factory(
        name="budgets",
        env={"MCP_BRIDGE_RUN_MAX_CALLS": "6", "MCP_BRIDGE_RUN_MAX_RESULT_BYTES": "3000"},
        config={"mcpServers": {"stub": S.stub("stub"), "capped": capped}},
    )
    config_file = str(b.dir / "mcps" / "servers.json")
    echo = {"text": "x"}
    # Calls: 2 to capped (its own cap), then the run's 6 in all.
    got = _calls(b, [("capped", "echo", echo, 3), ("stub", "echo", echo, 6)], ["stub", "capped"])
    ok, refused = _split(got["capped.echo"])
    assert ok == 2 and len(refused) == 1, got
    assert refused[0][0] == "LimitExceededError", refused
    assert "this run made its 2 calls to server 'capped'" in refused[0][1], refused
    assert f"(limit \"maxCallsPerRun\": 2 in {config_file})" in refused[0][1], refused
    ok, refused = _split(got["stub.echo"])
    assert ok == 4 and len(refused) == 2, got
    assert "this run made its 6 tool calls" in refused[0][1], refused
    assert "(limit MCP_BRIDGE_RUN_MAX_CALLS=6)" in refused[0][1], refused

    # Result bytes: the run's total, and capped's own; a new run starts afresh.
    big = {"bytes": 1200}
    got = _calls(b, [("capped", "big", big, 2), ("stub", "big", big, 3)], ["stub", "capped"])
    ok, refused = _split(got["capped.big"])
    assert ok == 1 and refused[0][0] == "LimitExceededError", got
    assert "from server 'capped'" in refused[0][1], refused
    assert f"(limit \"maxResultBytesPerRun\": 1000 in {config_file})" in refused[0][1], refused
    ok, refused = _split(got["stub.big"])
    assert ok == 2 and refused[0][0] == "LimitExceededError", got
    assert "(limit MCP_BRIDGE_RUN_MAX_RESULT_BYTES=3000)" in refused[0][1], refused


# Calls made together with asyncio.gather; records "ok" or the exception class per call, the
# bytes received and the wall time.
GATHERED = """
import asyncio, json, time

async def one():
    try:
        r = await CALL
        return ["ok", len(json.dumps(r))]
    except Exception as e:
        return [type(e).__name__, str(e)]

t0 = time.monotonic()
got = await asyncio.gather(*[one() for _ in range(N)])
print(json.dumps({"got": got, "secs": time.monotonic() - t0}))
"""


def _gathered(bridge, call: str, n: int, before: str = "") -> dict:
    code = before + GATHERED.replace("CALL", call).replace("range(N)", f"range({n})")
    r = bridge.run(code, servers=["stub"])
    assert not r.is_error and r.status == "ok", f"run failed:\n{r}"
    return json.loads(r.structured["stdout"].strip().splitlines()[-1])


def test_the_result_byte_budget_holds_against_gathered_calls(bridge_factory, stub_ready):
    """60 calls of 10,000-byte results made together under a 1,000-byte budget: the first one's
    result passes the budget, the others are refused (before: all 60 went through)."""
    b = bridge_factory(
        name="gathered-budget",
        env={"MCP_BRIDGE_RUN_MAX_RESULT_BYTES": "1000"},
        config={"mcpServers": {"stub": S.stub("stub")}},
    )
    out = _gathered(b, "mcp_stub.big(bytes=10000)", 60)
    ok = [g for g in out["got"] if g[0] == "ok"]
    refused = [g for g in out["got"] if g[0] != "ok"]
    assert len(ok) == 1, f"{len(ok)} calls got results: {sum(g[1] for g in ok)} bytes"
    assert all(g[0] == "LimitExceededError" for g in refused), refused[:3]
    assert "(limit MCP_BRIDGE_RUN_MAX_RESULT_BYTES=1000)" in refused[0][1], refused[0]
    # A small result of another tool first does not make the big ones look small: estimates are
    # per tool.
    out = _gathered(b, "mcp_stub.big(bytes=10000)", 60, before='await mcp_stub.echo(text="x")\n')
    assert sum(1 for g in out["got"] if g[0] == "ok") == 1, out["got"][:3]


def test_gathered_calls_still_run_together_while_the_budget_has_room(bridge_factory, stub_ready):
    """20 one-second calls with small results under a roomy budget: after the first (whose size
    is the estimate) they run together, not one after another."""
    b = bridge_factory(
        name="gathered-room",
        env={"MCP_BRIDGE_RUN_MAX_RESULT_BYTES": "100000"},
        config={"mcpServers": {"stub": S.stub("stub")}},
    )
    out = _gathered(b, "mcp_stub.slow(seconds=1)", 20)
    assert all(g[0] == "ok" for g in out["got"]), out["got"][:3]
    assert out["secs"] < 8, out["secs"]
