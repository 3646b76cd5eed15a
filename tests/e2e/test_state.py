"""State that outlives the sandbox, and progress of long cells (issue 17, points 4 and 5), through
the official MCP client on the real engine: an idle stop saves the namespace (a DataFrame, a
function and a class defined in cells, an aliased import) and the next call gets it back with a
notice naming what came back and what could not (a generator, a lock); `runtime.reset()` clears
it for good; a long cell's output arrives as progress notifications, and a call without a
progress token gets none."""
from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine  # snapshots out of and back into the engine's container

IDLE = {"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "2"}

DEFINE = """
import pandas as pd
import json as j
import threading
df = pd.DataFrame({"n": range(5), "s": list("vwxyz")})
scale = 3
def times(x):
    return x * scale
class Box:
    def __init__(self, v):
        self.v = v
    def doubled(self):
        return times(self.v) * 2
box = Box(7)
gen = (i for i in range(3))
lock = threading.Lock()
print("defined")
"""


def snapshot_files(bridge) -> list[Path]:
    folder = bridge.dir / "state" / "snapshots"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def wait_for_idle_stop(bridge, helpers) -> None:
    gone = helpers.poll(lambda: not bridge.containers(), timeout=30, interval=0.2)
    assert gone, f"the idle sandbox was not stopped\n{bridge.stderr_tail()}"


def test_an_idle_stop_keeps_a_dataframe_functions_and_imports(bridge_factory, helpers):
    b = bridge_factory(env=IDLE, name="state-idle")
    r = b.run(DEFINE)
    assert r.structured["status"] == "ok" and "defined" in r.text, str(r)
    wait_for_idle_stop(b, helpers)
    files = snapshot_files(b)
    assert len(files) == 1, files
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    r = b.run("scale = 10\nprint(df.s.tolist(), int(df.n.sum()), times(2), box.doubled(), "
              "isinstance(box, Box), j.dumps({'k': 1}), 'gen' in globals(), 'lock' in globals())")
    assert r.structured["status"] == "ok", str(r)
    assert r.structured["stdout"] == ("['v', 'w', 'x', 'y', 'z'] 10 20 140 True "
                                      '{"k": 1} False False\n'), str(r)
    notice = r.structured.get("notice") or ""
    assert "stopped after 2 s idle" in notice, notice
    assert "Restored from the snapshot" in notice, notice
    for name in ("pd", "j", "threading", "df", "scale", "times", "Box", "box"):
        assert f"{name}," in notice or f"{name}." in notice, (name, notice)
    assert "gen (cannot be pickled: TypeError" in notice and "generator" in notice, notice
    assert "lock (cannot be pickled" in notice, notice
    assert "are gone" not in notice, notice
    b.close()
    assert snapshot_files(b) == [], "the snapshot is removed when the bridge exits"


def test_reset_clears_the_namespace_and_nothing_comes_back_after_an_idle_stop(bridge_factory, helpers):
    b = bridge_factory(env=IDLE, name="state-reset")
    b.run("x = 41\nimport json")
    wait_for_idle_stop(b, helpers)
    r = b.run("from mcp import runtime\nprint(sorted(runtime.reset()), 'x' in globals())")
    assert r.structured["stdout"] == "['json', 'runtime', 'x'] False\n", str(r)
    assert snapshot_files(b) == [], "reset drops the snapshot"
    wait_for_idle_stop(b, helpers)
    r = b.run("print('x' in globals())")
    assert r.structured["stdout"] == "False\n", str(r)
    assert "are gone" in (r.structured.get("notice") or ""), str(r)


LONG_CELL = """
import time
for i in range(10):
    print("step", i, flush=True)
    time.sleep(0.3)
print("done")
"""


def test_a_long_cells_output_arrives_as_progress_and_a_call_without_a_token_gets_none(
        bridge_factory):
    b = bridge_factory(name="state-progress")
    b.run("print('warm')")
    heard: list[tuple[float, str | None, float]] = []

    async def with_progress(session):
        async def on_progress(progress, total, message):
            heard.append((progress, message, time.monotonic()))

        return await session.call_tool("run_python", {"code": LONG_CELL},
                                       progress_callback=on_progress)

    began = time.monotonic()
    result = b.request(with_progress)
    ended = time.monotonic()
    texts = [getattr(c, "text", "") for c in result.content]
    assert any("done" in t for t in texts), texts
    messages = [m for _, m, _ in heard]
    assert len(heard) >= 2, messages
    assert all(t < ended for _, _, t in heard)
    assert any(m and " s: step " in m for m in messages), messages
    progress = [p for p, _, _ in heard]
    assert progress == sorted(progress) and len(set(progress)) == len(progress), progress
    assert heard[0][2] - began >= 0.9, "nothing before the first interval"
    # Without a progress token: the same cell, no notification at all.
    before = len(b.notifications)
    r = b.run(LONG_CELL)
    assert "done" in r.text, str(r)
    time.sleep(0.5)
    later = [n for n in b.notifications[before:] if getattr(n, "method", "") == "notifications/progress"]
    assert later == [], later
