"""`mcp-code-bridge exec` as a CI step uses it: the program's stdout on stdout, its stderr and
traceback on stderr, one exit code per outcome (GUIDE.md, "exec in CI"), `--json`, and a stdout
closed early (`exec ... | head -1`) ending quietly instead of panicking."""
from __future__ import annotations

import json
import subprocess
import tempfile

import pytest

OK, RAISED, USAGE, TIMEOUT, SANDBOX = 0, 1, 2, 124, 125
JSON_KEYS = {"status", "exit_code", "stdout", "stderr", "error", "notice", "duration", "files",
             "files_refused"}


def _exec(helpers, env, cwd, *args: str, stdin: str | None = None, timeout: int = 120, **extra: str):
    return subprocess.run([helpers.BRIDGE_BIN, "exec", *args], input=stdin, capture_output=True, text=True,
                          env={**env, **extra}, cwd=cwd, timeout=timeout,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def _show(p) -> str:
    return f"rc={p.returncode}\nstdout={p.stdout[-3000:]!r}\nstderr={p.stderr[-3000:]}"


def _json(p) -> dict:
    lines = p.stdout.splitlines()
    assert len(lines) == 1, _show(p)  # one object, nothing else on stdout
    obj = json.loads(lines[0])
    assert set(obj) == JSON_KEYS, obj
    assert isinstance(obj["duration"], float) and obj["duration"] > 0, obj
    return obj


# Engine markers per test (engine_markers.py): `engine` where the outcome depends on the container
# engine (why, beside it; the docker pass runs these too), `host_only` where the subject is on the host.
@pytest.mark.engine  # exec's sandbox on the engine
def test_ok_prints_only_the_program_output(helpers, cli_env, cli_cwd):
    p = _exec(helpers, cli_env, cli_cwd, "import sys\nprint('out-line')\nprint('err-line', file=sys.stderr)\n"
              "sys.stdout.write('no newline');")
    assert p.returncode == OK, _show(p)
    assert p.stdout == "out-line\nno newline", _show(p)
    assert "err-line\n" in p.stderr, _show(p)
    assert "--- stderr ---" not in p.stdout + p.stderr, _show(p)


@pytest.mark.host_only
def test_a_raise_exits_1_with_the_traceback_on_stderr(helpers, cli_env, cli_cwd):
    p = _exec(helpers, cli_env, cli_cwd, "import sys\nprint('before')\nprint('warned', file=sys.stderr)\n"
              "raise ValueError('boom')")
    assert p.returncode == RAISED, _show(p)
    assert p.stdout == "before\n", _show(p)
    assert "warned\n" in p.stderr and "Traceback" in p.stderr and "ValueError: boom" in p.stderr, _show(p)
    assert p.stderr.index("warned") < p.stderr.index("ValueError: boom"), _show(p)


@pytest.mark.host_only
@pytest.mark.parametrize("code, rc, shown", [
    ("raise SystemExit(7)", 7, None),
    ("import sys\nsys.exit(0)", OK, None),
    ("import sys\nsys.exit()", OK, None),
    ("import sys\nsys.exit('bad input')", RAISED, "bad input"),
    ("import sys\nsys.exit(124)", TIMEOUT, None),
])
def test_system_exit_gives_its_code(helpers, cli_env, cli_cwd, code, rc, shown):
    p = _exec(helpers, cli_env, cli_cwd, "print('ran')\n" + code)
    assert p.returncode == rc, _show(p)
    assert p.stdout == "ran\n", _show(p)
    assert "Traceback" not in p.stderr and "SystemExit" not in p.stderr, _show(p)  # as python3 -c
    if shown:
        assert shown in p.stderr, _show(p)


@pytest.mark.engine  # the engine stops the timed-out sandbox
def test_timeout_exits_124_with_the_output_so_far(helpers, cli_env, cli_cwd):
    p = _exec(helpers, cli_env, cli_cwd, "--timeout", "1", "import time\nprint('started', flush=True)\ntime.sleep(60)")
    assert p.returncode == TIMEOUT, _show(p)
    assert p.stdout == "started\n", _show(p)
    assert "timeout" in p.stderr.lower(), _show(p)


@pytest.mark.host_only
@pytest.mark.parametrize("args", [[], ["--timeout", "soon", "print(1)"], ["--no-such-flag", "print(1)"]])
def test_a_usage_error_exits_2(helpers, cli_env, cli_cwd, args):
    p = _exec(helpers, cli_env, cli_cwd, *args)
    assert p.returncode == USAGE and p.stdout == "", _show(p)


@pytest.mark.host_only
def test_a_config_error_exits_2_and_runs_nothing(helpers, cli_env, cli_cwd):
    for extra in ([], ["--json"]):
        p = _exec(helpers, cli_env, cli_cwd, *extra, "print(1)", MCP_BRIDGE_TIMEOUT="soon")
        assert p.returncode == USAGE and p.stdout == "", _show(p)
        assert "MCP_BRIDGE_TIMEOUT" in p.stderr, _show(p)


@pytest.mark.engine  # each engine's own errors mapped to 125
@pytest.mark.parametrize("broken", [
    # A missing image is built unless builds are off (test_image_build.py covers the build).
    {"MCP_BRIDGE_IMAGE": "does-not-exist:latest", "MCP_BRIDGE_IMAGE_BUILD": "off"},
    {"DOCKER_HOST": "unix:///nonexistent/engine.sock"},
])
def test_a_sandbox_or_engine_failure_exits_125(helpers, cli_env, cli_cwd, broken):
    p = _exec(helpers, cli_env, cli_cwd, "print('never')", **broken)
    assert p.returncode == SANDBOX, _show(p)
    assert p.stdout == "" and "sandbox error" in p.stderr, _show(p)
    p = _exec(helpers, cli_env, cli_cwd, "--json", "print('never')", **broken)
    assert p.returncode == SANDBOX, _show(p)
    obj = _json(p)
    assert obj["status"] == "sandbox_error" and obj["exit_code"] == SANDBOX and obj["error"], obj


@pytest.mark.host_only
def test_json_is_one_object_on_stdout(helpers, cli_env, cli_cwd):
    p = _exec(helpers, cli_env, cli_cwd, "--json", "import sys\nprint('hi')\nprint('e', file=sys.stderr)")
    assert p.returncode == OK, _show(p)
    obj = _json(p)
    assert obj == {**obj, "status": "ok", "exit_code": 0, "stdout": "hi\n", "stderr": "e\n", "error": None}, obj

    p = _exec(helpers, cli_env, cli_cwd, "--json", "print('x')\n1/0")
    assert p.returncode == RAISED, _show(p)
    obj = _json(p)
    assert obj["status"] == "error" and obj["exit_code"] == RAISED and obj["stdout"] == "x\n", obj
    assert "ZeroDivisionError" in obj["error"], obj

    # `sys.exit(124)` and a timeout share the exit code; `status` tells them apart.
    p = _exec(helpers, cli_env, cli_cwd, "--json", "import sys\nsys.exit(124)")
    assert p.returncode == TIMEOUT, _show(p)
    obj = _json(p)
    assert (obj["status"], obj["exit_code"], obj["error"]) == ("exit", 124, None), obj
    p = _exec(helpers, cli_env, cli_cwd, "--json", "--timeout", "1", "import time\ntime.sleep(60)")
    assert p.returncode == TIMEOUT, _show(p)
    obj = _json(p)
    assert (obj["status"], obj["exit_code"]) == ("timeout", 124) and "Timed out" in obj["error"], obj


BIG = "for i in range(200_000):\n    print('line %06d' % i)"  # 2.4 MB, far past a pipe's buffer


@pytest.mark.host_only
@pytest.mark.parametrize("mode, times", [("after-first-line", 20), ("at-once", 5), ("json-at-once", 5)])
def test_a_stdout_closed_early_is_a_quiet_end(helpers, cli_env, cli_cwd, mode, times):
    env = {**cli_env, "MCP_BRIDGE_MAX_OUTPUT": "4000000"}
    args = ["--json", BIG] if mode == "json-at-once" else [BIG]
    for attempt in range(times):
        with tempfile.TemporaryFile() as err:
            p = subprocess.Popen([helpers.BRIDGE_BIN, "exec", *args], env=env, cwd=cli_cwd,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
            if mode == "after-first-line":
                first = p.stdout.readline()
                assert first == b"line 000000\n", (attempt, first)
            p.stdout.close()
            rc = p.wait(timeout=120)
            err.seek(0)
            stderr = err.read().decode(errors="replace")
        assert "panicked" not in stderr and rc != 101, (attempt, rc, stderr[-3000:])
        assert rc == OK, (attempt, rc, stderr[-3000:])
