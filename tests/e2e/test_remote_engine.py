"""A remote engine (GUIDE.md, "Remote engines"): `DOCKER_HOST=tcp://...` with
`DOCKER_TLS_VERIFY=1` and `DOCKER_CERT_PATH`, as docker's CLI reads them. The engine is a private
dockerd of this test reachable only over TCP+TLS (helpers_tls_engine.py); `exec` and a real
`run_python` run through it, and the sandbox is shown to live on that engine and nowhere else.
`CONTAINER_HOST` names the engine when `DOCKER_HOST` is unset. Certificates from another CA, and
plain HTTP to the TLS port, are refused; plain TCP to another machine is warned about.

Needs dockerd, docker and openssl (.ci/setup-docker.sh installs them): under CI=true a missing
one FAILS.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from helpers_cli import cli_env_for
from helpers_tls_engine import IMAGE, TlsEngine, client_dir, make_ca, missing_tools

pytestmark = [pytest.mark.timeout(300), pytest.mark.own_engine]


@pytest.fixture(scope="module")
def tls_engine():
    gone = missing_tools()
    if gone:
        msg = f"the TLS engine test needs {', '.join(gone)} (bash .ci/setup-docker.sh installs them)"
        if (os.environ.get("CI") or "").strip().lower() in {"1", "true", "yes", "on"}:
            pytest.fail(f"{msg} (CI is set, so this is a failure, not a skip)", pytrace=False)
        pytest.skip(msg)
    engine = TlsEngine()
    try:
        yield engine.start()
    finally:
        engine.stop()


def remote_env(engine: TlsEngine, certs: Path | None = None, tls: bool = True) -> dict[str, str]:
    """The bridge's environment: the TLS engine alone (no other engine variable leaks in)."""
    env = {
        "DOCKER_HOST": engine.address,
        "MCP_BRIDGE_IMAGE": IMAGE,
        "MCP_BRIDGE_IMAGE_BUILD": "off",
        "MCP_BRIDGE_RUNTIME": "docker",
    }
    if tls:
        env.update(DOCKER_TLS_VERIFY="1", DOCKER_CERT_PATH=str(certs or engine.certs))
    return env


def clean(env: dict[str, str]) -> dict[str, str]:
    for k in ("DOCKER_HOST", "CONTAINER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_TLS"):
        env.pop(k, None)
    return env


def exec_on(engine_env: dict[str, str], tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    from bridge_driver import BRIDGE_BIN

    env = clean(cli_env_for(tmp_path / "state"))
    env.update(engine_env)
    return subprocess.run([BRIDGE_BIN, "exec", code], env=env, cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=180)


def test_exec_runs_in_a_sandbox_on_the_tls_engine(tls_engine, tmp_path):
    since = str(int(time.time()) - 1)
    p = exec_on(remote_env(tls_engine), tmp_path, "import os, socket; print(socket.gethostname(), os.getuid())")
    assert p.returncode == 0, f"exec failed ({p.returncode}):\n{p.stdout}\n{p.stderr}\n{tls_engine.log_tail()}"
    hostname, uid = p.stdout.split()
    assert uid == "65534", p.stdout
    # docker names a container's host after its id: the engine's events show it was made there
    # (exec removed it since).
    created = tls_engine.docker(
        "events", "--since", since, "--until", str(int(time.time()) + 1),
        "--filter", "event=create", "--filter", "label=mcp-code-bridge", "--format", "{{.ID}}",
    ).stdout.split()
    assert any(c.startswith(hostname) for c in created), (hostname, created)
    assert not tls_engine.containers("mcp-code-bridge"), "exec left its sandbox behind"


def test_run_python_keeps_its_sandbox_on_the_tls_engine_and_removes_it_at_exit(
    tls_engine, bridge_factory, helpers
):
    b = bridge_factory(env=remote_env(tls_engine), name="tls-engine")
    try:
        r = b.run("import socket; print(socket.gethostname())")
        assert r.status == "ok", f"{r}\n{b.stderr_tail()}\n{tls_engine.log_tail()}"
        hostname = r.structured["stdout"].strip()
        mine = tls_engine.containers(f"mcp-code-bridge.pid={b.pid}")
        assert len(mine) == 1 and mine[0].startswith(hostname), (mine, hostname)
        # The sandbox lives on the TLS engine only, not on the engine the rest of the suite uses.
        assert helpers.bridge_containers(b.pid) == []
        r = b.run("x = 41\nx + 1")
        assert r.structured["stdout"].strip() == "42", r
    finally:
        b.close()
    assert tls_engine.containers(f"mcp-code-bridge.pid={b.pid}") == [], "the sandbox outlived its bridge"


def test_a_server_certificate_from_another_ca_is_refused(tls_engine, tmp_path):
    other = tmp_path / "other-ca"
    other.mkdir()
    make_ca(other, "another CA")
    certs = client_dir(other, tmp_path / "other-client")
    p = exec_on(remote_env(tls_engine, certs=certs), tmp_path, "print(1)")
    assert p.returncode != 0 and p.stdout == "", p
    assert "unreachable" in p.stderr and tls_engine.address in p.stderr, p.stderr
    assert tls_engine.containers("mcp-code-bridge") == []


def test_plain_http_to_the_tls_port_is_refused(tls_engine, tmp_path):
    p = exec_on(remote_env(tls_engine, tls=False), tmp_path, "print(1)")
    assert p.returncode != 0 and p.stdout == "", p
    assert "unreachable" in p.stderr and tls_engine.address in p.stderr, p.stderr
    # Loopback plain TCP is not warned about (the warning is for other machines: unit-tested).
    assert "plain TCP" not in p.stderr, p.stderr


def test_container_host_names_the_engine_when_docker_host_is_unset(tls_engine, tmp_path):
    env = remote_env(tls_engine)
    env["CONTAINER_HOST"] = env.pop("DOCKER_HOST")
    p = exec_on(env, tmp_path, "print(6 * 7)")
    assert p.returncode == 0 and p.stdout == "42\n", f"{p.stdout}\n{p.stderr}"


def test_plain_tcp_to_another_machine_is_warned_about(tmp_path):
    # 192.0.2.1 (TEST-NET-1, RFC 5737) is routed nowhere: the connection fails at once, after
    # the warning.
    addr = "tcp://192.0.2.1:2375"
    p = exec_on({"DOCKER_HOST": addr, "MCP_BRIDGE_IMAGE_BUILD": "off"}, tmp_path, "print(1)")
    assert p.returncode != 0 and p.stdout == "", p
    warning = [line for line in p.stderr.splitlines() if "WARN" in line and "plain TCP" in line]
    assert len(warning) == 1 and addr in warning[0] and "DOCKER_TLS_VERIFY" in warning[0], p.stderr


def test_the_egress_allow_list_is_refused_on_a_remote_engine_naming_the_setting(tls_engine, tmp_path):
    # the sandbox's way out is a socket the engine must mount from this machine: a remote one cannot
    env = remote_env(tls_engine)
    env["MCP_BRIDGE_NETWORK_ALLOW"] = "pypi.org"
    p = exec_on(env, tmp_path, "print('ran')")
    assert p.returncode != 0 and "ran" not in p.stdout, f"{p.stdout}\n{p.stderr}"
    assert "MCP_BRIDGE_NETWORK_ALLOW" in p.stderr and "remote engine" in p.stderr, p.stderr
    assert not tls_engine.containers("mcp-code-bridge"), "the refused start left a sandbox behind"
