"""Signing in to OAuth-protected remote servers (GUIDE.md, "Remote servers that need sign-in"), end
to end against a real MCP server built with the official Python SDK's authorization-server routes
(oauth_server.py: discovery metadata, dynamic registration, an authorize endpoint that approves at
once, token, revocation) and a `$BROWSER` that follows redirects (oauth_browser.py).

`login` then calls, `servers` showing the state, a refresh after a short token lifetime, `logout`
revoking, a run in which one server needs sign-in and another works (AuthRequiredError naming
`login`), signing in inside a run (`exec` through `$BROWSER`; `run` through the client's URL-mode
question or a 2026-07-28 form's message, declined, never coming back, or with no client that can be
asked; under `serve --http`: test_oauth_serve.py), tokens absent from every output, the logs, the audit log and the sandbox; hostile
authorization servers (another issuer, a token answer missing fields, a huge one, a redirect to a
non-loopback callback), a forged callback state, and two logins racing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from bridge_driver import BRIDGE_BIN
from helpers_cli import cli_env_for

import servers as S

pytestmark = pytest.mark.host_only

HERE = Path(__file__).resolve().parent
SERVER = HERE / "oauth_server.py"
BROWSER = HERE / "oauth_browser.py"
# A PATH with the Python tools but no desktop opener (xdg-open) for `exec` to find.
NO_OPENER_PATH = os.pathsep.join(
    d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "xdg-open").exists())


class AuthServer:
    """oauth_server.py in a process of its own, on a free loopback port."""

    def __init__(self, tmp: Path, lifetime: int = 3600, mode: str = "normal", honour: int | None = None,
                 extra: tuple[str, ...] = ()):
        self.log = tmp / f"as-{mode}.log"
        port_file = tmp / f"port-{mode}-{lifetime}"
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(port_file), "--lifetime", str(lifetime), "--mode", mode,
             "--log", str(self.log), *(["--honour", str(honour)] if honour is not None else []), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert self.proc.poll() is None, f"oauth_server.py exited: {self.proc.stderr.read()}"
            assert time.monotonic() < deadline, "oauth_server.py did not start"
            time.sleep(0.05)
        time.sleep(0.3)  # uvicorn serves once its loop runs
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Home:
    """A config folder naming the remote server (and a stub), a state folder, an audit log."""

    def __init__(self, tmp: Path, url: str, **entry):
        self.dir = tmp
        (tmp / "mcps").mkdir(parents=True, exist_ok=True)
        (tmp / "state").mkdir(exist_ok=True)
        self.audit = tmp / "audit.log"
        remote = {"type": "http", "url": url, **entry}
        config = {"mcpServers": {"remote": remote, "stub": S.stub("stub")}}
        (tmp / "mcps" / "servers.json").write_text(json.dumps(config))
        self.browser_log = tmp / "browser.log"
        self.env = cli_env_for(
            tmp / "state", MCP_BRIDGE_CONFIG_DIR=str(tmp / "mcps"), MCP_BRIDGE_AUDIT_LOG=str(self.audit),
            MCP_BRIDGE_LOG_LEVEL="debug", BROWSER=str(BROWSER), OAUTH_BROWSER_LOG=str(self.browser_log),
            MCP_BRIDGE_LOGIN_TIMEOUT="20")
        self.outputs: list[str] = []

    @property
    def tokens_file(self) -> Path:
        return self.dir / "state" / "oauth" / "tokens.json"

    def run(self, *args: str, timeout: int = 120, **env: str) -> subprocess.CompletedProcess:
        p = subprocess.run([BRIDGE_BIN, *args], env={**self.env, **env}, cwd=str(self.dir),
                           capture_output=True, text=True, timeout=timeout)
        self.outputs += [p.stdout, p.stderr]
        return p

    def record(self) -> dict | None:
        if not self.tokens_file.exists():
            return None
        return json.loads(self.tokens_file.read_text()).get("servers", {}).get("remote")

    def secrets(self) -> list[str]:
        """Every token and code the sign-in produced (from the store and the browser's log)."""
        found = []
        rec = self.record()
        if rec and rec.get("credentials"):
            t = rec["credentials"]["token_response"]
            found += [t["access_token"], t.get("refresh_token")]
        if self.browser_log.exists():
            for line in self.browser_log.read_text().splitlines():
                if "code=" in line:
                    found.append(line.split("code=")[1].split("&")[0])
        return [s for s in found if s]

    def state_of(self, name: str) -> str:
        p = self.run("servers")
        for line in p.stdout.splitlines():
            cols = line.split("\t")
            if cols[0] == name:
                return cols[3]
        raise AssertionError(f"no row for {name}: {p.stdout}")


@pytest.fixture
def auth_server(tmp_path):
    servers = []

    def start(**kw) -> AuthServer:
        s = AuthServer(tmp_path, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def assert_nothing_stored(home: Home) -> None:
    rec = home.record()
    assert rec is None or not rec.get("credentials"), rec


def test_login_then_calls_with_the_tokens_kept_private_and_out_of_every_output(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    assert "signed in" not in home.state_of("remote")

    p = home.run("login", "remote")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("signed in to 'remote' until "), p.stdout
    # The link went to $BROWSER as its one argument, with PKCE S256 and the RFC 8707 resource.
    first = home.browser_log.read_text().splitlines()[0]
    assert first.startswith("1 http://127.0.0.1:"), first
    assert "code_challenge_method=S256" in first and "resource=http%3A%2F%2F127.0.0.1" in first, first
    assert any(line.startswith("token authorization_code resource=" + srv.url) for line in srv.lines()), srv.lines()
    assert (home.tokens_file.stat().st_mode & 0o777) == 0o600
    assert (home.tokens_file.parent.stat().st_mode & 0o077) == 0
    assert "signed in until" in home.state_of("remote")

    code = ("import os\nprint(await mcp_remote.echo(text='hello'))\nprint(await mcp_stub.echo(text='s'))\n"
            "print(sorted(os.environ.items()))\n"
            "for root, _, files in os.walk('/'):\n"
            "    if root.startswith(('/proc', '/sys', '/dev', '/usr', '/lib')): continue\n"
            "    for f in files:\n"
            "        try: print(root, f, open(os.path.join(root, f), errors='replace').read(4096))\n"
            "        except Exception: pass\n")
    p = home.run("exec", "--servers", "remote,stub", code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:2] == ["hello", '{"text": "s"}'] or p.stdout.splitlines()[0] == "hello", p.stdout

    secrets = home.secrets()
    assert len(secrets) >= 3, secrets  # access, refresh, the code
    seen = "\n".join(home.outputs) + home.audit.read_text()
    for s in secrets:
        assert s not in seen, "a token or code reached an output, a log or the audit log"


def test_a_short_lived_token_is_refreshed_without_the_user(tmp_path, auth_server, stub_ready):
    srv = auth_server(lifetime=31)  # inside rmcp's 30 s refresh margin after a second
    home = Home(tmp_path, srv.url)
    assert home.run("login", "remote").returncode == 0
    before = home.record()["credentials"]["token_response"]["access_token"]
    time.sleep(2)
    p = home.run("exec", "--servers", "remote", "print(await mcp_remote.echo(text='again'))")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "again"
    assert "token refresh_token" in srv.lines(), srv.lines()
    after = home.record()["credentials"]["token_response"]["access_token"]
    assert after != before, "the refreshed token was stored"
    for s in (before, after):
        assert s not in "\n".join(home.outputs)


def test_a_token_the_server_refuses_early_is_refreshed_on_its_401(tmp_path, auth_server, stub_ready):
    srv = auth_server(honour=1)  # announced for an hour, refused after a second
    home = Home(tmp_path, srv.url)
    assert home.run("login", "remote").returncode == 0
    time.sleep(2.5)
    p = home.run("exec", "--servers", "remote", "print(await mcp_remote.echo(text='after 401'))")
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == "after 401"
    assert "token refresh_token" in srv.lines(), srv.lines()


def test_logout_revokes_and_forgets_then_a_call_names_login(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    assert home.run("login", "remote").returncode == 0
    p = home.run("logout", "remote")
    assert p.returncode == 0, p.stderr
    assert "revoked at the server and forgotten" in p.stdout, p.stdout
    assert any(line.startswith("revoke") for line in srv.lines()), srv.lines()
    assert home.record() is None
    p = home.run("logout", "remote")
    assert p.returncode == 0 and "not signed in" in p.stdout, p.stdout
    # A server taken out of the config is still signed out of, by its stored URL.
    assert home.run("login", "remote").returncode == 0
    (home.dir / "mcps" / "servers.json").write_text(json.dumps({"mcpServers": {}}))
    p = home.run("logout", "remote")
    assert p.returncode == 0 and "revoked at the server and forgotten" in p.stdout, p.stderr[-2000:]
    assert home.record() is None
    assert home.run("logout", "remote").returncode == 2


def test_a_run_goes_on_when_one_server_needs_sign_in(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    code = ("from mcp import AuthRequiredError\n"
            "print(await mcp_stub.echo(text='works'))\n"
            "try:\n    await mcp_remote.echo(text='x')\n"
            "except AuthRequiredError as e:\n    print('auth', e.server, e)\n")
    # No way to open a link (no $BROWSER, no desktop opener on PATH): nobody can sign in.
    p = home.run("exec", "--servers", "remote,stub", code, BROWSER="", PATH=NO_OPENER_PATH)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "works" in lines[0], p.stdout
    assert lines[1].startswith("auth remote MCP server 'remote' needs sign-in: run `mcp-code-bridge login remote`"), p.stdout
    # `servers` now says what to run; once signed in, the same run works.
    assert "needs sign-in: run `mcp-code-bridge login remote`" in home.state_of("remote")
    assert home.run("login", "remote").returncode == 0
    p = home.run("exec", "--servers", "remote,stub", "print(await mcp_remote.echo(text='now'))")
    assert p.returncode == 0 and p.stdout.strip() == "now", p.stderr


@pytest.mark.parametrize(("mode", "words"), [
    ("other-issuer", "issuer"),
    ("http-endpoint", "neither https nor loopback http"),
    ("missing-fields", "token exchange failed"),
    ("huge-token", "token exchange failed"),
    ("far-callback", "no sign-in callback within 3 s"),
])
def test_a_hostile_authorization_server_is_a_clear_error_with_nothing_stored(tmp_path, auth_server, mode, words):
    srv = auth_server(mode=mode)
    home = Home(tmp_path, srv.url)
    started = time.monotonic()
    p = home.run("login", "remote", MCP_BRIDGE_LOGIN_TIMEOUT="3")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert time.monotonic() - started < 30
    err = p.stderr.strip().splitlines()[-1]
    assert err.startswith("mcp-code-bridge: signing in to 'remote' failed: "), p.stderr
    assert words.lower() in err.lower(), err
    assert len(err) < 1000, err
    assert_nothing_stored(home)


def test_a_forged_callback_state_is_refused_with_nothing_stored(tmp_path, auth_server):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    p = home.run("login", "remote", OAUTH_BROWSER_FORGE="1")
    assert p.returncode == 1, p.stdout
    assert "state does not match this sign-in" in p.stderr, p.stderr
    assert not any(line.startswith("token ") for line in srv.lines()), "no code was exchanged"
    assert_nothing_stored(home)


def test_two_logins_racing_leave_one_good_record(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    results = []
    threads = [threading.Thread(target=lambda: results.append(home.run("login", "remote"))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    rec = home.record()
    assert rec and rec["credentials"]["token_response"]["access_token"], rec
    p = home.run("exec", "--servers", "remote", "print(await mcp_remote.echo(text='one'))")
    assert p.returncode == 0 and p.stdout.strip() == "one", p.stderr
    assert not [f for f in os.listdir(home.tokens_file.parent) if "tmp" in f]


def test_a_callback_port_makes_the_redirect_uri_exactly_claude_codes(tmp_path, auth_server):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    srv = auth_server()
    home = Home(tmp_path, srv.url, oauth={"callbackPort": port})
    p = home.run("login", "remote")
    assert p.returncode == 0, p.stderr
    first = home.browser_log.read_text().splitlines()[0]
    assert f"redirect_uri=http%3A%2F%2Flocalhost%3A{port}%2Fcallback&" in first, first


def test_cursors_static_oauth_client_is_the_one_signed_in_with(tmp_path, auth_server):
    """Cursor's `"auth": {"CLIENT_ID", "CLIENT_SECRET", "scopes": [...]}` means a pre-registered
    client, as Claude Code's `"oauth"` does: the sign-in link names that client and those scopes
    (this test server knows no such client, so the sign-in then runs out of time, storing nothing)."""
    srv = auth_server()
    home = Home(tmp_path, srv.url, auth={"CLIENT_ID": "cursor-app-id", "CLIENT_SECRET": "cursor-secret",
                                         "scopes": ["read", "write"]})
    p = home.run("login", "remote", MCP_BRIDGE_LOGIN_TIMEOUT="5")
    assert p.returncode != 0, p.stdout
    first = home.browser_log.read_text().splitlines()[0]
    assert "client_id=cursor-app-id&" in first, first
    assert "scope=read+write" in first or "scope=read%20write" in first, first
    assert "cursor-secret" not in p.stdout + p.stderr
    assert_nothing_stored(home)


def test_the_entrys_authorization_server_metadata_url_is_used_and_checked(tmp_path, auth_server):
    srv = auth_server()
    base = srv.url.rsplit("/mcp", 1)[0]
    home = Home(tmp_path, srv.url, oauth={"authServerMetadataUrl": base + "/.well-known/oauth-authorization-server"})
    p = home.run("login", "remote")
    assert p.returncode == 0, p.stderr
    # Metadata whose issuer is not of the URL's origin (the port differs) is refused.
    other = base.rsplit(":", 1)[0] + ":9"
    bad = Home(tmp_path / "bad", srv.url, oauth={"authServerMetadataUrl": other + "/.well-known/x"})
    p = bad.run("login", "remote")
    assert p.returncode == 1 and "oauth.authServerMetadataUrl" in p.stderr, p.stderr
    assert_nothing_stored(bad)


def test_two_hundred_calls_through_a_signed_in_connection_go_through(tmp_path, auth_server, stub_ready):
    """200 calls through the sandbox to an OAuth server, and to the same server without auth, all
    answered. Their medians are printed (`-s`) for benches/RESULTS.md, not asserted: speed is the
    benchmarks' to judge on this shared machine (a kept-alive connection once stalled each call
    ~40 ms on delayed ACKs: 48 ms against 3)."""
    code = ("import time\nts = []\nfor i in range(200):\n    t = time.perf_counter()\n"
            "    r = await mcp_remote.echo(text='x')\n    assert 'x' in str(r), r\n"
            "    ts.append(time.perf_counter() - t)\n"
            "ts.sort(); print(len(ts), round(ts[100] * 1000, 3))\n")
    medians = {}
    for mode in ("normal", "open"):
        srv = auth_server(mode=mode)
        home = Home(tmp_path / mode, srv.url)
        if mode == "normal":
            assert home.run("login", "remote").returncode == 0
        p = home.run("exec", "--servers", "remote", code)
        assert p.returncode == 0, p.stderr
        count, median = p.stdout.split()
        assert count == "200", p.stdout
        medians[mode] = float(median)
    print(f"median proxied call: oauth {medians['normal']} ms, no auth {medians['open']} ms")


def test_exec_signs_in_through_the_browser_and_the_call_goes_on(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    code = "print(await mcp_remote.echo(text='signed'))\nprint(await mcp_stub.echo(text='s'))\n"
    p = home.run("exec", "--servers", "remote,stub", code)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[0] == "signed", p.stdout
    assert "Opened the sign-in page for 'remote'" in p.stderr, p.stderr[-3000:]
    first = home.browser_log.read_text().splitlines()[0]
    assert first.startswith("1 http://127.0.0.1:") and "code_challenge_method=S256" in first, first
    rec = home.record()
    assert rec and rec["credentials"]["token_response"]["access_token"], rec
    # Signed in once: the next run needs nobody.
    p = home.run("exec", "--servers", "remote", "print(await mcp_remote.echo(text='again'))", BROWSER="")
    assert p.returncode == 0 and p.stdout.strip() == "again", p.stderr[-3000:]
    seen = "\n".join(home.outputs) + home.audit.read_text()
    for s in home.secrets():
        assert s not in seen, "a token or code reached an output, a log or the audit log"


def test_listing_a_servers_tools_signs_in_as_a_call_would(tmp_path, auth_server, stub_ready):
    """Discovery first, as models (and the conformance suite's client) do: `runtime.list_tools` and
    `query_tool_docs` of a server that needs sign-in sign in inside the run, then answer."""
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    code = ("from mcp import runtime\n"
            "print([t['name'] for t in runtime.list_tools('remote')])\n"
            "print(len(runtime.query_tool_docs('remote')) > 0)\n")
    p = home.run("exec", "--servers", "remote", code)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "echo" in p.stdout.splitlines()[0], p.stdout
    assert "Opened the sign-in page for 'remote'" in p.stderr, p.stderr[-3000:]
    assert home.record(), "signed in"


class LinkFollower:
    """An elicitation callback that opens a sign-in link with the test browser (or answers
    `action`), recording each question."""

    def __init__(self, home: Home, action: str = "accept", delay: float = 0.0, follow: bool = True):
        self.home, self.action, self.delay, self.follow = home, action, delay, follow
        self.questions: list = []

    async def __call__(self, context, params):
        import asyncio
        import re

        from mcp import types

        self.questions.append(params)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)
        # URL mode, or a form whose message carries the link (a 2026-07-28 client).
        url = getattr(params, "url", None)
        if not url:
            found = re.search(r"Open this link: (\S+)", params.message)
            url = found.group(1) if found else None
        assert url, params
        await asyncio.sleep(self.delay)
        if self.follow:
            await asyncio.to_thread(subprocess.run, [sys.executable, str(BROWSER), url], env=self.home.env, timeout=60)
        return types.ElicitResult(action="accept", content=None if getattr(params, "url", None) else {})


def run_in_client(home: Home, code: str, follower: LinkFollower | None, mode: str = "legacy",
                  timeout: int | None = None, done: list | None = None, **env: str) -> tuple[str, bool]:
    """run_python(code) through `mcp-code-bridge run` behind the official Python client (protocol
    `mode`), whose elicitation callback is `follower` (none: a client without elicitation); the
    ids of the link questions the bridge says are done go to `done`."""
    import asyncio

    from helpers_policy import text_of
    from mcp import StdioServerParameters
    from mcp.client.client import Client

    full = {**home.env, "BROWSER": "", **env}
    params = StdioServerParameters(command=BRIDGE_BIN, args=["run"], env=full, cwd=str(home.dir))

    async def go() -> tuple[str, bool]:
        args = {"code": code, "servers": ["remote", "stub"], **({"timeout": timeout} if timeout else {})}
        async def notes(message) -> None:
            from mcp import types

            if done is not None and isinstance(message, types.ElicitCompleteNotification):
                done.append(message.params.elicitation_id)

        async with Client(params, mode=mode, elicitation_callback=follower, read_timeout_seconds=120,
                          message_handler=notes) as c:
            r = await c.call_tool("run_python", args)
            return text_of(r)

    return asyncio.run(go())


CALL_REMOTE = ("from mcp import AuthRequiredError\n"
               "print(await mcp_stub.echo(text='works'))\n"
               "try:\n    print(await mcp_remote.echo(text='in run'))\n"
               "except AuthRequiredError as e:\n    print('auth', e.server, e)\n")


def test_a_run_asks_its_client_to_sign_in_and_the_call_goes_on(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    follower = LinkFollower(home)
    # Two calls racing to sign in share one sign-in; the run's timeout does not count the wait.
    code = ("import asyncio\n"
            "print(await asyncio.gather(mcp_remote.echo(text='a'), mcp_remote.echo(text='b')))\n"
            + CALL_REMOTE)
    done: list = []
    text, is_error = run_in_client(home, code, follower, MCP_BRIDGE_TIMEOUT="60", done=done)
    assert not is_error and "in run" in text and "'a'" in text and "'b'" in text, text
    assert len(follower.questions) == 1, follower.questions
    q = follower.questions[0]
    assert q.mode == "url" and "'remote'" in q.message and "sign in" in q.message, q
    # The client is told the link question is done once the sign-in landed.
    assert done == [q.elicitation_id], done
    assert "code_challenge_method=S256" in q.url, q.url
    rec = home.record()
    assert rec and rec["credentials"]["token_response"]["access_token"], rec
    for s in home.secrets():
        assert s not in text and s not in home.audit.read_text()


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_sign_in_question_raises_auth_required(tmp_path, auth_server, stub_ready, action):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    follower = LinkFollower(home, action=action)
    text, _ = run_in_client(home, CALL_REMOTE, follower)
    assert "works" in text, text
    assert "auth remote MCP server 'remote' needs sign-in: run `mcp-code-bridge login remote`" in text, text
    assert len(follower.questions) == 1
    assert_nothing_stored(home)


def test_a_client_without_elicitation_gets_auth_required_at_once(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    started = time.monotonic()
    # Under `run` the bridge may not be on the person's machine: it never opens a link itself,
    # even with $BROWSER set.
    text, _ = run_in_client(home, CALL_REMOTE, None, BROWSER=str(BROWSER))
    assert "works" in text, text
    assert "auth remote MCP server 'remote' needs sign-in: run `mcp-code-bridge login remote`" in text, text
    assert time.monotonic() - started < 60
    assert not home.browser_log.exists(), "nothing opened a link"
    assert_nothing_stored(home)


def test_a_2026_07_28_client_gets_the_link_in_url_mode_in_its_input_request(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    follower = LinkFollower(home)
    text, is_error = run_in_client(home, CALL_REMOTE, follower, mode="2026-07-28")
    assert not is_error and "in run" in text, text
    q = follower.questions[0]
    assert q.mode == "url" and q.url.startswith("http://127.0.0.1:") and "'remote'" in q.message, q


def test_the_wait_for_the_sign_in_does_not_count_against_the_runs_timeout(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    follower = LinkFollower(home, delay=6)  # a person taking longer than the whole run may
    text, is_error = run_in_client(home, CALL_REMOTE, follower, timeout=4)
    assert not is_error and "in run" in text, text


def test_a_sign_in_that_never_comes_back_raises_auth_required_by_its_bound(tmp_path, auth_server, stub_ready):
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    follower = LinkFollower(home, follow=False)  # accepted, the link never opened
    started = time.monotonic()
    text, _ = run_in_client(home, CALL_REMOTE, follower, MCP_BRIDGE_LOGIN_TIMEOUT="3")
    assert len(follower.questions) == 1, "the client was asked"
    assert "auth remote MCP server 'remote' needs sign-in: run `mcp-code-bridge login remote`" in text, text
    assert time.monotonic() - started < 60
    assert_nothing_stored(home)


def revoke_all(srv: AuthServer) -> None:
    """Revokes every access and refresh token at the server (its administrator's doing)."""
    import urllib.request

    base = srv.url.rsplit("/mcp", 1)[0]
    with urllib.request.urlopen(urllib.request.Request(base + "/test/revoke-all", method="POST"), timeout=10) as r:
        assert r.status == 200


def runs_in_one_client(home: Home, steps: list, follower: LinkFollower | None) -> list[str]:
    """run_python through one `mcp-code-bridge run` session (the connection to the remote server
    stays live between the runs): each step a code to run, or a callable run between two runs."""
    import asyncio

    from helpers_policy import text_of
    from mcp import StdioServerParameters
    from mcp.client.client import Client

    params = StdioServerParameters(command=BRIDGE_BIN, args=["run"], env={**home.env, "BROWSER": ""},
                                   cwd=str(home.dir))

    async def go() -> list[str]:
        texts = []
        async with Client(params, mode="legacy", elicitation_callback=follower, read_timeout_seconds=120) as c:
            for step in steps:
                if callable(step):
                    await asyncio.to_thread(step)
                    continue
                r = await c.call_tool("run_python", {"code": step, "servers": ["remote", "stub"]})
                texts.append(text_of(r)[0])
        return texts

    return asyncio.run(go())


def call_remote(tool: str, text: str = "x") -> str:
    return ("from mcp import AuthRequiredError\n"
            "print(await mcp_stub.echo(text='works'))\n"
            f"try:\n    print(await mcp_remote.{tool}(text={text!r}))\n"
            "except AuthRequiredError as e:\n    print('auth', e.server, e)\n")


def test_tokens_revoked_mid_session_sign_in_again_inside_the_run(tmp_path, auth_server, stub_ready):
    """The bridge holds a live, signed-in connection; the server's administrator revokes every
    token (the refresh too). The next call's 401 cannot be refreshed: the run's client is asked to
    sign in (URL mode, followed by the test browser) and the call goes through once signed in."""
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    assert home.run("login", "remote").returncode == 0
    before = home.record()["credentials"]["token_response"]["access_token"]
    follower = LinkFollower(home)
    texts = runs_in_one_client(home, [call_remote("echo", "first"), lambda: revoke_all(srv),
                                      call_remote("echo", "after revoke")], follower)
    assert "first" in texts[0], texts[0]
    assert "works" in texts[1] and "after revoke" in texts[1], texts[1]
    assert "auth remote" not in texts[1], texts[1]
    assert len(follower.questions) == 1, follower.questions
    q = follower.questions[0]
    assert q.mode == "url" and "'remote'" in q.message, q
    assert "revoke-all" in srv.lines(), srv.lines()
    after = home.record()["credentials"]["token_response"]["access_token"]
    assert after != before, "the new sign-in's token was stored"
    for s in [before, after, *home.secrets()]:
        assert s not in "\n".join(texts) and s not in home.audit.read_text()


def test_a_step_up_signs_in_for_the_larger_scope_and_the_call_goes_through_once(tmp_path, auth_server, stub_ready):
    """`publish` needs scope mcp:write, which the first sign-in did not ask for: the server's 403
    insufficient_scope (before the tool runs) makes the call sign in again asking for mcp:write,
    then the call is made again and the tool runs once."""
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    assert home.run("login", "remote").returncode == 0
    follower = LinkFollower(home)
    texts = runs_in_one_client(home, [call_remote("echo", "first"), call_remote("publish", "news")], follower)
    assert "first" in texts[0], texts[0]
    assert "published news" in texts[1] and "auth remote" not in texts[1], texts[1]
    assert len(follower.questions) == 1, follower.questions
    assert "scope=mcp%3Awrite" in follower.questions[0].url, follower.questions[0].url
    lines = srv.lines()
    assert lines.count("step-up 403 publish") == 1 and lines.count("tool publish") == 1, lines
    assert "mcp:write" in home.record()["credentials"]["granted_scopes"], home.record()


def test_a_step_up_refused_again_raises_auth_required_and_does_not_loop(tmp_path, auth_server, stub_ready):
    """`admin` needs a scope the authorization server never grants: each call signs in once and
    is refused again (AuthRequiredError, no loop); after three such sign-ins in a row (rmcp's bound
    on step-ups) a refusal is not signed in again. The tool never runs."""
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    assert home.run("login", "remote").returncode == 0
    follower = LinkFollower(home)
    texts = runs_in_one_client(home, [call_remote("admin")] * 4, follower)
    for t in texts:
        assert "works" in t, t
        assert "auth remote MCP server 'remote' needs sign-in: run `mcp-code-bridge login remote`" in t, t
    assert len(follower.questions) == 3, follower.questions
    lines = srv.lines()
    assert lines.count("step-up 403 admin") == 7, lines  # per call: refused, signed in, refused again; then once
    assert "tool admin" not in lines, lines


def test_a_refused_token_with_nobody_to_ask_raises_auth_required_and_other_servers_work(tmp_path, auth_server, stub_ready):
    """No client that can be asked (no elicitation): a step-up and then the revoked token's refusal
    are AuthRequiredError naming `login` at once, the run's other server answers, and `servers`
    says what to run. A step-up keeps the tokens: the tools that need no more scope still work."""
    srv = auth_server()
    home = Home(tmp_path, srv.url)
    assert home.run("login", "remote").returncode == 0
    started = time.monotonic()
    texts = runs_in_one_client(home, [call_remote("echo", "first"), call_remote("publish"),
                                      call_remote("echo", "still signed in"), lambda: revoke_all(srv),
                                      call_remote("echo")], None)
    assert "first" in texts[0], texts[0]
    assert "still signed in" in texts[2] and "auth remote" not in texts[2], texts[2]
    for t in (texts[1], texts[3]):
        assert "works" in t, t
        assert "auth remote MCP server 'remote' needs sign-in: run `mcp-code-bridge login remote`" in t, t
    assert time.monotonic() - started < 60
    assert "needs sign-in: run `mcp-code-bridge login remote`" in home.state_of("remote")
    assert "tool publish" not in srv.lines(), srv.lines()
