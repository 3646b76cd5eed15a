"""The audit log's chain (GUIDE.md, "Tamper evidence"; issue 34 point 4): real runs through
`mcp-code-bridge run` (the official MCP client) and `exec` write lines that each end in a MAC;
`audit --verify` says the chain holds; copies of the log with one line edited, one deleted and two
swapped each fail, naming the line; two `exec`s appending at once keep one chain; and
MCP_BRIDGE_AUDIT_CODE=1 puts the run's code in its run line, cut at 64 KiB and counted, and
without it there is no code.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from helpers_proxy import json_of

import servers as S

pytestmark = pytest.mark.host_only  # the log is written on the host: one engine is enough

MAX_CODE = 64 * 1024
MAC = re.compile(r',"mac":"[0-9a-f]{64}"}$')


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in lines_of(path)] if path.exists() else []


@pytest.fixture
def chain_env(cli_env, tmp_path, stub_ready):
    """`exec`'s environment: the stub server, a log in tmp_path/logs, the key in tmp_path/state."""
    S.write_config(tmp_path / "mcps", {"stub": S.stub("stub")})
    env = dict(
        cli_env,
        MCP_BRIDGE_CONFIG_DIR=str(tmp_path / "mcps"),
        MCP_BRIDGE_STATE_DIR=str(tmp_path / "state"),
        MCP_BRIDGE_AUDIT_LOG=str(tmp_path / "logs" / "audit.log"),
    )
    return env


def exec_run(helpers, env: dict, code: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([helpers.BRIDGE_BIN, "exec", "--servers", "stub", code], env=env, cwd=str(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def exec_ok(helpers, env: dict, code: str, cwd: Path) -> str:
    p = exec_run(helpers, env, code, cwd)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, (p.returncode, out, err)
    return out


def verify(helpers, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helpers.BRIDGE_BIN, "audit", "--verify", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def calls(n: int, tag: str) -> str:
    return "\n".join(f'await mcp_stub.echo(text="{tag} {i}")' for i in range(n)) + f'\nprint("{tag} done")'


def test_real_runs_are_chained_and_an_edited_deleted_or_swapped_line_is_named(
    chain_env, bridge_factory, helpers, tmp_path
):
    log = Path(chain_env["MCP_BRIDGE_AUDIT_LOG"])
    assert exec_ok(helpers, chain_env, calls(3, "exec one"), tmp_path).strip() == "exec one done"
    # `run` over MCP, with the same state folder (the key) and log.
    keep = ("MCP_BRIDGE_CONFIG_DIR", "MCP_BRIDGE_STATE_DIR", "MCP_BRIDGE_AUDIT_LOG")
    bridge = bridge_factory(name="audit-chain", env={k: chain_env[k] for k in keep})
    code = calls(2, "run") + '\nimport json\nprint(json.dumps("over mcp"))'
    assert json_of(bridge, code, servers=["stub"]) == "over mcp"
    helpers.poll(lambda: any(r.get("code_sha256") == sha256(code) for r in records(log)), timeout=30,
                 interval=0.05)
    assert exec_ok(helpers, chain_env, calls(2, "exec two"), tmp_path).strip() == "exec two done"
    bridge.close()

    lines = lines_of(log)
    kinds = [json.loads(line)["kind"] for line in lines]
    assert kinds.count("run") == 3 and kinds.count("call") == 7, kinds
    assert all(MAC.search(line) for line in lines), lines
    assert json.loads(lines[0])["prev"] == "0" * 64, "the chain starts from zeros"
    assert all("prev" not in json.loads(line) for line in lines[1:])
    held = verify(helpers, chain_env)
    assert held.returncode == 0, (held.stdout, held.stderr)
    assert held.stdout.strip() == "the audit log holds: 10 lines checked in 1 files (audit.log)", held.stdout
    # The key lives in the state folder, private, and nowhere in the log.
    key = tmp_path / "state" / "audit" / "chain.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert key.read_text().strip() not in log.read_text()

    def copy(name: str, changed: list[str]) -> Path:
        p = tmp_path / "copies" / name
        p.parent.mkdir(exist_ok=True)
        p.write_text("\n".join(changed) + "\n")
        return p

    edited = list(lines)
    assert '"tool":"echo"' in edited[4]
    edited[4] = edited[4].replace('"tool":"echo"', '"tool":"drop"')
    deleted = lines[:6] + lines[7:]
    swapped = list(lines)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    for name, changed, line, reason in [
        ("edited.log", edited, 5, "MAC mismatch"),
        ("deleted.log", deleted, 7, "MAC mismatch"),
        ("swapped.log", swapped, 2, "MAC mismatch"),
    ]:
        path = copy(name, changed)
        p = verify(helpers, chain_env, "--file", str(path))
        assert p.returncode == 1, (name, p.returncode, p.stdout, p.stderr)
        assert p.stdout.startswith(f"the audit log does not hold: {path} line {line}: {reason}"), (name, p.stdout)
    # A MAC stripped, and the head cut off: other reasons, still named.
    stripped = list(lines)
    stripped[3] = MAC.sub("}", stripped[3])
    p = verify(helpers, chain_env, "--file", str(copy("stripped.log", stripped)))
    assert p.returncode == 1 and "line 4: missing MAC" in p.stdout, p.stdout
    p = verify(helpers, chain_env, "--file", str(copy("headless.log", lines[2:])))
    assert p.returncode == 1 and "line 1: broken link" in p.stdout, p.stdout
    # Without the key (another state folder) the chain cannot be checked: exit 2, saying why.
    p = verify(helpers, dict(chain_env, MCP_BRIDGE_STATE_DIR=str(tmp_path / "other-state")))
    assert p.returncode == 2 and "no audit chain key" in p.stderr, (p.returncode, p.stderr)


def test_two_bridges_appending_at_once_keep_one_chain(chain_env, helpers, tmp_path):
    log = Path(chain_env["MCP_BRIDGE_AUDIT_LOG"])
    # Both sandboxes wait for the same moment, then call as fast as they can: their lines are
    # appended at the same time by two bridge processes.
    start = time.time() + 6
    many = (
        "import asyncio, time\n"
        f"await asyncio.sleep(max(0, {start} - time.time()))\n"
        "for i in range(300):\n"
        "    await mcp_stub.echo(text=f'{W} {i}')\n"
        "print('done')"
    )
    procs = [exec_run(helpers, chain_env, f"W = 'w{w}'\n" + many, tmp_path) for w in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "done", (out, err)
    got = records(log)
    assert sum(r["kind"] == "run" for r in got) == 2 and sum(r["kind"] == "call" for r in got) == 600
    held = verify(helpers, chain_env)
    assert held.returncode == 0, (held.stdout, held.stderr)
    assert "602 lines checked in 1 files" in held.stdout, held.stdout


def test_audit_code_puts_the_code_capped_in_the_run_line_and_without_it_there_is_none(
    chain_env, helpers, tmp_path
):
    log = Path(chain_env["MCP_BRIDGE_AUDIT_LOG"])
    plain = 'print("no code logged")  # token = "s3cr3t-plain"'
    exec_ok(helpers, chain_env, plain, tmp_path)
    on = dict(chain_env, MCP_BRIDGE_AUDIT_CODE="1")
    small = 'print("code logged")  # token = "s3cr3t-small"'
    exec_ok(helpers, on, small, tmp_path)
    big = 'print("big")\n' + "# é pad\n" * 12_000
    assert len(big.encode()) > MAX_CODE
    exec_ok(helpers, on, big, tmp_path)
    runs = {r["code_sha256"]: r for r in records(log) if r["kind"] == "run"}
    assert "code" not in runs[sha256(plain)] and "code_cut" not in runs[sha256(plain)]
    assert "s3cr3t-plain" not in log.read_text()
    assert runs[sha256(small)]["code"] == small and "code_cut" not in runs[sha256(small)]
    kept = runs[sha256(big)]["code"]
    assert big.startswith(kept) and MAX_CODE - 4 < len(kept.encode()) <= MAX_CODE
    assert runs[sha256(big)]["code_cut"] == len(big.encode()) - len(kept.encode())
    held = verify(helpers, chain_env)
    assert held.returncode == 0 and "3 lines checked" in held.stdout, (held.stdout, held.stderr)


def test_rotation_carries_the_chain_and_verify_reads_every_file_kept(chain_env, helpers, tmp_path):
    log = Path(chain_env["MCP_BRIDGE_AUDIT_LOG"])
    small = dict(chain_env, MCP_BRIDGE_AUDIT_MAX_BYTES="4096")
    # About 400 bytes a line, 10 lines a file: 80 calls rotate many times and drop files.
    exec_ok(helpers, small, calls(80, "x" * 100), tmp_path)
    files = [Path(f"{log}.{n}") for n in (3, 2, 1)] + [log]
    assert all(f.exists() for f in files), sorted(p.name for p in log.parent.iterdir())
    for older, newer in zip(files, files[1:], strict=False):
        last = json.loads(lines_of(older)[-1])["mac"]
        assert json.loads(lines_of(newer)[0])["prev"] == last, newer
    assert any(r["kind"] == "rotated" for f in files for r in records(f))
    held = verify(helpers, chain_env)
    assert held.returncode == 0, (held.stdout, held.stderr)
    assert "in 4 files (audit.log.3, audit.log.2, audit.log.1, audit.log)" in held.stdout, held.stdout
    # The oldest file deleted whole, as a rotation would: the floor in the state folder names it.
    aside = tmp_path / "aside"
    Path(f"{log}.3").rename(aside)
    p = verify(helpers, chain_env)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert f"{log}.2 line 1: the oldest file kept does not start where the last rotation left" in p.stdout, p.stdout
    aside.rename(f"{log}.3")
    assert verify(helpers, chain_env).returncode == 0
    # A rotated file put back in the wrong place breaks the link where it no longer fits.
    Path(f"{log}.2").write_bytes(Path(f"{log}.3").read_bytes())
    p = verify(helpers, chain_env)
    assert p.returncode == 1 and f"{log}.2 line 1: broken link" in p.stdout, p.stdout


def test_lines_from_before_the_chain_are_counted_not_covered(chain_env, helpers, tmp_path):
    log = Path(chain_env["MCP_BRIDGE_AUDIT_LOG"])
    log.parent.mkdir(mode=0o700)
    old = '{"kind":"run","time":"t","run":"00000000000000aa","code_sha256":"c","status":"ok","duration_ms":1.0,' \
          '"calls":0,"refused":0,"bytes_in":0,"bytes_out":0}\n'
    log.write_text(old * 2)
    log.chmod(0o600)
    # No chained line yet (and no key): cannot be checked.
    p = verify(helpers, chain_env)
    assert p.returncode == 2 and "no audit chain key" in p.stderr, (p.stdout, p.stderr)
    exec_ok(helpers, chain_env, 'print("after the old lines")', tmp_path)
    lines = lines_of(log)
    assert json.loads(lines[2])["prev"] == "0" * 64, lines[2]
    held = verify(helpers, chain_env)
    assert held.returncode == 0, (held.stdout, held.stderr)
    assert held.stdout.strip() == (
        "the audit log holds: 1 lines checked in 1 files (audit.log); 2 lines before the chain began carry no "
        "MAC and are not covered"
    ), held.stdout
    # Every MAC stripped: nothing is covered, and that is not "holds".
    log.write_text("".join(MAC.sub("}", line) + "\n" for line in lines))
    p = verify(helpers, chain_env)
    assert p.returncode == 1 and "none of its 3 lines carries a MAC" in p.stdout, p.stdout


def test_lines_cut_from_the_newest_end_are_caught_by_the_head(chain_env, helpers, tmp_path):
    log = Path(chain_env["MCP_BRIDGE_AUDIT_LOG"])
    exec_ok(helpers, chain_env, calls(2, "kept"), tmp_path)
    exec_ok(helpers, chain_env, calls(2, "erased"), tmp_path)
    lines = lines_of(log)
    assert len(lines) == 6
    assert verify(helpers, chain_env).returncode == 0
    # The second run's lines removed, as a filesystem server driven by the agent could.
    log.write_text("\n".join(lines[:3]) + "\n")
    p = verify(helpers, chain_env)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stdout.startswith(f"the audit log does not hold: {log} line 4: the newest lines were removed"), p.stdout
    # The next bridge warns and follows the last line written: the gap stays visible.
    p = exec_run(helpers, chain_env, 'print("after the cut")', tmp_path)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0 and "does not end in the last line written" in err, err
    p = verify(helpers, chain_env)
    assert p.returncode == 1 and f"{log} line 4: broken link" in p.stdout, p.stdout
