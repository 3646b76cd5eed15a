"""A timeout stops every process the cell started (GUIDE.md, "Timeouts, crashes and restarts"), through the real bridge on
the real engine: a busy child, a child in its own session, a grandchild and a double-forked daemon
are all gone after the timeout; a helper an earlier cell started on purpose still runs; the
interpreter's state is kept. What is alive is read from /proc inside the sandbox."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root
from entrypoint.tests.cell_scripts import START_ALL, START_HELPER  # noqa: E402

pytestmark = pytest.mark.engine  # processes in the sandbox container and how a timeout kills them

# The same sandbox code as the unit tests (entrypoint/tests/cell_scripts.py), plus a variable the
# timed-out cell must not lose and a line saying the helper runs.
START_HELPER = 'cp_before = "set before the timeout"\n' + START_HELPER + 'print("helper", cp_helper.pid)\n'

TIMES_OUT = 'cp_kept = "set in the timed-out cell"\n' + START_ALL + "time.sleep(100)\n"

REPORT = """
print(json.dumps({"started": sorted(cp_pids), "alive": cp_alive(cp_pids, cp_starts),
                  "helper": cp_alive({"helper": cp_helper.pid}, cp_helper_start)["helper"],
                  "kept": [cp_before, cp_kept]}))
"""


def test_a_timeout_kills_the_cells_processes_and_keeps_the_rest(bridge):
    r = bridge.run(START_HELPER)
    assert not r.is_error and r.text.startswith("helper "), str(r)

    t0 = time.monotonic()
    r = bridge.run(TIMES_OUT, timeout=2)
    wall = time.monotonic() - t0
    assert r.is_error and r.status == "timeout", str(r)
    assert wall < 30, f"timeout=2 took {wall:.2f} s (the cell sleeps 100 s)\n{r}"

    r = bridge.run(REPORT)
    assert not r.is_error, str(r)
    assert "notice" not in (r.structured or {}), f"the sandbox was restarted:\n{r}"
    report = json.loads(r.text.strip().splitlines()[-1])
    assert report["started"] == ["busy", "daemon", "grandchild", "parent", "session"], report
    survivors = [kind for kind, alive in report["alive"].items() if alive]
    assert not survivors, f"processes of the timed-out cell still run: {survivors}\n{report}"
    assert report["helper"], f"the earlier cell's helper was killed\n{report}"
    assert report["kept"] == ["set before the timeout", "set in the timed-out cell"], report

    r = bridge.run("cp_helper.kill()\nprint(cp_helper.wait())")
    assert not r.is_error and r.text.strip() == "-9", str(r)


def test_a_cell_that_ends_keeps_its_background_processes(bridge):
    r = bridge.run(START_HELPER)
    assert not r.is_error, str(r)
    r = bridge.run(TIMES_OUT.replace("time.sleep(100)", "raise ValueError('done')"), timeout=20)
    assert r.is_error and r.status == "error", str(r)
    r = bridge.run(REPORT)
    assert not r.is_error, str(r)
    report = json.loads(r.text.strip().splitlines()[-1])
    assert all(report["alive"].values()) and report["helper"], report
    r = bridge.run("for p in cp_pids.values():\n    os.kill(p, 9)\ncp_helper.kill()\nprint('ok')")
    assert not r.is_error, str(r)
