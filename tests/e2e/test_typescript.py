"""TypeScript and JavaScript cells (GUIDE.md, "TypeScript cells"; issue 34 point 1): the tool
`run_typescript` offered with MCP_BRIDGE_LANGUAGES=python,typescript, run by node in the same
sandbox container as run_python, its MCP calls through the same policy.

The image must have node (the recipes add Node 22); MCP_BRIDGE_IMAGE names the image to use."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from bridge_driver import McpError, _flatten

import servers as S

pytestmark = pytest.mark.engine  # node runs inside the sandbox container

LANGS = {"MCP_BRIDGE_LANGUAGES": "python,typescript"}


@pytest.fixture(scope="module")
def audit_file(tmp_path_factory):
    return tmp_path_factory.mktemp("ts-audit") / "audit.jsonl"


@pytest.fixture(scope="module")
def tsb(bridge_factory, stub_ready, audit_file):
    entry = S.stub("stub")
    entry["disabledTools"] = ["fail"]
    config = {"mcpServers": {"stub": entry, "a__b": S.stub("a__b"), "a": S.stub("a")}}
    env = dict(LANGS, MCP_BRIDGE_MAX_OUTPUT="4096", MCP_BRIDGE_AUDIT_LOG=str(audit_file))
    b = bridge_factory(name="ts", config=config, env=env)
    yield b
    b.close()


def run_of(helpers, path, code):
    """The audit log's run line of `code` (polled for) and that run's call lines."""
    digest = hashlib.sha256(code.encode()).hexdigest()

    def lines():
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

    run = helpers.poll(lambda: next((r for r in lines() if r["kind"] == "run" and r["code_sha256"] == digest), None), timeout=30, interval=0.05)
    assert run is not None, path.read_text() if path.exists() else "no audit log"
    return run, [r for r in lines() if r["kind"] == "call" and r["run"] == run["run"]]


def ts(b, code, servers=None, timeout=None, name="run_typescript"):
    args = {"code": code}
    if servers is not None:
        args["servers"] = servers
    if timeout is not None:
        args["timeout"] = timeout
    return _flatten(b.call_raw(args, name=name), 0.0)


def test_without_the_setting_only_run_python_is_listed(bridge):
    names = [t.name for t in bridge.request(lambda s: s.list_tools()).tools]
    assert names == ["run_python"], names
    # and a call of run_typescript is an unknown tool whose error names the setting
    with pytest.raises(McpError) as refused:
        bridge.call_raw({"code": "console.log(1)"}, name="run_typescript")
    assert "MCP_BRIDGE_LANGUAGES=python,typescript" in str(refused.value), refused.value


def test_the_setting_adds_run_typescript(tsb):
    tools = {t.name: t for t in tsb.request(lambda s: s.list_tools()).tools}
    assert sorted(tools) == ["run_python", "run_typescript"]
    t = tools["run_typescript"]
    schema = t.input_schema if hasattr(t, "input_schema") else t.inputSchema
    assert schema["required"] == ["code"] and {"code", "servers", "timeout"} <= set(schema["properties"])


def test_console_output_goes_to_stdout_and_stderr(tsb):
    r = ts(tsb, "console.log('hello', 1 + 1); console.error('oops'); process.stdout.write('raw\\n')")
    assert not r.is_error, r
    assert "hello 2" in r.text and "raw" in r.text and "oops" in r.text, r
    # stderr has its own section in the compact output
    assert r.text.index("hello 2") < r.text.index("oops"), r


def test_state_is_kept_and_a_const_can_be_declared_again(tsb):
    r = ts(tsb, "const x = 41\nfunction inc(v: number): number { return v + 1 }\nclass K { v = 7 }")
    assert not r.is_error, r
    r = ts(tsb, "console.log(inc(x), new K().v)")
    assert not r.is_error and "42 7" in r.text, r
    r = ts(tsb, "const x = 1\nconsole.log(inc(x))")
    assert not r.is_error and "2" in r.text, r
    r = ts(tsb, "let {a, b: [c]} = {a: 'A', b: ['C']}\nconsole.log(a + c, x)")
    assert not r.is_error and "AC 1" in r.text, r


def test_typescript_types_are_stripped_and_top_level_await_works(tsb):
    code = (
        "interface P { name: string; n?: number }\n"
        "type Id = string | number\n"
        "const p: P = { name: 'typed' }\n"
        "const wait = (ms: number): Promise<Id> => new Promise(r => setTimeout(() => r(ms), ms))\n"
        "const got = await wait(5) as number\n"
        "console.log(p.name, got)"
    )
    r = ts(tsb, code)
    assert not r.is_error and "typed 5" in r.text, r


def test_a_throw_is_an_error_with_its_stack(tsb):
    r = ts(tsb, "function deep() { throw new TypeError('bad thing') }\n\nfunction outer() { deep() }\nouter()")
    assert r.is_error, r
    assert "TypeError: bad thing" in r.text, r
    assert "at deep (<run_typescript>:1:" in r.text and "at outer (<run_typescript>:3:" in r.text, r
    assert "<run_typescript>:5" not in r.text, r  # the wrapper's frame is not the cell's
    r = ts(tsb, "console.log('after', typeof outer)")
    assert not r.is_error and "after function" in r.text, r


def test_a_proxied_call_and_call_mcp_tool(tsb):
    r = ts(tsb, "const e = await mcp_stub.echo({text: 'hi'})\nconsole.log(JSON.stringify(e))", servers=["stub"])
    assert not r.is_error and "hi" in r.text, r
    r = ts(
        tsb,
        "console.log(JSON.stringify(await callMCPTool('stub', 'add', {a: 2, b: 3})))\n"
        "console.log(JSON.stringify(await callMCPTool('mcp__stub__add', {a: 4, b: 5})))",
        servers=["stub"],
    )
    assert not r.is_error and "5" in r.text and "9" in r.text, r


def test_the_longest_server_name_wins(tsb):
    code = "console.log(JSON.stringify(await callMCPTool('mcp__a__b__whoami', {})))"
    r = ts(tsb, code, servers=["a__b", "a"])
    assert not r.is_error and "a__b" in r.text, r


def test_each_helper_has_its_shape(tsb):
    code = (
        "const hits = await searchTools('echo')\n"
        "const schema = await getToolSchema('stub', 'echo')\n"
        "const schema2 = await getToolSchema('mcp__stub__echo')\n"
        "const servers = await listServers()\n"
        "const tools = await discoverMCPTools()\n"
        "console.log(JSON.stringify({hits, schema, same: JSON.stringify(schema) === JSON.stringify(schema2), servers,"
        " tools: tools.filter(t => t.server === 'stub')}))"
    )
    r = ts(tsb, code, servers=["stub"])
    assert not r.is_error, r
    out = json.loads(r.text.strip().splitlines()[-1])
    assert isinstance(out["hits"], list) and out["hits"], out
    assert set(out["hits"][0]) == {"server", "tool", "description"}, out
    assert any(h["server"] == "stub" and h["tool"] == "echo" for h in out["hits"]), out
    assert out["schema"]["server"] == "stub" and out["schema"]["tool"] == "echo", out
    assert out["schema"]["inputSchema"]["type"] == "object", out
    assert out["same"] is True, out
    assert sorted(out["servers"]) == ["a", "a__b", "stub"], out
    assert {"server": "stub", "tool": "echo"} == {k: v for k, v in out["tools"][0].items() if k in ("server", "tool")} or any(
        t["tool"] == "echo" for t in out["tools"]
    ), out
    assert all(set(t) == {"server", "tool", "description"} for t in out["tools"]), out


def test_policy_refusal_applies_to_a_typescript_call(tsb, audit_file, helpers):
    code = "try { await mcp_stub.fail({}) } catch (e) { console.log('refused:', e.name, e.message) }"
    r = ts(tsb, code, servers=["stub"])
    assert not r.is_error, r
    assert "refused:" in r.text and "disabledTools" in r.text, r
    # the audit log has the refused call, and a run line naming the language (written after the
    # run ends, by the bridge's writer thread: polled)
    run, calls = run_of(helpers, audit_file, code)
    assert run.get("language") == "typescript", run
    assert [c["decision"] for c in calls if c.get("tool") == "fail"] == ["deny"], calls
    py = ts(tsb, "print('py audit')", name="run_python")
    assert not py.is_error, py
    run, _ = run_of(helpers, audit_file, "print('py audit')")
    assert "language" not in run, run


def test_a_megabyte_of_output_is_cut(tsb):
    r = ts(tsb, "console.log('x'.repeat(1 << 20)); console.log('end')")
    assert not r.is_error, r
    assert len(r.text) < 20000, len(r.text)
    assert "end" in r.text, r.text[-500:]
    assert any(w in r.text.lower() for w in ("dropped", "cut", "omitted")), r.text[-800:]
    r = ts(tsb, "console.log('still', 1)")
    assert "still 1" in r.text, r


def test_a_loop_that_never_yields_times_out_and_the_next_cell_works(tsb):
    r = ts(tsb, "globalThis.kept = 5", timeout=30)
    assert not r.is_error, r
    r = ts(tsb, "while (true) {}", timeout=2)
    assert r.is_error and "Timed out" in r.text, r
    r = ts(tsb, "console.log('alive', typeof kept)")
    assert not r.is_error and "alive" in r.text, r
    # a loop after an await cannot be broken by vm's watchdog: node is replaced, state said lost
    r = ts(tsb, "await null\nwhile (true) {}", timeout=2)
    assert r.is_error and "Timed out" in r.text and "JavaScript state" in r.text, r
    r = ts(tsb, "console.log('fresh', typeof kept)")
    assert not r.is_error and "fresh undefined" in r.text, r
    # Python's state survived node's loss
    r = ts(tsb, "print('py ok')", name="run_python")
    assert not r.is_error and "py ok" in r.text, r


def test_a_cell_that_ends_node_says_the_state_is_lost(tsb):
    r = ts(tsb, "globalThis.gone = 1; process.exit(3)")
    assert r.is_error and "The JavaScript runtime exited (exit code 3)" in r.text, r
    assert "JavaScript state" in r.text, r
    r = ts(tsb, "console.log('new node', typeof gone)")
    assert not r.is_error and "new node undefined" in r.text, r


def test_a_waiting_cell_is_stopped_by_its_timeout(tsb):
    r = ts(tsb, "globalThis.w = 1; await new Promise(() => {})", timeout=2)
    assert r.is_error and "Timed out" in r.text, r
    r = ts(tsb, "console.log('w is', w)")
    assert not r.is_error and "w is 1" in r.text, r


def test_node_runs_under_the_sandbox_limits(tsb):
    # the JIT runs (no --jitless) within the pids limit, as the sandbox user, in the same container
    code = (
        "const s = require('fs').readFileSync('/proc/self/status', 'utf8')\n"
        "const threads = Number(s.match(/Threads:\\s+(\\d+)/)[1])\n"
        "console.log(process.version, threads < 64, process.execArgv.includes('--jitless'), process.getuid())"
    )
    r = ts(tsb, code)
    assert not r.is_error, r
    assert r.text.startswith("v22.") and "true false 65534" in r.text, r


def test_the_host_is_out_of_reach(tsb):
    code = (
        "const fs = require('fs')\n"
        "let read = 'no'; try { fs.readFileSync('/etc/shadow'); read = 'yes' } catch (e) { read = e.code }\n"
        "let net = 'no'; try { await fetch('http://127.0.0.1:9/'); net = 'yes' } catch (e) { net = 'failed' }\n"
        "let wrote = 'no'; try { fs.writeFileSync('/usr/x', 'x'); wrote = 'yes' } catch (e) { wrote = e.code }\n"
        "console.log(read, net, wrote, require('os').userInfo().uid)"
    )
    r = ts(tsb, code)
    assert not r.is_error, r
    assert "yes" not in r.text, r
    assert "failed" in r.text and "65534" in r.text, r


def test_the_output_mode_applies(bridge_factory):
    b = bridge_factory(name="ts-toon", env=dict(LANGS, MCP_BRIDGE_OUTPUT_MODE="toon"))
    try:
        r = ts(b, "console.log('a'); console.log('b')")
        assert not r.is_error, r
        assert "stdout[2]" in r.text, r
    finally:
        b.close()


def test_exec_runs_a_typescript_cell_through_the_same_path(helpers, cli_env, cli_cwd, stub_ready):
    S.write_config(Path(cli_env["MCP_BRIDGE_CONFIG_DIR"]), {"stub": S.stub("stub")})
    code = (
        "const n: number = 20\n"
        "const r = await mcp_stub.add({a: n, b: 22})\n"
        "console.log('SUM', JSON.stringify(r))\n"
    )
    # Without MCP_BRIDGE_LANGUAGES: the command line names the language itself.
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--language", "typescript", "--servers", "stub", "--json", code], env=cli_env,
                       cwd=cli_cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout, p.stderr)
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and "SUM" in out["stdout"] and "42" in out["stdout"], out
    # A throw is the run's error, with the exit code of a raised exception.
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--language", "typescript", "throw new Error('boom')"],
                       env=cli_env, cwd=cli_cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "Error: boom" in p.stderr, (p.returncode, p.stdout, p.stderr)
    # The same code as Python is a syntax error: the flag is what made it TypeScript.
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", code], env=cli_env, cwd=cli_cwd, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode != 0 and "SyntaxError" in p.stdout + p.stderr, (p.stdout, p.stderr)


def test_an_idle_stop_keeps_javascript_values_functions_and_classes(bridge_factory, helpers):
    b = bridge_factory(name="ts-idle", env=dict(LANGS, MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT="2"))
    try:
        r = ts(b, "const seen: Map<string, number> = new Map([['a', 1]])\n"
                  "let total = 41\n"
                  "function bump(n: number) { total += n; return total }\n"
                  "class Tally { count() { return seen.size + total } }\n"
                  "const tallies = {first: new Tally()}\n"
                  "const holder = {f: () => 1}\n"
                  "console.log('defined')")
        assert not r.is_error and "defined" in r.text, r
        b.run("py_side = 'kept too'")
        gone = helpers.poll(lambda: not b.containers(), timeout=30, interval=0.2)
        assert gone, f"the idle sandbox was not stopped\n{b.stderr_tail()}"
        r = ts(b, "console.log(bump(1), seen.get('a'), new Tally().count(), tallies.first.count())")
        assert not r.is_error, r.text
        assert "42 1 43 43" in r.text, r.text
        notice = (r.structured or {}).get("notice") or ""
        for name in ("seen (JavaScript)", "total (JavaScript)", "bump (JavaScript)", "Tally (JavaScript)", "tallies (JavaScript)",
                     "py_side"):
            assert name in notice, (name, notice)
        assert "holder (JavaScript) (cannot be saved" in notice, notice
    finally:
        b.close()


def test_reset_from_python_ends_the_javascript_state_too(tsb):
    assert not ts(tsb, "const beforeReset = 7").is_error
    r = tsb.run("from mcp import runtime\nprint('x' in runtime.reset())")
    assert r.structured["status"] == "ok", str(r)
    r = ts(tsb, "console.log(typeof beforeReset)")
    assert not r.is_error and "undefined" in r.text, r
