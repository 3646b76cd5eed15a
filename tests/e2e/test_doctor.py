"""`mcp-code-bridge doctor` (GUIDE.md, "The sandbox"): every confinement check passes on the real
engine, and a missing engine fails clearly on the first line.
"""

from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.engine  # doctor's confinement checks read the engine's container


def _doctor(env, bin_path, cwd):
    return subprocess.run([bin_path, "doctor"], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_doctor_passes_every_check_on_the_real_engine(cli_env, helpers, cli_cwd):
    p = _doctor(cli_env, helpers.BRIDGE_BIN, cli_cwd)
    assert p.returncode == 0, f"stdout={p.stdout}\nstderr={p.stderr[-2000:]}"
    names = [line[6:27].strip() for line in p.stdout.splitlines()]
    for name in ["engine", "image", "sandbox", "user", "capabilities", "no-new-privileges", "seccomp",
                 "read-only root", "noexec /tmp", "no network", "memory limit", "pids limit",
                 "network blocked", "/ not writable", "/usr not writable", "/tmp not executable"]:
        assert name in names, f"{name} missing:\n{p.stdout}"
    assert all(line.startswith("PASS") for line in p.stdout.splitlines()), p.stdout


def test_doctor_fails_clearly_without_the_engine(cli_env, helpers, cli_cwd):
    env = dict(cli_env, MCP_BRIDGE_RUNTIME="docker", DOCKER_HOST="unix:///nonexistent/docker.sock")
    p = _doctor(env, helpers.BRIDGE_BIN, cli_cwd)
    assert p.returncode != 0, p.stdout
    first = p.stdout.splitlines()[0]
    assert first.startswith("FAIL  engine"), p.stdout
