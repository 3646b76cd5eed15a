"""`serve --http` end to end with the official client, both revisions: each client its own
sandbox (variables, files, processes), handles bound to the token that minted them, requests
without a good token refused (401 with the protected-resource metadata), tokens reloaded on
SIGHUP, and the tokenless loopback mode admitting only this user's processes (another user's
connection is closed unanswered)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from bridge_driver import BRIDGE_BIN, base_env
from helpers_host import poll
from helpers_http import MODES, STATELESS, Agent, ServeBridge, connect, go, last_line, new_token, run
from mcp.shared.exceptions import MCPError

ALICE, BOB = new_token(), new_token()


@pytest.fixture(scope="module")
def bridge(e2e_tmp: Path):
    b = ServeBridge(e2e_tmp, {"alice": ALICE, "bob": BOB}, name="http").start()
    yield b
    b.close()


# Engine markers per test (engine_markers.py): `engine` where the outcome depends on the container
# engine (why, beside it; the docker pass runs these too), `host_only` where the subject is on the host.
@pytest.mark.engine  # one container per client on the engine
@pytest.mark.parametrize("mode", MODES)
def test_two_clients_keep_their_own_variables_files_and_processes(bridge: ServeBridge, mode: str) -> None:
    async def body() -> None:
        async with connect(bridge.url, ALICE, mode) as a, connect(bridge.url, BOB, mode) as b:
            alice, bob = Agent(a), Agent(b)
            for agent, who in ((alice, "alice"), (bob, "bob")):
                r = await agent.run(
                    f"import os, socket\nsecret = '{who}'\n"
                    f"open('/workspace/out/{who}.txt', 'w').write('{who}')\n"
                    "print(socket.gethostname(), os.getpid())"
                )
                assert not r.is_error, r.text
            ra = await alice.run("print(secret, sorted(os.listdir('/workspace/out')), socket.gethostname())")
            rb = await bob.run("print(secret, sorted(os.listdir('/workspace/out')), socket.gethostname())")
            assert last_line(ra.text).startswith("alice ['alice.txt']"), ra.text
            assert last_line(rb.text).startswith("bob ['bob.txt']"), rb.text
            assert ra.text.split()[-1] != rb.text.split()[-1], "two clients, one container"
            if mode == STATELESS:
                assert alice.sandbox and bob.sandbox and alice.sandbox != bob.sandbox
            # Each client lists only its own files.
            la = [str(r.uri) for r in (await a.list_resources()).resources]
            lb = [str(r.uri) for r in (await b.list_resources()).resources]
            assert any(u.endswith("alice.txt") for u in la) and not any(u.endswith("bob.txt") for u in la), la
            assert any(u.endswith("bob.txt") for u in lb) and not any(u.endswith("alice.txt") for u in lb), lb
            mine = next(u for u in la if u.endswith("alice.txt"))
            with pytest.raises(MCPError):
                await b.read_resource(mine)

    go(body())


@pytest.mark.host_only
def test_a_handle_works_only_for_the_token_that_minted_it(bridge: ServeBridge) -> None:
    async def body() -> None:
        async with connect(bridge.url, ALICE, STATELESS) as a, connect(bridge.url, BOB, STATELESS) as b:
            first = await run(a, "kept = 41")
            handle = first.sandbox
            assert handle and handle.startswith("sbx_"), first
            assert handle in first.text, "the model is told its handle"
            again = await run(a, "print(kept + 1)", sandbox=handle)
            assert last_line(again.text) == "42" and again.sandbox is None, again.text
            forged = "sbx_" + "0" * 32
            for attempt in (handle, forged, "sbx_nothex", "x" * 40):
                with pytest.raises(MCPError) as refused:
                    await run(b, "print(kept)", sandbox=attempt)
                assert "unknown or expired sandbox handle" in str(refused.value), attempt
            # Still alice's, untouched by the attempts.
            assert last_line((await run(a, "print(kept)", sandbox=handle)).text) == "41"

    go(body())


@pytest.mark.host_only
def test_a_session_client_may_not_pass_a_handle(bridge: ServeBridge) -> None:
    async def body() -> None:
        async with connect(bridge.url, ALICE, STATELESS) as s:
            handle = (await run(s, "v = 1")).sandbox
        async with connect(bridge.url, ALICE, "legacy") as legacy:
            r = await run(legacy, "print(v)", sandbox=handle)
            assert r.is_error and "own sandbox" in r.text, r.text

    go(body())


def _post(url: str, headers: dict[str, str] | None = None, body: str = "{}") -> httpx2.Response:
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    return httpx2.post(url, headers=h, content=body, timeout=30)


@pytest.mark.host_only
def test_requests_without_a_good_token_are_refused_and_reloads_apply(e2e_tmp: Path) -> None:
    carol = new_token()
    b = ServeBridge(e2e_tmp, {"alice": ALICE, "carol": carol}, name="auth").start()
    try:
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        none = _post(b.url, body=init)
        assert none.status_code == 401, none.text
        challenge = none.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
        assert "invalid_token" not in challenge
        wrong = _post(b.url, {"Authorization": "Bearer " + new_token()}, init)
        assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
        basic = _post(b.url, {"Authorization": "Basic " + ALICE}, init)
        assert basic.status_code == 401
        meta_url = challenge.split('resource_metadata="')[1].split('"')[0]
        meta = httpx2.get(meta_url, timeout=30)
        assert meta.status_code == 200 and meta.json()["resource"] == b.url
        assert meta.json()["bearer_methods_supported"] == ["header"]
        other = httpx2.get(b.url.removesuffix("/mcp") + "/admin", timeout=30)
        assert other.status_code == 404

        async def works(token: str) -> bool:
            try:
                async with connect(b.url, token, STATELESS) as c:
                    return last_line((await run(c, "print(6 * 7)")).text) == "42"
            except Exception:  # noqa: BLE001 - any refusal counts as "does not work"
                return False

        assert go(works(carol))
        # Carol's token revoked, a new one for dave: the file is read again on SIGHUP.
        dave = new_token()
        b.set_tokens({"alice": ALICE, "dave": dave})
        assert poll(lambda: _post(b.url, {"Authorization": f"Bearer {carol}"}, init).status_code == 401, 30)
        assert go(works(dave))
        # A broken file keeps the tokens in force.
        b.tokens_path.write_text("short\n")
        b.reload()
        assert poll(lambda: "kept the old tokens" in b.stderr_path.read_text(), 30), b.stderr_tail()
        assert go(works(dave))
        # Every token and secret stays out of the log.
        log = b.stderr_path.read_text()
        assert all(t not in log for t in (ALICE, carol, dave)), "a token reached the log"
    finally:
        b.close()


def _serve(args: list[str], workdir: Path) -> subprocess.Popen[str]:
    env = base_env(workdir)
    return subprocess.Popen(
        [BRIDGE_BIN, "serve", *args], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )


@pytest.mark.host_only
def test_without_tokens_only_loopback_and_only_this_user(e2e_tmp: Path) -> None:
    work = e2e_tmp / "tokenless"
    work.mkdir()
    refused = _serve(["--http", "0.0.0.0:0"], work)
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 2 and "needs --token-file" in err, err
    world = work / "tokens"
    world.write_text(f"{ALICE} alice\n")
    world.chmod(0o644)
    exposed = _serve(["--http", "127.0.0.1:0", "--token-file", str(world)], work)
    _, err = exposed.communicate(timeout=60)
    assert exposed.returncode == 2 and "chmod 600" in err, err

    proc = _serve(["--http", "127.0.0.1:0"], work)
    try:
        url = None
        lines = []
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if "serving MCP on " in line:
                url = line.split("serving MCP on ")[1].split()[0]
                break
        assert url, "".join(lines)
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        mine = _post(url, body=ping)
        assert mine.status_code != 403, mine.text
        if os.geteuid() != 0:
            pytest.skip("acting as another local user needs root (CI runs as root)")
        setpriv = shutil.which("setpriv")
        assert setpriv, "util-linux setpriv is needed to act as another user"
        probe = (
            "import sys, urllib.request, urllib.error\n"
            "r = urllib.request.Request(sys.argv[1], data=b'{}', method='POST', headers={'Content-Type': "
            "'application/json', 'Accept': 'application/json, text/event-stream'})\n"
            "try:\n    print(urllib.request.urlopen(r, timeout=30).status)\n"
            "except urllib.error.HTTPError as e:\n    print(e.code)\n"
            "except (ConnectionError, urllib.error.URLError) as e:\n    print('closed', type(e).__name__)\n"
        )
        other = subprocess.run(
            [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", probe, url],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        # Another user's connection is closed at accept: no answer at all.
        assert other.stdout.startswith("closed"), (other.stdout, other.stderr)
    finally:
        proc.terminate()
        proc.wait(60)


@pytest.mark.host_only
def test_a_session_is_bound_to_the_token_that_opened_it(bridge: ServeBridge) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    opened = _post(bridge.url, {"Authorization": f"Bearer {ALICE}"}, json.dumps(init))
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    common = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    done = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert _post(bridge.url, {"Authorization": f"Bearer {ALICE}", **common}, done).status_code < 300
    theirs = _post(bridge.url, {"Authorization": f"Bearer {BOB}", **common}, listing)
    assert theirs.status_code == 404, theirs.text
    mine = _post(bridge.url, {"Authorization": f"Bearer {ALICE}", **common}, listing)
    assert mine.status_code == 200 and "run_python" in mine.text, mine.text
