"""Settings, black box: a value outside its range stops `run` and `exec` at start (exit 2) with a
message naming the variable, the value and the range, where four of them were once clamped in
silence; `doctor` lists the settings given values other than their defaults."""

import subprocess

import pytest

pytestmark = pytest.mark.host_only  # settings checked at start: host-side

USAGE = 2

# Each was raised or cut to fit before one range policy covered every setting.
ONCE_CLAMPED = [
    ("MCP_BRIDGE_MAX_FRAME", "1k", "from 64k to 4g"),
    ("MCP_BRIDGE_MAX_OUTPUT", "10", "from 256 to 1073741824"),
    ("MCP_BRIDGE_MAX_PENDING_RESULTS", "5g", "from 1m to 4g"),
    ("MCP_BRIDGE_SNAPSHOT_MAX", "10k", "from 1m to 16g"),
]


def _bridge(helpers, env, cwd, *args: str, **extra: str):
    return subprocess.run([helpers.BRIDGE_BIN, *args], capture_output=True, text=True, env={**env, **extra},
                          cwd=cwd, timeout=120, stdin=subprocess.DEVNULL)


def _show(p) -> str:
    return f"rc={p.returncode}\nstdout={p.stdout[-3000:]!r}\nstderr={p.stderr[-3000:]}"


@pytest.mark.parametrize("name, value, allowed", ONCE_CLAMPED)
@pytest.mark.parametrize("command", [["exec", "print('ran')"], ["run"]])
def test_a_setting_out_of_range_stops_the_bridge_naming_it_and_its_range(helpers, cli_env, cli_cwd, command,
                                                                          name, value, allowed):
    p = _bridge(helpers, cli_env, cli_cwd, *command, **{name: value})
    assert p.returncode == USAGE and p.stdout == "", _show(p)
    assert name in p.stderr and f'"{value}"' in p.stderr and allowed in p.stderr, _show(p)


def test_doctor_lists_the_settings_given_with_their_defaults(helpers, cli_env, cli_cwd):
    # No engine: doctor stops after its engine line, and lists the settings all the same.
    p = _bridge(helpers, cli_env, cli_cwd, "doctor", MCP_BRIDGE_RUNTIME="docker", MCP_BRIDGE_TIMEOUT="60",
                MCP_BRIDGE_MAX_TIMEOUT="120", DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert p.returncode != 0, _show(p)
    lines = p.stdout.splitlines()
    assert lines[0].startswith("FAIL  engine"), _show(p)
    assert "PASS  setting              MCP_BRIDGE_RUNTIME=docker (default auto)" in lines, _show(p)
    assert "PASS  setting              MCP_BRIDGE_TIMEOUT=60 (default 30)" in lines, _show(p)
    assert not any("MCP_BRIDGE_MAX_TIMEOUT" in line for line in lines), "the default value is not listed"
