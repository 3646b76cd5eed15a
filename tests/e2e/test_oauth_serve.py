"""Under `serve --http`, upstream identity belongs to the caller (GUIDE.md, "Remote servers that
need sign-in", under `serve`): two callers with separate upstream identities sign in each through
its own client (the official Python client's elicitation callback follows the link with the test
browser), the callback landing on the gateway's public URL (`MCP_BRIDGE_PUBLIC_URL`,
`/oauth/callback`); each call returns the caller's own identity; the second caller is asked before
it signs in, never given the first's; a forged callback state is a plain 400; a token removed and
SIGHUP forgets its records; the audit log names whose credentials each call used. A
`"sharedCredentials": true` entry uses the operator's `login` for every caller, and callers cannot
sign in to it. The remote server is oauth_server.py (the official SDK's authorization-server routes;
`whoami` answers the person each sign-in made).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import test_oauth
from bridge_driver import BRIDGE_BIN
from helpers_host import poll
from helpers_http import LEGACY, ServeBridge, connect, new_token, run
from test_oauth import BROWSER, Home, LinkFollower

import servers as S

auth_server = test_oauth.auth_server  # the same fixture: one OAuth server per test

pytestmark = pytest.mark.host_only

WHOAMI = "print(await mcp_remote.whoami())"
ASKED = "needs sign-in: run `mcp-code-bridge login remote`"


def free_port() -> int:
    """A loopback port free now (serve binds it next, so the public URL can name it first)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def gateway(e2e_tmp: Path, tokens: dict[str, str], url: str, **entry) -> tuple[ServeBridge, str]:
    """A serve bridge on a port named beforehand, its public URL that address; the remote entry
    at `url` with `entry`'s extra fields. Returns it (not started) and its public URL."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    b = ServeBridge(e2e_tmp, tokens, name="oauth-serve", addr=f"127.0.0.1:{port}",
                    servers={"remote": {"type": "http", "url": url, **entry}, "stub": S.stub("stub")},
                    env={"MCP_BRIDGE_WARM_POOL": "0", "BROWSER": "", "MCP_BRIDGE_PUBLIC_URL": public,
                         "MCP_BRIDGE_LOGIN_TIMEOUT": "30"})
    b.env["MCP_BRIDGE_AUDIT_LOG"] = str(b.dir / "audit.log")
    return b, public


def alice_gateway(tmp_path: Path, e2e_tmp: Path, auth_server, **entry) -> tuple[ServeBridge, Home, str]:
    """A started gateway with one caller, alice, to a fresh OAuth server (the remote entry with
    `entry`'s extra fields). Returns it, the test browser's home, and alice's token."""
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    alice = new_token()
    b, _ = gateway(e2e_tmp, {"alice": alice}, srv.url, **entry)
    b.start()
    return b, home, alice


def as_caller(b: ServeBridge, token: str, code: str, follower: LinkFollower | None):
    """One run_python of `code` by the caller holding `token` (a fresh session)."""

    async def body():
        async with connect(b.url, token, LEGACY, elicitation_callback=follower) as c:
            return await run(c, code, servers=["remote", "stub"])

    return asyncio.run(body())


def store(b: ServeBridge) -> dict:
    path = b.state_dir / "oauth" / "tokens.json"
    return json.loads(path.read_text()) if path.exists() else {}


def audit_creds(b: ServeBridge) -> list[tuple[str, str]]:
    """(token, creds) of every call line to the remote server."""
    path = b.dir / "audit.log"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [(r.get("token"), r.get("creds")) for r in lines if r.get("server") == "remote"]


def servers_line(b: ServeBridge, name: str) -> str:
    """`mcp-code-bridge servers`' line for server `name`, run as the operator of gateway `b`."""
    p = subprocess.run([BRIDGE_BIN, "servers"], env=b.env, cwd=b.cwd, capture_output=True, text=True,
                       timeout=60)
    lines = [x for x in p.stdout.splitlines() if x.startswith(name + "\t")]
    assert len(lines) == 1, p.stdout + p.stderr
    return lines[0]


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_two_serve_callers_sign_in_each_for_itself_and_a_departed_one_is_forgotten(
        tmp_path, e2e_tmp, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)  # the test browser's environment and log
    alice, bob = new_token(), new_token()
    b, public = gateway(e2e_tmp, {"alice": alice, "bob": bob}, srv.url)
    b.start()
    try:
        a_follower = LinkFollower(home)
        first = as_caller(b, alice, WHOAMI, a_follower)
        assert not first.is_error and "signed-in as person-" in first.text, first.text + b.stderr_tail()
        assert len(a_follower.questions) == 1, a_follower.questions
        q = a_follower.questions[0]
        assert q.mode == "url", q
        # The redirect URI is the gateway's public callback, registered (DCR) and sent as such.
        redirect = f"redirect_uri={urllib.parse.quote(public + '/oauth/callback', safe='')}"
        assert redirect in q.url, q.url
        alice_is = first.text.strip().splitlines()[-1]

        # A forged, unknown or replayed state: a plain 400, nothing else revealed.
        status, body = http_get(f"{public}/oauth/callback?code=stolen&state=forged")
        assert status == 400 and body.strip() == "No sign-in waits for this callback.", (status, body)
        state = urllib.parse.parse_qs(urllib.parse.urlsplit(q.url).query)["state"][0]
        status, body = http_get(f"{public}/oauth/callback?code=replayed&state={urllib.parse.quote(state)}")
        assert status == 400 and body.strip() == "No sign-in waits for this callback.", (status, body)

        # Bob is asked before he has an identity upstream: never handed Alice's.
        b_follower = LinkFollower(home)
        second = as_caller(b, bob, WHOAMI, b_follower)
        assert len(b_follower.questions) == 1, "bob is asked"
        assert not second.is_error and "signed-in as person-" in second.text, second.text
        bob_is = second.text.strip().splitlines()[-1]
        assert bob_is != alice_is, (alice_is, bob_is)

        # Each keeps its own: no question the second time, the same person.
        again = LinkFollower(home)
        assert as_caller(b, alice, WHOAMI, again).text.strip().splitlines()[-1] == alice_is
        assert again.questions == []

        kept = store(b)
        # The operator's records hold no credentials (the indexer's 401 only noted sign-in).
        assert not any(r.get("credentials") for r in kept.get("servers", {}).values()), kept
        names = sorted(c["name"] for c in kept["callers"].values())
        assert names == ["alice", "bob"], kept
        for key in kept["callers"]:
            assert alice not in key and bob not in key and len(key) == 64
        text = json.dumps(kept)
        assert alice not in text and bob not in text, "no serve token in the store"
        # `servers` names the callers signed in for themselves (token names, never a secret).
        line = servers_line(b, "remote")
        assert "signed in for serve callers: alice, bob" in line, line
        assert alice not in line and bob not in line, line

        # The audit log says whose credentials each call used (never a secret).
        creds = audit_creds(b)
        assert ("alice", "alice") in creds and ("bob", "bob") in creds, creds
        log = (b.dir / "audit.log").read_text()
        for rec in kept["callers"].values():
            t = rec["servers"]["remote"]["credentials"]["token_response"]
            assert t["access_token"] not in log and t["access_token"] not in b.stderr_path.read_text()

        # Bob's token leaves the tokens file: his upstream records go on the reload.
        b.set_tokens({"alice": alice})
        gone = poll(lambda: sorted(c["name"] for c in store(b).get("callers", {}).values()) == ["alice"] or None,
                    timeout=30, interval=0.1)
        assert gone, store(b)
        assert "signed in for serve callers: alice" in servers_line(b, "remote")
        assert "bob" not in servers_line(b, "remote")
        # ... revoked at the server, which offers revocation (alice's are not).
        def revoked() -> list[str]:
            return [x for x in srv.lines() if x.startswith("revoke")]

        poll(lambda: len(revoked()) >= 2 or None, timeout=30, interval=0.1)
        time.sleep(0.5)  # nothing more comes
        assert len(revoked()) == 2, srv.lines()  # bob's refresh and access tokens, one by one
        assert as_caller(b, alice, WHOAMI, LinkFollower(home)).text.strip().splitlines()[-1] == alice_is

        # The operator signs a caller out by its token's name: revoked at the server, forgotten.
        def logout(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([BRIDGE_BIN, "logout", "remote", *args], env=b.env, cwd=b.cwd,
                                  capture_output=True, text=True, timeout=60)

        p = logout("--caller", "nobody")
        assert p.returncode == 0 and "no serve caller named 'nobody'" in p.stdout, p.stdout + p.stderr
        p = logout("--caller", "alice")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "signed out of 'remote' for serve caller 'alice': tokens revoked" in p.stdout, p.stdout
        assert not store(b).get("callers"), store(b)
        assert len(revoked()) == 4, srv.lines()  # alice's two tokens too
        assert "signed in for serve callers" not in servers_line(b, "remote")
    finally:
        b.close()


def test_a_shared_credentials_entry_uses_the_operators_login_for_every_caller(
        tmp_path, e2e_tmp, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    alice, bob = new_token(), new_token()
    b, _ = gateway(e2e_tmp, {"alice": alice, "bob": bob}, srv.url, sharedCredentials=True)
    # The operator signs in with `login`, as before any caller comes.
    p = subprocess.run([BRIDGE_BIN, "login", "remote"], env={**b.env, "BROWSER": str(BROWSER)},
                       capture_output=True, text=True, timeout=120, cwd=str(b.cwd))
    assert p.returncode == 0, p.stderr
    # A caller's records left from a token removed while the bridge was down go at start.
    kept = store(b)
    kept["callers"] = {"0" * 64: {"name": "departed", "servers": {}}}
    (b.state_dir / "oauth" / "tokens.json").write_text(json.dumps(kept))
    b.start()
    try:
        assert poll(lambda: "callers" not in store(b) or None, timeout=30, interval=0.1), store(b)
        seen = set()
        for token in (alice, bob):
            follower = LinkFollower(home)
            reply = as_caller(b, token, WHOAMI, follower)
            assert not reply.is_error and "signed-in as person-" in reply.text, reply.text
            assert follower.questions == [], "nobody is asked: the operator's sign-in is used"
            seen.add(reply.text.strip().splitlines()[-1])
        assert len(seen) == 1, seen
        assert sorted(audit_creds(b)) == [("alice", "operator"), ("bob", "operator")], audit_creds(b)
    finally:
        b.close()


def test_a_caller_cannot_sign_in_to_a_shared_credentials_server(tmp_path, e2e_tmp, auth_server, stub_ready):
    b, home, alice = alice_gateway(tmp_path, e2e_tmp, auth_server, sharedCredentials=True)
    try:
        follower = LinkFollower(home)
        code = ("from mcp import AuthRequiredError\ntry:\n    print(await mcp_remote.whoami())\n"
                "except AuthRequiredError as e:\n    print('auth', e)\n")
        reply = as_caller(b, alice, code, follower)
        assert "auth" in reply.text and ASKED in reply.text, reply.text
        assert follower.questions == [], "only the operator signs in to it"
        left = store(b)
        assert not any(r.get("credentials") for r in left.get("servers", {}).values()), left
        assert not left.get("callers"), left
    finally:
        b.close()


def test_a_fixed_callback_port_keeps_its_loopback_redirect_under_a_public_url(
        tmp_path, e2e_tmp, auth_server, stub_ready):
    """A client registered for `http://localhost:PORT/callback` (the entry's `callbackPort`) must
    come back there, public URL or not."""
    port = free_port()
    b, home, alice = alice_gateway(tmp_path, e2e_tmp, auth_server, oauth={"callbackPort": port})
    try:
        follower = LinkFollower(home)
        reply = as_caller(b, alice, WHOAMI, follower)
        assert not reply.is_error and "signed-in as person-" in reply.text, reply.text
        assert len(follower.questions) == 1
        assert f"redirect_uri=http%3A%2F%2Flocalhost%3A{port}%2Fcallback&" in follower.questions[0].url
        assert [c["name"] for c in store(b)["callers"].values()] == ["alice"], store(b)
    finally:
        b.close()


def test_a_caller_who_declines_is_told_to_sign_in_from_its_client_not_with_login(
        tmp_path, e2e_tmp, auth_server, stub_ready):
    """`login` signs the operator in, which a caller's own connection never uses: the error says so."""
    b, home, alice = alice_gateway(tmp_path, e2e_tmp, auth_server)
    try:
        follower = LinkFollower(home, action="decline")
        code = ("from mcp import AuthRequiredError\ntry:\n    print(await mcp_remote.whoami())\n"
                "except AuthRequiredError as e:\n    print('auth', e.server, e)\n")
        reply = as_caller(b, alice, code, follower)
        assert "auth remote MCP server 'remote' needs you to sign in: your client is asked" in reply.text, reply.text
        assert "mcp-code-bridge login" not in reply.text, reply.text
        assert len(follower.questions) == 1
        assert not any(r.get("credentials") for c in store(b).get("callers", {}).values()
                       for r in c["servers"].values()), store(b)
    finally:
        b.close()


def test_two_sessions_of_one_caller_signing_in_at_once_ask_it_once(tmp_path, e2e_tmp, auth_server, stub_ready):
    b, home, alice = alice_gateway(tmp_path, e2e_tmp, auth_server)
    try:
        # The link is followed 8 s after it is asked: the other session's first call comes meanwhile.
        follower = LinkFollower(home, delay=8)

        async def session():
            async with connect(b.url, alice, LEGACY, elicitation_callback=follower) as c:
                return await run(c, WHOAMI, servers=["remote", "stub"])

        async def both():
            return await asyncio.gather(session(), session())

        first, second = asyncio.run(both())
        assert not first.is_error and not second.is_error, (first.text, second.text, b.stderr_tail())
        # Each session has a handle of its own, but one sign-in and one identity upstream.
        assert len(follower.questions) == 1, follower.questions
        identities = {r.text.strip().splitlines()[-1] for r in (first, second)}
        assert len(identities) == 1 and "signed-in as person-" in identities.pop(), (first.text, second.text)
    finally:
        b.close()
