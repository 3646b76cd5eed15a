"""One call's lifecycle (GUIDE.md, "Timeouts, crashes and restarts"): timeouts, the sandbox killed
between or during calls, and huge output cut while the session survives.

Every test gets its own bridge (these tests kill things).
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from helpers_lifecycle import STATE_RESET
from helpers_lifecycle import own_running_container as _own_running_container
from helpers_lifecycle import warm as _warm

pytestmark = pytest.mark.engine  # sandbox containers killed and replaced on the engine

# --- timeouts -------------------------------------------------------------------------------------


def test_busy_loop_times_out_promptly(bridge):
    _warm(bridge)
    t0 = time.monotonic()
    r = bridge.run("while True:\n    pass\n", timeout=2)
    wall = time.monotonic() - t0
    assert r.is_error, str(r)
    assert r.status == "timeout", str(r)
    assert re.search(r"timed out", r.text, re.I), str(r)
    assert wall < 30, f"timeout=2 took {wall:.2f} s of wall time\n{r}"

    nxt = bridge.run("print('after busy loop')")
    assert not nxt.is_error and "after busy loop" in nxt.text, str(nxt)


def test_sleep_is_interrupted_and_state_survives(bridge):
    r = bridge.run("lc_x = 5")
    assert not r.is_error, str(r)
    t0 = time.monotonic()
    r = bridge.run("import time\ntime.sleep(100)\n", timeout=2)
    wall = time.monotonic() - t0
    assert r.is_error, str(r)
    assert r.status == "timeout", str(r)
    assert "interrupted" in r.text.lower(), str(r)
    assert wall < 30, f"timeout=2 took {wall:.2f} s of wall time\n{r}"

    nxt = bridge.run("print(lc_x)")
    assert not nxt.is_error, str(nxt)
    assert nxt.text.strip() == "5", str(nxt)
    assert "notice" not in (nxt.structured or {}), str(nxt)


def test_default_timeout_is_capped_by_max_timeout(bridge_factory):
    # MCP_BRIDGE_MAX_TIMEOUT caps what a call may ask for.
    b = bridge_factory(env={"MCP_BRIDGE_TIMEOUT": "1", "MCP_BRIDGE_MAX_TIMEOUT": "2"}, name="maxtimeout")
    try:
        _warm(b)
        t0 = time.monotonic()
        r = b.run("import time\ntime.sleep(60)\n", timeout=100)
        wall = time.monotonic() - t0
        assert r.is_error and r.status == "timeout", str(r)
        assert "Timed out after 2 s" in r.text, f"asked for 100 s with MCP_BRIDGE_MAX_TIMEOUT=2\n{r}"
        assert wall < 30, f"asked for 100 s with MCP_BRIDGE_MAX_TIMEOUT=2, took {wall:.2f} s\n{r}"
        t0 = time.monotonic()
        r = b.run("import time\ntime.sleep(60)\n")
        wall = time.monotonic() - t0
        assert r.is_error and r.status == "timeout", str(r)
        assert "Timed out after 1 s" in r.text, f"default MCP_BRIDGE_TIMEOUT=1\n{r}"
        assert wall < 30, f"default MCP_BRIDGE_TIMEOUT=1 took {wall:.2f} s\n{r}"
    finally:
        b.close()


# --- the sandbox dies -----------------------------------------------------------------------------


def test_container_killed_between_calls(bridge, helpers):
    r = bridge.run("lc_y = 'doomed'\nprint('set')")
    assert not r.is_error, str(r)
    cid = _own_running_container(bridge, helpers)
    helpers.kill_container(cid)
    gone = helpers.poll(lambda: cid not in bridge.containers(running_only=True), timeout=10)
    assert gone, f"container {cid} still running after kill"
    # "Between calls": give the bridge a moment to observe the death (a call racing the kill
    # is covered by test_call_right_after_outside_kill below).
    time.sleep(1.0)

    r = bridge.run("print('after kill', 'lc_y' in globals())")
    assert not r.is_error, f"the call after an outside kill should work\n{r}\n{bridge.stderr_tail()}"
    assert r.text.strip().endswith("after kill False"), str(r)
    notice = (r.structured or {}).get("notice", "")
    assert notice and STATE_RESET.search(notice), f"the result must say that state was reset\n{r}"
    assert "[note]" in r.text, str(r)

    # And the session continues normally, without repeating the notice.
    again = bridge.run("print('steady')")
    assert not again.is_error and "notice" not in (again.structured or {}), str(again)


def test_call_right_after_outside_kill(bridge, helpers):
    r = bridge.run("lc_z = 1")
    assert not r.is_error, str(r)
    cid = _own_running_container(bridge, helpers)
    helpers.kill_container(cid)
    r = bridge.run("print('right after kill')")
    assert not r.is_error, f"{r}\n{bridge.stderr_tail()}"
    assert "right after kill" in r.text and (r.structured or {}).get("notice"), str(r)


def test_container_killed_during_call(bridge, helpers):
    _warm(bridge)
    cid = _own_running_container(bridge, helpers)
    fut = bridge.run_async("import time\ntime.sleep(30)\nprint('should not get here')", timeout=60)
    time.sleep(1.0)
    assert not fut.done(), "the sleep call ended early"
    killed_at = [0.0]

    def killer() -> None:
        killed_at[0] = time.monotonic()
        helpers.kill_container(cid)

    t = threading.Thread(target=killer)
    t.start()
    t.join(30)
    r = fut.result(30)
    after_kill = time.monotonic() - killed_at[0]
    assert after_kill < 10.0, f"the call took {after_kill:.1f} s to return after the kill\n{r}"
    assert r.is_error, str(r)
    assert "should not get here" not in r.text, str(r)
    assert re.search(r"died|killed|stopped|exit", r.text, re.I), str(r)

    nxt = bridge.run("print('after kill during call')")
    assert not nxt.is_error, f"{nxt}\n{bridge.stderr_tail()}"
    assert "after kill during call" in nxt.text, str(nxt)
    notice = (nxt.structured or {}).get("notice", "")
    assert notice and STATE_RESET.search(notice), str(nxt)


# --- output ---------------------------------------------------------------------------------------


def test_huge_output_is_cut_and_the_session_survives(bridge):
    _warm(bridge)
    t0 = time.monotonic()
    r = bridge.run("print('x' * 50_000_000)", timeout=60)
    wall = time.monotonic() - t0
    assert not r.is_error, str(r)
    assert wall < 20.0, f"50 MB of output took {wall:.1f} s"
    assert "characters cut" in r.text, str(r)
    m = re.search(r"(\d+) characters cut", r.text)
    assert m and int(m.group(1)) > 49_000_000, str(r)
    assert len(r.text.encode()) < 200_000, f"text is {len(r.text.encode())} bytes"
    whole = r.raw.model_dump_json(by_alias=True, exclude_none=True) if hasattr(r.raw, "model_dump_json") else json.dumps(r.structured)
    assert len(whole.encode()) < 200_000, f"the whole result is {len(whole.encode())} bytes"
    # Head and tail are kept around the marker.
    assert r.text.startswith("xxxx") and r.text.rstrip("\n").endswith("xxxx"), str(r)

    nxt = bridge.run("print('after huge output')")
    assert not nxt.is_error and nxt.text.strip() == "after huge output", str(nxt)


def test_huge_stderr_is_cut_too(bridge):
    r = bridge.run("import sys\nsys.stderr.write('e' * 5_000_000)\nprint('out ok')", timeout=60)
    assert not r.is_error, str(r)
    s = r.structured or {}
    assert s.get("stdout") == "out ok\n", str(r)
    assert "characters cut" in s.get("stderr", ""), str(r)
    assert len(s.get("stderr", "")) < 100_000, len(s.get("stderr", ""))
    assert not bridge.run("print(1)").is_error
