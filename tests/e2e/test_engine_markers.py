"""The engine markers (engine_markers.py): a test with no engine marker, or with two, stops the
collection with its name, so a new test is never left out of the docker pass by forgetting one; one
marker each collects, and `-m engine` selects the engine tests only. Run on a small suite of its
own in a child pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.host_only  # pytest's collection on the host: no engine involved

HERE = Path(__file__).resolve().parent

SUITE = {
    "test_a.py": "import pytest\n\npytestmark = pytest.mark.engine\n\n\ndef test_in_a_container():\n    pass\n",
    "test_b.py": (
        "import pytest\n\n\n@pytest.mark.host_only\ndef test_on_the_host():\n    pass\n\n\n"
        "@pytest.mark.own_engine\ndef test_with_its_own_engine():\n    pass\n"
    ),
}


def _collect(tmp_path: Path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = dict(os.environ, PYTHONPATH=str(HERE))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "engine_markers", "-p", "no:cacheprovider", "-q", "--collect-only", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )


def test_one_marker_each_collects_and_the_docker_pass_selects_the_engine_tests(tmp_path):
    out = _collect(tmp_path, SUITE, "-m", "engine")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "test_a.py::test_in_a_container" in out.stdout
    assert "test_on_the_host" not in out.stdout and "test_with_its_own_engine" not in out.stdout
    assert "1/3 tests collected" in out.stdout, out.stdout


def test_a_test_without_a_marker_or_with_two_stops_the_collection(tmp_path):
    files = dict(SUITE)
    files["test_c.py"] = (
        "import pytest\n\n\ndef test_forgotten():\n    pass\n\n\n"
        "@pytest.mark.engine\n@pytest.mark.host_only\ndef test_undecided():\n    pass\n"
    )
    out = _collect(tmp_path, files, "-m", "engine")
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage error
    text = out.stdout + out.stderr
    assert "test_c.py::test_forgotten: none" in text, text
    assert "test_c.py::test_undecided: engine, host_only" in text, text
    assert "test_a.py" not in text.split("exactly one of the markers")[1], text
