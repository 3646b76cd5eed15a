"""Modules imported ahead (issue 25, point 3: MCP_BRIDGE_PRELOAD), through the official MCP client
and a real engine: the sandbox `run` starts ahead (MCP_BRIDGE_PREWARM) imports the modules into
sys.modules before the first run, not into the user's namespace and without a word in that run's
output; without the setting, on a cold start (MCP_BRIDGE_PREWARM=0) and in a replacement after a
crash nothing is imported ahead; a module that fails is logged once and the sandbox works; pyplot
imported ahead keeps the bridge's backend and its `show`."""
from __future__ import annotations

import base64

import pytest

pytestmark = pytest.mark.engine  # the sandbox started ahead, cold and replaced on the engine

# Stdlib modules the entrypoint itself does not import; `this` prints the Zen of Python as it is
# imported.
MODULES = ("colorsys", "fractions", "this")
PROBE = (
    "import sys\n"
    f"print(sorted(m for m in {MODULES!r} if m in sys.modules), [m for m in {MODULES!r} if m in globals()])"
)
PRELOAD = ",".join(MODULES)
IMPORTED = "modules imported ahead"
FAILED = "could not be imported ahead"


def first_run(bridge_factory, env: dict[str, str], name: str):
    b = bridge_factory(env=env, name=name)
    r = b.run(PROBE)
    assert not r.is_error, str(r)
    return b, r


def log_of(b) -> str:
    return b.stderr_path.read_text(errors="replace")


def test_a_prewarmed_sandbox_imports_the_modules_ahead_of_the_first_run(bridge_factory):
    b, r = first_run(bridge_factory, {"MCP_BRIDGE_PRELOAD": PRELOAD}, "preload-on")
    assert r.structured["stdout"] == "['colorsys', 'fractions', 'this'] []\n", str(r)
    assert "Beautiful is better than ugly" not in r.text, str(r)
    assert "Beautiful is better than ugly" not in log_of(b)
    assert log_of(b).count(IMPORTED) == 1, b.stderr_tail()
    r = b.run("import fractions as f\nprint(f.Fraction(1, 3) * 3)")
    assert r.structured["stdout"] == "1\n", str(r)
    b.close()


def test_without_the_setting_nothing_is_imported_ahead(bridge_factory):
    b, r = first_run(bridge_factory, {}, "preload-off")
    assert r.structured["stdout"] == "[] []\n", str(r)
    assert IMPORTED not in log_of(b)
    b.close()


def test_a_cold_start_does_not_import_ahead(bridge_factory):
    b, r = first_run(bridge_factory, {"MCP_BRIDGE_PRELOAD": PRELOAD, "MCP_BRIDGE_PREWARM": "0"}, "preload-cold")
    assert r.structured["stdout"] == "[] []\n", str(r)
    assert IMPORTED not in log_of(b)
    b.close()


def test_a_module_that_fails_is_logged_once_and_the_sandbox_works(bridge_factory):
    # venv.__main__ runs venv's command line as it is imported: usage on stderr, SystemExit(2).
    env = {"MCP_BRIDGE_PRELOAD": "no_such_module_x,venv.__main__,colorsys"}
    b, r = first_run(bridge_factory, env, "preload-bad")
    assert r.structured["stdout"] == "['colorsys'] []\n", str(r)
    r = b.run("import no_such_module_x")
    assert r.is_error and "No module named 'no_such_module_x'" in r.text, str(r)
    log = log_of(b)
    failures = [line for line in log.splitlines() if FAILED in line]
    assert len(failures) == 2, b.stderr_tail()
    assert any("no_such_module_x" in line and "ModuleNotFoundError" in line for line in failures), failures
    assert any("venv.__main__" in line and "SystemExit: 2" in line for line in failures), failures
    assert "usage: venv" not in log and "usage: venv" not in r.text
    b.close()


def test_a_replacement_after_a_crash_does_not_import_ahead(bridge_factory, helpers):
    b, r = first_run(bridge_factory, {"MCP_BRIDGE_PRELOAD": PRELOAD}, "preload-crash")
    assert r.structured["stdout"] == "['colorsys', 'fractions', 'this'] []\n", str(r)
    old = set(b.containers(running_only=True))
    r = b.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert r.is_error, str(r)
    # The replacement is started ahead, before the next call (MCP_BRIDGE_PREWARM): wait for it,
    # so the probe below runs in that one and not in one its own arrival started.
    fresh = helpers.poll(lambda: set(b.containers(running_only=True)) - old, timeout=60)
    assert fresh, b.stderr_tail()
    r = b.run(PROBE)
    assert r.structured["stdout"] == "[] []\n", str(r)
    assert log_of(b).count(IMPORTED) == 1, b.stderr_tail()
    b.close()


def test_pyplot_imported_ahead_keeps_the_backend_and_hands_figures_back(bridge_factory):
    b = bridge_factory(env={"MCP_BRIDGE_PRELOAD": "pandas,matplotlib.pyplot"}, name="preload-plt")
    code = (
        "import sys\n"
        "print('pandas' in sys.modules, 'matplotlib.pyplot' in sys.modules)\n"
        "import matplotlib, matplotlib.pyplot as plt, pandas as pd\n"
        "print(matplotlib.get_backend(), plt.get_fignums(), len(pd.DataFrame({'a': [1, 2]})))\n"
        "plt.figure(figsize=(4, 3)); plt.plot([1, 3, 2]); plt.show()\n"
    )
    r = b.run(code)
    assert not r.is_error, str(r)
    assert "True True\nagg [] 2\n" in r.text, str(r)
    images = [c for c in r.raw.content if c.type == "image"]
    assert len(images) == 1, str(r)
    assert base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n"
    b.close()
