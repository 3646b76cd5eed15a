"""The stage-time table of .ci/run and tests/run-all.sh (.ci/stages.sh), run in bash on scripts of its
own: every stage with its wall time and result, the stage in progress marked FAILED with the exit
code when the script stops there (set -e, or a signal), and a script run under another adding its
rows, with its prefix, to the caller's one table."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.host_only  # shell scripts on the host: no engine involved

STAGES = Path(__file__).resolve().parents[2] / ".ci" / "stages.sh"


# The scripts here own their tables: run under .ci/run, the caller's table file (MCB_STAGE_TIMES)
# must not reach them, or their rows would land in CI's own table.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "MCB_STAGE_TIMES"}


def _script(tmp_path: Path, name: str, prefix: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(f"set -euo pipefail\n. '{STAGES}'\nstages_init '{prefix}'\n{body}\n")
    return p


def _rows(stdout: str) -> list[tuple[int, str, str]]:
    """(seconds, label, result) of each table row after the table's heading."""
    table = stdout.split("== stage times (wall clock, seconds)\n", 1)[1]
    rows = []
    for line in table.splitlines():
        m = re.fullmatch(r"\s*(\d+)  (.+?)\s+(ok|FAILED \(exit \d+\))", line)
        assert m, f"not a table row: {line!r}\n{stdout}"
        rows.append((int(m[1]), m[2], m[3]))
    return rows


def test_every_stage_has_its_time_and_a_failed_stage_its_exit_code(tmp_path):
    s = _script(tmp_path, "ci.sh", "", 'stage "first"\nsleep 1\nstage "second"\nfalse\nstage "never"\n')
    out = subprocess.run(["bash", str(s)], capture_output=True, text=True, timeout=60, env=CLEAN_ENV)
    assert out.returncode == 1, out
    assert "== first\n== second\n" in out.stdout, out.stdout
    rows = _rows(out.stdout)
    assert [(label, result) for _, label, result in rows] == [
        ("first", "ok"),
        ("second", "FAILED (exit 1)"),
        ("total (wall time of the whole run)", "FAILED (exit 1)"),
    ], out.stdout
    assert rows[0][0] >= 1, rows


def test_a_nested_script_adds_its_rows_to_the_callers_table(tmp_path):
    inner = _script(tmp_path, "inner.sh", "tests: ", 'stage "cargo test"\ntrue\nstage "e2e"\nexit 3\n')
    outer = _script(
        tmp_path, "outer.sh", "",
        f'stage "setup"\ntrue\nstage_end\nbash {inner} || echo "inner exited $?"\nstage "packaging"\ntrue\nstage_end\n',
    )
    out = subprocess.run(["bash", str(outer)], capture_output=True, text=True, timeout=60, env=CLEAN_ENV)
    assert out.returncode == 0, out
    assert out.stdout.count("== stage times") == 1, out.stdout  # the caller's table only
    assert "inner exited 3" in out.stdout, out.stdout
    assert [(label, result) for _, label, result in _rows(out.stdout)] == [
        ("setup", "ok"),
        ("tests: cargo test", "ok"),
        ("tests: e2e", "FAILED (exit 3)"),
        ("packaging", "ok"),
        ("total (wall time of the whole run)", "ok"),
    ], out.stdout


def test_a_signal_still_prints_the_table(tmp_path):
    s = _script(tmp_path, "ci.sh", "", 'stage "long"\necho started\nsleep 30 >/dev/null & wait\n')
    p = subprocess.Popen(
        ["bash", str(s)], stdout=subprocess.PIPE, text=True, start_new_session=True, env=CLEAN_ENV
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline() == "== long\n"
        assert p.stdout.readline() == "started\n"
        p.send_signal(signal.SIGTERM)
        stdout, _ = p.communicate(timeout=60)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the script's sleep
        except ProcessLookupError:
            pass
    assert p.returncode == 143, stdout
    assert [(label, result) for _, label, result in _rows(stdout)] == [
        ("long", "FAILED (exit 143)"),
        ("total (wall time of the whole run)", "FAILED (exit 143)"),
    ], stdout
