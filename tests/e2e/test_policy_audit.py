"""The audit log (GUIDE.md, "Policy" / "Audit log") with the official MCP Python client: a run with
several proxied calls gives one JSON line per call and one per run (same run id, the code's and the
arguments' SHA-256), no argument values unless MCP_BRIDGE_AUDIT_VALUES=1 (secret-looking keys
redacted even then), a refused call's decision and rule, a 0600 file rotated by size (what a
rotation drops announced), `exec` audited and flushed at exit, an unsafe log refused at startup,
`mcp-code-bridge audit`, and a flood of refusals stopped and folded.

A line is written by the bridge's writer thread after the call or run ends, so the tests poll the
file for the run line (by the code's SHA-256) rather than read it once.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from bridge_driver import _flatten
from helpers_cli import cli_env_for
from helpers_proxy import json_of

import servers as S

pytestmark = pytest.mark.host_only  # the policy is host-side: one engine is enough

SECRET_ENV = "hunter2-from-the-server-config"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def canonical(args: dict) -> str:
    """The arguments as the bridge serializes them for args_sha256: compact JSON, keys in the
    order the sandbox sent them, non-ASCII as UTF-8."""
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False)


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_of(helpers, path: Path, code: str) -> tuple[dict, list[dict]]:
    """The run line of `code` (waited for) and the call lines of that run."""
    digest = sha256(code)

    def find():
        for r in records(path):
            if r["kind"] == "run" and r["code_sha256"] == digest:
                return r
        return None

    run = helpers.poll(find, timeout=30, interval=0.05)
    assert run is not None, f"no run line for the code in {path}:\n{path.read_text() if path.exists() else ''}"
    calls = [r for r in records(path) if r["kind"] == "call" and r["run"] == run["run"]]
    return run, calls


@pytest.fixture(scope="module")
def audit_dir(tmp_path_factory, stub_ready):
    d = tmp_path_factory.mktemp("audit")
    S.write_config(d / "mcps", {"stub": S.stub("stub", env={"STUB_API_TOKEN": SECRET_ENV})})
    return d


@pytest.fixture(scope="module")
def plain(bridge_factory, audit_dir):
    """A bridge auditing to audit_dir/plain/audit.log, values off."""
    log = audit_dir / "plain" / "audit.log"
    env = {"MCP_BRIDGE_CONFIG_DIR": str(audit_dir / "mcps"), "MCP_BRIDGE_AUDIT_LOG": str(log)}
    b = bridge_factory(name="audit-plain", env=env)
    b.log = log
    yield b
    b.close()


@pytest.fixture(scope="module")
def valued(bridge_factory, audit_dir):
    """A bridge logging argument values, rotating at 4 KiB (the smallest size allowed)."""
    log = audit_dir / "valued" / "audit.log"
    env = {
        "MCP_BRIDGE_CONFIG_DIR": str(audit_dir / "mcps"),
        "MCP_BRIDGE_AUDIT_LOG": str(log),
        "MCP_BRIDGE_AUDIT_VALUES": "1",
        "MCP_BRIDGE_AUDIT_MAX_BYTES": "4096",
    }
    b = bridge_factory(name="audit-valued", env=env)
    b.log = log
    yield b
    b.close()


SEVERAL = """
import json
a = await mcp_stub.echo(text="audit me")
b = await mcp_stub.add(a=2, b=3)
c = await mcp_stub.echo(text="zwei")
print(json.dumps([a["text"], b["sum"], c["text"]]))
"""


def test_a_run_with_several_calls_gives_one_line_each_and_a_run_line(plain, helpers):
    assert json_of(plain, SEVERAL, servers=["stub"]) == ["audit me", 5, "zwei"]
    run, calls = run_of(helpers, plain.log, SEVERAL)
    assert run["status"] == "ok" and run["calls"] == 3 and run["refused"] == 0
    assert run["code_sha256"] == sha256(SEVERAL)
    assert len(run["run"]) == 16 and "dropped" not in run
    assert [(c["server"], c["tool"], c["outcome"], c["decision"]) for c in calls] == [
        ("stub", "echo", "ok", "allow"),
        ("stub", "add", "ok", "allow"),
        ("stub", "echo", "ok", "allow"),
    ]
    sent = [{"text": "audit me"}, {"a": 2, "b": 3}, {"text": "zwei"}]
    assert [c["args_sha256"] for c in calls] == [sha256(canonical(a)) for a in sent]
    assert [c["bytes_in"] for c in calls] == [len(canonical(a).encode()) for a in sent]
    assert all(c["bytes_out"] > 0 and c["duration_ms"] >= 0 for c in calls)
    assert run["bytes_in"] == sum(c["bytes_in"] for c in calls)
    assert run["bytes_out"] == sum(c["bytes_out"] for c in calls)
    # No argument values by default, and nothing of the server's env.
    text = plain.log.read_text()
    assert all("arguments" not in c for c in calls)
    assert "audit me" not in text and "zwei" not in text and SECRET_ENV not in text
    # The run line comes after its calls, and each line is a whole JSON object.
    kinds = [r["kind"] for r in records(plain.log) if r.get("run") == run["run"]]
    assert kinds == ["call", "call", "call", "run"]


def test_the_log_is_0600_in_a_folder_only_its_owner_writes(plain, helpers):
    json_of(plain, "print(1)")
    mode = stat.S_IMODE(os.stat(plain.log).st_mode)
    assert mode == 0o600, oct(mode)
    assert stat.S_IMODE(os.stat(plain.log.parent).st_mode) & 0o022 == 0


# The narrowed run has no `mcp_stub.add` proxy; runtime.call_tool still reaches the dispatcher.
REFUSED = """
import json
from mcp import runtime
ok = await mcp_stub.echo(text="allowed")
try:
    await runtime.call_tool("stub", "add", {"a": 1, "b": 2})
    got = "ran"
except Exception as e:
    got = type(e).__name__
print(json.dumps([ok["text"], got]))
"""


def test_a_refused_call_has_its_decision_and_rule_in_the_log(plain, helpers):
    args = {"code": REFUSED, "servers": ["stub"], "allowed_tools": ["stub.echo"]}
    r = _flatten(plain.call_raw(args), 0.0)
    assert r.status == "ok", r
    assert json.loads(r.structured["stdout"].strip().splitlines()[-1]) == ["allowed", "PolicyDeniedError"]
    run, calls = run_of(helpers, plain.log, REFUSED)
    assert run["calls"] == 1 and run["refused"] == 1
    echo, add = calls
    assert (echo["tool"], echo["decision"], echo["outcome"]) == ("echo", "allow", "ok")
    assert (add["tool"], add["decision"], add["outcome"]) == ("add", "deny", "refused")
    assert add["error_kind"] == "policy_denied"
    assert "allowed_tools" in add["rule"] and "stub.echo" in add["rule"]
    assert add["bytes_out"] == 0


def test_values_are_logged_only_when_asked_and_secret_keys_redacted(valued, helpers):
    code = """
import json
await mcp_stub.echo(text="visible value")
try:
    await mcp_stub.echo(text="x", api_token="s3cret-arg-value")
except Exception as e:
    print(type(e).__name__)
print(json.dumps(1))
"""
    json_of(valued, code, servers=["stub"])
    run, calls = run_of(helpers, valued.log, code)
    assert calls[0]["arguments"] == {"text": "visible value"}
    # The tool's schema refuses the extra key, but the attempt is logged, its secret redacted.
    assert calls[1]["outcome"] == "error"
    assert calls[1]["arguments"] == {"text": "x", "api_token": "[redacted]"}
    assert calls[1]["args_sha256"] == sha256(canonical({"text": "x", "api_token": "s3cret-arg-value"}))
    every = "".join(p.read_text() for p in valued.log.parent.iterdir())
    assert "s3cret-arg-value" not in every and SECRET_ENV not in every


def test_the_log_is_rotated_by_size_keeping_three_files(valued, helpers):
    code = """
for i in range(60):
    await mcp_stub.echo(text="rotate %02d " % i + "r" * 60)
print(1)
"""
    json_of(valued, code, servers=["stub"])
    # The run line may be in any file by now; read them all, oldest first.
    files = [Path(f"{valued.log}.{n}") for n in (3, 2, 1)] + [valued.log]
    helpers.poll(lambda: any(r["kind"] == "run" and r["code_sha256"] == sha256(code) for r in records(valued.log)),
                 timeout=30, interval=0.05)
    assert all(f.exists() for f in files), sorted(p.name for p in valued.log.parent.iterdir())
    assert not Path(f"{valued.log}.4").exists()
    for f in files:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600
        assert f.stat().st_size <= 4096
        for line in f.read_text().splitlines():
            json.loads(line)  # every line whole
    kept = [r for f in files for r in records(f) if r["kind"] == "call" and r["tool"] == "echo"]
    texts = [r["arguments"]["text"][:9] for r in kept if r["arguments"]["text"].startswith("rotate")]
    # The newest calls are kept, in order (the oldest fell off from the fourth rotation on).
    assert texts == sorted(texts) and texts[-1] == "rotate 59" and texts[0] > "rotate 00"
    # Nothing fell off unannounced: each file a rotation started by dropping the oldest begins
    # with a line saying how many lines and which runs it held, and the bridge warned once.
    rotated = [r for f in files for r in records(f) if r["kind"] == "rotated"]
    assert rotated, [records(f)[:1] for f in files]
    assert all(r["dropped_file"] == "audit.log.3" and r["dropped_lines"] > 0 for r in rotated), rotated
    assert all(r["dropped_runs"] and all(len(i) == 16 for i in r["dropped_runs"]) for r in rotated), rotated
    for f in files:
        assert all(r["kind"] != "rotated" for r in records(f)[1:]), f
    assert valued.stderr_path.read_text().count("the audit log rotated away") == 1


def audit_cli(helpers, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helpers.BRIDGE_BIN, "audit", *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_audit_command_shows_entries_with_denials_first_class(plain, helpers, tmp_path):
    # After the refused-call test (same module): the log holds a denial.
    args = {"code": REFUSED + "\n# again", "servers": ["stub"], "allowed_tools": ["stub.echo"]}
    _flatten(plain.call_raw(args), 0.0)
    run, _ = run_of(helpers, plain.log, REFUSED + "\n# again")
    env = cli_env_for(tmp_path / "state", MCP_BRIDGE_AUDIT_LOG=str(plain.log))
    p = audit_cli(helpers, env, "--last", "3")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"audit log {plain.log}: 3 entries (2 calls, 1 runs); 1 refused: 1 DENIED"), lines
    short = run["run"][:8]
    assert f"{short}  stub.echo  ok allow" in lines[1]
    assert f"{short}  stub.add  DENIED (policy_denied)  rule: allowed_tools [stub.echo]" in lines[2]
    assert f"{short}  -- run ok: 1 calls, 1 refused" in lines[3]
    j = audit_cli(helpers, env, "--last", "3", "--json")
    assert j.returncode == 0, j.stderr
    got = [json.loads(line) for line in j.stdout.splitlines()]
    assert [r["kind"] for r in got] == ["call", "call", "run"] and got[2]["run"] == run["run"]
    # The file's lines also carry the chain's fields (GUIDE.md, "Tamper evidence"), which
    # `--json` leaves out.
    chained = [{k: v for k, v in r.items() if k not in ("mac", "prev")} for r in records(plain.log)[-3:]]
    assert got == chained
    # --file reads another log; garbage and a cut last line are reported once, not fatal.
    other = tmp_path / "other.log"
    other.write_text(plain.log.read_text().splitlines()[-1] + "\nnot json\n" + '{"kind":"ca')
    p = audit_cli(helpers, cli_env_for(tmp_path / "state"), "--file", str(other))
    assert p.returncode == 0 and "1 entries (0 calls, 1 runs); no refused calls" in p.stdout, p
    assert "1 line(s) that are not audit entries were skipped" in p.stderr
    assert "the last line is incomplete" in p.stderr
    # Neither --file nor the setting: a clear error, exit 2.
    p = audit_cli(helpers, cli_env_for(tmp_path / "state"))
    assert p.returncode == 2 and "MCP_BRIDGE_AUDIT_LOG" in p.stderr and "--file" in p.stderr


def test_exec_is_audited_and_its_lines_are_flushed_at_exit(audit_dir, cli_env, tmp_path, helpers):
    log = tmp_path / "exec" / "audit.log"
    env = dict(cli_env, MCP_BRIDGE_CONFIG_DIR=str(audit_dir / "mcps"), MCP_BRIDGE_AUDIT_LOG=str(log))
    code = 'print((await mcp_stub.echo(text="from exec"))["text"])'
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--servers", "stub", code], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "from exec", p.stderr
    # Read once: the process has exited, so the lines are on disk already.
    got = records(log)
    assert [r["kind"] for r in got] == ["call", "run"], got
    assert got[1]["code_sha256"] == sha256(code) and got[0]["run"] == got[1]["run"]


@pytest.mark.parametrize("case", ["world_writable", "symlink", "open_folder"])
def test_an_unsafe_log_stops_the_bridge_before_it_starts(cli_env, tmp_path, helpers, case):
    d = tmp_path / "logs"
    d.mkdir(mode=0o700)
    log = d / "audit.log"
    if case == "world_writable":
        log.write_text("")
        log.chmod(0o666)
    elif case == "symlink":
        (d / "elsewhere").write_text("")
        log.symlink_to(d / "elsewhere")
    else:
        d.chmod(0o777)
    env = dict(cli_env, MCP_BRIDGE_AUDIT_LOG=str(log))
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "print('never ran')"], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "never ran" not in p.stdout
    assert str(log) in p.stderr or str(d) in p.stderr, p.stderr
    want = {"world_writable": "mode 0666", "symlink": "symbolic link", "open_folder": "MCP_BRIDGE_AUDIT_LOG"}[case]
    assert want in p.stderr, p.stderr


LIMITED = """
from mcp import runtime

out = []
for tool, args in (("echo", {"text": "1"}), ("drop_table", {}), ("echo", {"text": "3"})):
    try:
        await runtime.call_tool("stub", tool, args)
        out.append("ok")
    except Exception as e:
        out.append(type(e).__name__)
print(",".join(out))
"""


def test_every_refusal_has_its_decision_and_rule_in_the_log(cli_env, tmp_path, stub_ready, helpers):
    # exec has nobody to ask: the destructive drop_table fails closed (unapproved); the budget of
    # two calls then refuses the third (limit; the unapproved call used its place).
    S.write_config(tmp_path / "mcps", {"stub": S.stub("stub", policy_tools=True)})
    log = tmp_path / "logs" / "audit.log"
    env = dict(cli_env, MCP_BRIDGE_CONFIG_DIR=str(tmp_path / "mcps"), MCP_BRIDGE_AUDIT_LOG=str(log),
               MCP_BRIDGE_RUN_MAX_CALLS="2")
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--servers", "stub", LIMITED], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok,NotApprovedError,LimitExceededError"
    calls = [r for r in records(log) if r["kind"] == "call"]
    got = [(c["tool"], c["outcome"], c["decision"], c.get("error_kind")) for c in calls]
    assert got == [
        ("echo", "ok", "allow", None),
        ("drop_table", "refused", "unapproved", "not_approved"),
        ("echo", "refused", "limit", "limit_exceeded"),
    ]
    assert calls[1]["rule"] and calls[2]["rule"], calls
    shown = subprocess.run([helpers.BRIDGE_BIN, "audit", "--file", str(log)], env=env, capture_output=True,
                           text=True, timeout=60)
    assert "2 refused: 1 UNAPPROVED, 1 LIMIT" in shown.stdout.splitlines()[0], shown.stdout


# Sandbox code refusing itself as fast as it can: the narrowed run has no `add`, so every
# call is refused by a rule and costs next to nothing.
FLOOD = """
from mcp import runtime
n = 0
for i in range(20000):
    try:
        await runtime.call_tool("stub", "add", {"a": i, "b": 1})
    except Exception as e:
        n += 1
print("flooded", n)
"""


def test_a_flood_of_refusals_is_stopped_and_folded_and_erases_nothing(bridge_factory, audit_dir, helpers):
    """20,000 refused calls in one run: the run is stopped past MCP_BRIDGE_RUN_MAX_REFUSALS
    (1,000 by default) with an error naming it; the refusals are one line with a count; an earlier
    run's lines stay in the current file (before: 20,000 lines rotated them away)."""
    log = audit_dir / "flood" / "audit.log"
    env = {
        "MCP_BRIDGE_CONFIG_DIR": str(audit_dir / "mcps"),
        "MCP_BRIDGE_AUDIT_LOG": str(log),
        "MCP_BRIDGE_AUDIT_MAX_BYTES": "65536",
    }
    b = bridge_factory(name="audit-flood", env=env)
    try:
        marker = 'import json\nprint(json.dumps((await mcp_stub.echo(text="before the flood"))["text"]))'
        assert json_of(b, marker, servers=["stub"]) == "before the flood"
        first, _ = run_of(helpers, log, marker)
        args = {"code": FLOOD, "servers": ["stub"], "allowed_tools": ["stub.echo"]}
        r = _flatten(b.call_raw(args), 0.0)
        assert r.status == "error", r
        error = r.structured.get("error") or r.text
        assert "MCP_BRIDGE_RUN_MAX_REFUSALS=1000" in error and "refused" in error, error
        assert "flooded" not in (r.structured.get("stdout") or ""), r
        run, calls = run_of(helpers, log, FLOOD)
        assert run["status"] == "error" and run["refused"] > 1000, run
        # The rule's refusals are one line counting them (and the refusals of the stopped run).
        assert len(calls) <= 3, calls
        denied = [c for c in calls if c["decision"] == "deny"]
        assert len(denied) == 1 and denied[0]["tool"] == "add" and denied[0]["count"] >= 1000, calls
        assert sum(c.get("count", 1) for c in calls) == run["refused"], (calls, run)
        # Nothing rotated away: the earlier run is still in the current file.
        assert any(x["kind"] == "run" and x["run"] == first["run"] for x in records(log))
        assert not Path(f"{log}.1").exists()
        # The bridge goes on: the next run works.
        assert json_of(b, "import json\nprint(json.dumps(2))") == 2
    finally:
        b.close()
