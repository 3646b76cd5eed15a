"""The trace of a run (issue 33, point 3): the `run_python` result's
`_meta["mcp-code-bridge/trace"]` lists each tool call the code made (server, tool, start offset,
duration, bytes in and out, outcome), the run's totals and a token estimate of the same work as
direct tool calls; the audit log's run line carries the estimate. Against the stub server over
the real stdio path, the official Python client reading the result."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

import servers as S

pytestmark = [pytest.mark.timeout(300), pytest.mark.engine]

TRACE = "mcp-code-bridge/trace"


@pytest.fixture(scope="module")
def traced(bridge_factory, stub_ready, tmp_path_factory):
    log = tmp_path_factory.mktemp("trace") / "audit.log"
    b = bridge_factory(name="trace", config=S.config({"stub": S.stub("stub")}),
                       env={"MCP_BRIDGE_AUDIT_LOG": str(log)})
    b.audit = log
    yield b
    b.close()


def _trace(result):
    meta = result.meta or {}
    assert TRACE in meta, meta
    return meta[TRACE]


CODE = """
import asyncio
print(await mcp_stub.echo(text='a' * 1000))
await asyncio.sleep(0.05)
print(await mcp_stub.add(a=1, b=2))
try:
    await mcp_stub.fail(message='no')
except Exception as e:
    print(type(e).__name__)
"""


def test_a_run_with_several_calls_is_traced(traced):
    r = traced.call_raw({"code": CODE, "servers": ["stub"]})
    assert not r.is_error, r
    t = _trace(r)
    calls = t["calls"]
    assert [(c["server"], c["tool"]) for c in calls] == [("stub", "echo"), ("stub", "add"), ("stub", "fail")], t
    assert [c["outcome"] for c in calls] == ["ok", "ok", "tool"], t
    # In order, the second after the 50 ms pause.
    assert calls[0]["start_ms"] < calls[1]["start_ms"] < calls[2]["start_ms"], t
    assert calls[1]["start_ms"] - calls[0]["start_ms"] >= 50, t
    assert calls[0]["bytes_in"] > 1000 and calls[0]["bytes_out"] > 1000, t
    assert calls[2]["bytes_out"] == 0, t
    totals = t["totals"]
    assert totals["calls"] == 3 and totals["errors"] == 1, t
    assert totals["bytes_in"] == sum(c["bytes_in"] for c in calls), t
    assert 0 < totals["calls_ms"] <= totals["run_ms"], t
    tokens = t["tokens"]
    # Direct calls would have paid for the stub's tool list, the arguments and the results.
    assert tokens["direct_estimate"] > (totals["bytes_in"] + totals["bytes_out"]) / tokens["bytes_per_token"], t
    assert tokens["run_estimate"] > 0 and tokens["saved_estimate"] == tokens["direct_estimate"] - tokens["run_estimate"], t
    # The audit log's run line carries the estimate.
    deadline = time.monotonic() + 10
    runs = []
    while time.monotonic() < deadline and not runs:
        lines = traced.audit.read_text().splitlines() if traced.audit.exists() else []
        runs = [json.loads(x) for x in lines if json.loads(x).get("kind") == "run"]
        time.sleep(0.1)
    assert runs and runs[-1]["tokens_direct"] == tokens["direct_estimate"], runs
    assert runs[-1]["tokens_run"] == tokens["run_estimate"], runs


def test_a_run_without_calls_has_an_empty_trace(traced):
    t = _trace(traced.call_raw({"code": "print(1)"}))
    assert t["calls"] == [] and t["totals"]["calls"] == 0 and t["calls_left_out"] == 0, t


TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("lane", ["1", "0"])
def test_a_traceparent_is_passed_on_to_downstream_calls(bridge_factory, lane):
    # The lane writes stdio calls itself; with it off they go through rmcp, as HTTP calls do.
    asker = {"command": sys.executable, "args": [str(Path(__file__).with_name("elicit_server.py"))]}
    b = bridge_factory(name=f"traceparent-{lane}", config=S.config({"asker": asker}),
                       env={"MCP_BRIDGE_CALL_LANE": lane})
    try:
        code = "import json\nprint(json.dumps(await mcp_asker.seen_meta()))"
        args = {"code": code, "servers": ["asker"]}
        sent = {"traceparent": TP, "tracestate": "vendor=1", "baggage": "user=ada"}
        r = b.request(lambda s: s.call_tool("run_python", args, meta=sent))
        seen = json.loads(json.loads(r.content[0].text.strip().splitlines()[-1]))
        assert {k: seen.get(k) for k in sent} == sent, seen
        # A malformed one is not passed on.
        r = b.request(lambda s: s.call_tool("run_python", args, meta={"traceparent": "00-zz-1-01"}))
        seen = json.loads(json.loads(r.content[0].text.strip().splitlines()[-1]))
        assert "traceparent" not in seen, seen
    finally:
        b.close()
