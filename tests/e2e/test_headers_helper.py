"""Remote entries of imported client configs, as each client means them (GUIDE.md, "Client
configs"): Claude Code's `headersHelper` supplying the bearer a remote server checks (only once the
entry is approved; its headers kept out of every output), and VS Code's `${input:ID}` refused with
the `${env:...}` text to write instead.

The remote server is oauth_server.py in `static-bearer` mode: the official Python SDK's MCP server
behind a check of one bearer token.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest
from bridge_driver import BRIDGE_BIN
from helpers_cli import cli_env_for, home_env
from test_oauth import BROWSER, AuthServer

pytestmark = pytest.mark.host_only  # config, consent and proxying: host-side


class BearerServer(AuthServer):
    """oauth_server.py --mode static-bearer on a free loopback port: every request needs
    `Authorization: Bearer <token>`."""

    def __init__(self, tmp: Path, token: str):
        super().__init__(tmp, mode="static-bearer", extra=("--token", token))

    def answers(self) -> list[str]:
        return self.lines()


@pytest.fixture
def bearer(tmp_path):
    token = "hh-" + secrets.token_hex(12)
    srv = BearerServer(tmp_path, token)
    yield srv, token
    srv.close()


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def _run(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BRIDGE_BIN, *args], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=180)


def test_a_headers_helper_supplies_the_bearer_once_its_project_entry_is_allowed(tmp_path, bearer):
    srv, token = bearer
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    secret_file, marker, seen = tmp_path / "token.txt", tmp_path / "HELPER-RAN", tmp_path / "seen.txt"
    secret_file.write_text(token)
    helper = (f"date >> {marker}; echo \"$CLAUDE_CODE_MCP_SERVER_NAME $CLAUDE_CODE_MCP_SERVER_URL\" > {seen}; "
              f"printf '{{\"Authorization\": \"Bearer %s\"}}' \"$(cat {secret_file})\"")
    _write(repo / ".mcp.json", {"mcpServers": {"docs": {
        "type": "http", "url": srv.url, "headers": {"Authorization": "Bearer wrong-static"},
        "headersHelper": helper}}})
    audit = tmp_path / "audit.log"
    env = cli_env_for(tmp_path / "state", MCP_BRIDGE_IMPORT_CLIENT_CONFIGS="1", MCP_BRIDGE_LOG_LEVEL="debug",
                      MCP_BRIDGE_AUDIT_LOG=str(audit), **home_env(home))
    code = "print(await mcp_docs.echo(text='through the helper'))"
    outputs: list[str] = []

    # Not approved: nothing runs, and the refusal says how to approve.
    p = _run(env, repo, "exec", "--servers", "docs", code)
    outputs += [p.stdout, p.stderr]
    assert p.returncode != 0 and "servers --allow docs" in p.stdout + p.stderr, p
    assert not marker.exists(), "the project's headersHelper ran without consent"
    assert srv.answers() == [], "the server was reached without consent"

    p = _run(env, repo, "servers", "--allow", "docs", "--yes")
    outputs += [p.stdout, p.stderr]
    assert p.returncode == 0, p.stderr
    assert f"headersHelper: \"date >> {marker}" in p.stdout, p.stdout

    # Approved: the helper's bearer replaces the static one and the server answers.
    p = _run(env, repo, "exec", "--servers", "docs", code)
    outputs += [p.stdout, p.stderr]
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "through the helper", p.stdout
    assert marker.exists()
    assert seen.read_text().split() == ["docs", srv.url]
    assert "ok" in srv.answers() and "refused" not in srv.answers(), srv.answers()
    assert token not in "\n".join(outputs) + (audit.read_text() if audit.exists() else ""), \
        "the helper's header reached an output or the audit log"

    # A helper's bearer the server refuses and echoes in its error body: kept out of the error.
    wrong = "wrong-" + secrets.token_hex(8)
    _write(repo / ".mcp.json", {"mcpServers": {"docs": {
        "type": "http", "url": srv.url, "headersHelper": f"echo '{{\"Authorization\": \"Bearer {wrong}\"}}'"}}})
    assert _run(env, repo, "servers", "--allow", "docs", "--yes").returncode == 0
    p = _run(env, repo, "exec", "--servers", "docs", code)
    said = p.stdout + p.stderr
    assert p.returncode != 0 and "'docs'" in said and "401" in said, said
    assert "unauthorized: [redacted]" in said, said
    assert wrong not in said, [line for line in said.splitlines() if wrong in line]

    # A failing helper: named with its exit code, its output not echoed.
    _write(repo / ".mcp.json", {"mcpServers": {"docs": {
        "type": "http", "url": srv.url, "headersHelper": f"echo 'leak-{token}'; exit 7"}}})
    assert _run(env, repo, "servers", "--allow", "docs", "--yes").returncode == 0
    p = _run(env, repo, "exec", "--servers", "docs", code)
    assert p.returncode != 0, p.stdout
    said = p.stdout + p.stderr
    assert "'docs'" in said and "its headersHelper exited with code 7" in said, said
    assert token not in said, said


def test_a_vs_code_input_in_a_remote_header_is_refused_with_the_env_text_to_write(tmp_path, bearer):
    srv, token = bearer
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _write(home / ".config" / "Code" / "User" / "mcp.json", {
        "inputs": [{"type": "promptString", "id": "docs-token", "description": "Docs token", "password": True}],
        "servers": {
            "docs": {"type": "http", "url": srv.url, "headers": {"Authorization": "Bearer ${input:docs-token}"}},
            "docs-env": {"type": "http", "url": srv.url, "headers": {"Authorization": "Bearer ${env:DOCS_TOKEN}"}},
        },
    })
    env = cli_env_for(tmp_path / "state", MCP_BRIDGE_IMPORT_CLIENT_CONFIGS="1", DOCS_TOKEN=token, **home_env(home))

    p = _run(env, work, "exec", "--servers", "docs", "print(1)")
    said = p.stdout + p.stderr
    assert p.returncode != 0, said
    for needle in ("${input:docs-token} is a password prompt", "\"${env:DOCS_TOKEN}\"",
                   "set DOCS_TOKEN in the environment"):
        assert needle in said, f"missing {needle!r} in {said}"
    assert srv.answers() == [], "a request went out with the prompt's text"

    # The replacement it names works, in the same file.
    p = _run(env, work, "exec", "--servers", "docs-env", "print(await mcp_docs_env.echo(text='via env'))")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "via env"
    assert token not in p.stdout + p.stderr


def test_login_runs_the_headers_helper_so_a_gated_server_names_its_sign_in(tmp_path):
    gate = "gate-" + secrets.token_hex(12)
    srv = AuthServer(tmp_path, mode="gated", extra=("--token", gate))
    try:
        home, repo = tmp_path / "home", tmp_path / "repo"
        home.mkdir()
        gate_file = tmp_path / "gate.txt"
        gate_file.write_text(gate)
        helper = f"printf '{{\"X-Gate\": \"%s\"}}' \"$(cat {gate_file})\""
        _write(repo / ".mcp.json", {"mcpServers": {"docs": {"type": "http", "url": srv.url, "headersHelper": helper}}})
        env = cli_env_for(tmp_path / "state", MCP_BRIDGE_IMPORT_CLIENT_CONFIGS="1", BROWSER=str(BROWSER),
                          OAUTH_BROWSER_LOG=str(tmp_path / "browser.log"), MCP_BRIDGE_LOGIN_TIMEOUT="20",
                          MCP_BRIDGE_LOG_LEVEL="debug", **home_env(home))
        assert _run(env, repo, "servers", "--allow", "docs", "--yes").returncode == 0
        outputs: list[str] = []

        # The sign-in is named only by the challenge behind the gateway: the probe carries the
        # helper's header, so login finds it.
        p = _run(env, repo, "login", "docs")
        outputs += [p.stdout, p.stderr]
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert "signed in to 'docs'" in p.stdout, p.stdout
        assert "gate ok" in srv.lines() and "gate refused" not in srv.lines(), srv.lines()
        assert "authorize scopes=mcp:gated" in srv.lines(), srv.lines()
        p = _run(env, repo, "exec", "--servers", "docs", "print(await mcp_docs.echo(text='behind the gate'))")
        outputs += [p.stdout, p.stderr]
        assert p.returncode == 0 and p.stdout.strip() == "behind the gate", (p.stdout, p.stderr)
        assert gate not in "\n".join(outputs), "the helper's header reached an output"

        # A failing helper stops login with its exit code named, its output not echoed.
        _write(repo / ".mcp.json", {"mcpServers": {"docs": {
            "type": "http", "url": srv.url, "headersHelper": f"echo 'leak-{gate}'; exit 5"}}})
        assert _run(env, repo, "servers", "--allow", "docs", "--yes").returncode == 0
        p = _run(env, repo, "login", "docs")
        said = p.stdout + p.stderr
        assert p.returncode == 1 and "its headersHelper exited with code 5" in said, said
        assert gate not in said, said
    finally:
        srv.close()
