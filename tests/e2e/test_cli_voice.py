"""The commands that answer a person (`image status`, `doctor`, `servers`) print their answer,
not the bridge's log lines ("started a podman API service ..."): those need `-v` or
MCP_BRIDGE_LOG_LEVEL. `run` and `exec` keep logging at info."""
from __future__ import annotations

import re
import subprocess

import pytest
from helpers_cli import cli_env_for

pytestmark = pytest.mark.host_only  # what the commands print and log: host-side

INFO = re.compile(r"\bINFO\b")


def _run(helpers, env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helpers.BRIDGE_BIN, *args], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_image_status_prints_its_answer_and_logs_only_when_asked(helpers, tmp_path, runtime_ready):
    engine_name = runtime_ready
    env = cli_env_for(tmp_path / "state")
    quiet = _run(helpers, env, "image", "status")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "present:  yes" in quiet.stdout, quiet.stdout
    assert not INFO.search(quiet.stderr), quiet.stderr

    # What it did is there when asked: -v, or MCP_BRIDGE_LOG_LEVEL. On podman the bridge starts
    # its own API service and says so at info; a docker daemon is only connected to.
    for extra_args, extra_env in ((["-v"], {}), ([], {"MCP_BRIDGE_LOG_LEVEL": "debug"})):
        loud = _run(helpers, {**env, **extra_env}, *extra_args, "image", "status")
        assert loud.returncode == 0 and loud.stdout == quiet.stdout.replace(
            _socket(quiet.stdout), _socket(loud.stdout)), loud.stdout
        if engine_name == "podman":
            assert "started a podman API service" in loud.stderr, loud.stderr
        else:
            assert "DEBUG" in loud.stderr or extra_args, loud.stderr


def test_servers_prints_its_answer_without_log_lines(helpers, tmp_path):
    env = cli_env_for(tmp_path / "state", MCP_BRIDGE_CONFIG_DIR=str(tmp_path / "none"))
    p = _run(helpers, env, "servers")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no MCP servers configured" in p.stdout, p.stdout
    assert not INFO.search(p.stderr), p.stderr


def _socket(text: str) -> str:
    m = re.search(r"unix://\S+", text)
    return m.group(0) if m else ""
