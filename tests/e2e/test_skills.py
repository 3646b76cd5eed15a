"""Skills (issue 33, point 2) end to end with the real bridge: saved in one run, refused while
unapproved (naming `mcp-code-bridge skills --approve NAME`), approved with the CLI over the same
state folder, called as `skills.<name>(...)` by a NEW bridge process that loads the stub server
the skill uses, refused again once saved with other text, then removed."""
from __future__ import annotations

import hashlib
import json
import subprocess

import pytest
from bridge_driver import BRIDGE_BIN
from helpers_cli import cli_env_for
from helpers_http import MODES, Agent, ServeBridge, connect, go, last_line, new_token

import servers as S

pytestmark = [pytest.mark.timeout(600), pytest.mark.engine]

SAVE = """
import json
from mcp import runtime
async def shout(text):
    '''Echo text through the stub, in capitals.'''
    got = await mcp_stub.echo(text=text)
    return json.dumps(got["text"].upper())
print(runtime.save_skill(shout)["state"])
"""

CHANGED = """
import json
from mcp import runtime
async def shout(text):
    '''Echo text through the stub, in capitals, twice.'''
    got = await mcp_stub.echo(text=text)
    return json.dumps(got["text"].upper() * 2)
print(runtime.save_skill(shout)["state"])
"""

USE = "import skills\nprint(await skills.shout('hi'))\n"


def _skills_cli(state, *args):
    return subprocess.run([BRIDGE_BIN, "skills", *args], env=cli_env_for(state), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def _over_mcp(state, *requests):
    """Raw JSON-RPC to a fresh `mcp-code-bridge run` over `state` (the official Python client has no
    Skills extension yet): initialize, then each (method, params); the results, in order."""
    env = {**cli_env_for(state), "MCP_BRIDGE_PREWARM": "0"}
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "skills-test", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i + 1, "method": m, "params": p} for i, (m, p) in enumerate(requests)]
    p = subprocess.Popen([BRIDGE_BIN, "run"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        for line in lines:
            p.stdin.write(json.dumps(line) + "\n")
        p.stdin.flush()
        answers = {}
        while len(answers) < len(requests) + 1:
            msg = json.loads(p.stdout.readline())
            if "id" in msg:
                answers[msg["id"]] = msg
        init = answers[0]["result"]
        assert "io.modelcontextprotocol/skills" in (init["capabilities"].get("extensions") or {}), init
        return [answers[i + 1] for i in range(len(requests))]
    finally:
        p.kill()
        p.wait(timeout=10)


def _run(bridge, code, ok=True):
    r = bridge.run(code, servers=["stub"], timeout=60, wait=120)
    assert r.is_error != ok, f"{r}\n{bridge.stderr_tail()}"
    return r


def test_skills_saved_refused_approved_changed_refused_again_removed(bridge_factory, stub_ready, e2e_tmp):
    state = e2e_tmp / "skills-state"
    state.mkdir(mode=0o700, exist_ok=True)
    env = {"MCP_BRIDGE_STATE_DIR": str(state)}
    config = S.config({"stub": S.stub()})

    first = bridge_factory(name="skills-1", env=env, config=config)
    assert _run(first, SAVE).structured["stdout"].strip() == "pending"
    refused = _run(first, USE, ok=False)
    assert "NotApprovedError" in refused.text and "mcp-code-bridge skills --approve shout" in refused.text, refused
    first.close()

    listed = _skills_cli(state)
    assert listed.returncode == 0, listed
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("shout"))
    assert row[2] == "pending" and len(row[1]) == 12, listed.stdout
    # No terminal and no --yes: nothing approved.
    assert _skills_cli(state, "--approve", "shout").returncode == 1
    approved = _skills_cli(state, "--approve", "shout", "--yes")
    assert approved.returncode == 0, approved
    assert "async def shout(text):" in approved.stdout and row[1] in approved.stdout, approved.stdout
    exported = _skills_cli(state, "--export", str(e2e_tmp / "skills-export"))
    assert exported.returncode == 0, exported
    md = (e2e_tmp / "skills-export" / "shout" / "SKILL.md").read_text()
    assert md.startswith("---\nname: shout\ndescription: \"Echo text through the stub, in capitals.\"\n---"), md
    assert "async def shout(text):" in (e2e_tmp / "skills-export" / "shout" / "shout.py").read_text()

    # Served through MCP's Skills extension (SEP-2640): the manifest's digests are the files'.
    listed, got, module = _over_mcp(state, ("skills/list", {}),
                                    ("skills/get", {"uri": "skill://shout/SKILL.md"}),
                                    ("resources/read", {"uri": "skill://shout/shout.py"}))
    skills = listed["result"]["skills"]
    assert [k["frontmatter"]["name"] for k in skills] == ["shout"], listed
    assert got["result"]["skill"]["uri"] == "skill://shout/SKILL.md", got
    text = module["result"]["contents"][0]["text"]
    assert "async def shout(text):" in text, module
    entry = [f for f in skills[0]["resources"] if f["uri"] == "skill://shout/shout.py"][0]
    assert entry["digest"] == "sha256:" + hashlib.sha256(text.encode()).hexdigest(), (entry, text)

    second = bridge_factory(name="skills-2", env=env, config=config)
    assert _run(second, USE).structured["stdout"].strip() == '"HI"'
    # Found by search beside the tools, in the same shape.
    hits = _run(second, "from mcp import runtime\nprint([(h['server'], h['tool']) for h in "
                        "runtime.search_tool_docs('echo text in capitals', limit=3)])\n")
    assert "('skills', 'shout')" in hits.structured["stdout"], hits
    # A run that did not load the stub: the usual message saying how to load it.
    unloaded = second.run(USE, timeout=60, wait=120)
    assert unloaded.is_error and "servers=['stub']" in unloaded.text, unloaded
    # Saved again with other text: refused until approved again.
    assert _run(second, CHANGED).structured["stdout"].strip() == "changed"
    again = _run(second, USE, ok=False)
    assert "changed" in again.text and "skills --approve shout" in again.text, again
    assert "changed" in _skills_cli(state).stdout
    # A changed skill is not served either until approved again.
    listed, missing = _over_mcp(state, ("skills/list", {}), ("skills/get", {"uri": "skill://shout/SKILL.md"}))
    assert listed["result"]["skills"] == [] and missing["error"]["code"] == -32602, (listed, missing)

    removed = _skills_cli(state, "--remove", "shout")
    assert removed.returncode == 0, removed
    gone = _run(second, USE, ok=False)
    assert "no skill named 'shout'" in gone.text, gone
    assert "no skills are kept" in _skills_cli(state).stdout


SAVE_PLAIN = "from mcp import runtime\ndef mine():\n    return 'from alice'\nprint(runtime.save_skill(mine)['state'])\n"
USE_PLAIN = "import skills\nprint(skills.mine())\n"
LIST = "from mcp import runtime\nprint([s['name'] for s in runtime.list_skills()])\n"


def test_under_serve_a_skill_is_its_tokens_and_the_operator_approves_it(stub_ready, e2e_tmp):
    alice_token, bob_token = new_token(), new_token()
    b = ServeBridge(e2e_tmp, {"alice": alice_token, "bob": bob_token}, name="skills-serve").start()
    try:

        async def save() -> list[str]:
            async with connect(b.url, alice_token, MODES[0]) as a, connect(b.url, bob_token, MODES[0]) as c:
                alice, bob = Agent(a), Agent(c)
                saved = await alice.run(SAVE_PLAIN)
                assert not saved.is_error and saved.text.startswith("pending\n"), saved.text
                theirs = await bob.run(LIST)
                refused = await bob.run(USE_PLAIN)
                return [last_line(theirs.text), refused.text]

        listed, refused = go(save())
        assert listed == "[]", listed
        assert "no skill named 'mine'" in refused, refused
        rows = _skills_cli(b.state_dir).stdout
        assert any(line.split()[:4][::3] == ["mine", "alice"] for line in rows.splitlines()), rows
        assert _skills_cli(b.state_dir, "--approve", "mine", "--yes").returncode == 0

        async def use() -> list[str]:
            async with connect(b.url, alice_token, MODES[0]) as a, connect(b.url, bob_token, MODES[0]) as c:
                mine, theirs = await Agent(a).run(USE_PLAIN), await Agent(c).run(USE_PLAIN)
                return [mine.text, theirs.text]

        mine, theirs = go(use())
        assert last_line(mine) == "from alice", mine
        assert "no skill named 'mine'" in theirs, theirs
    finally:
        b.close()
