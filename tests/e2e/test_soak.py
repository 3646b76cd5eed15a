"""Soak: 2,000 mixed runs on one bridge — plain prints, proxied tool calls, large outputs,
stderr floods, timeouts (interrupted and uninterruptible), sandbox crashes and downstream server
crashes, in a seeded random order. Every run must come back with the outcome its kind implies
(none lost, none hung), the bridge's memory must stay bounded, and after the bridge exits nothing of
it may remain: no container, no podman service, no downstream server process.

Figures (printed with -s): run counts per kind, wall time, bridge RSS at start / end / peak."""
from __future__ import annotations

import collections
import random
import time

import pytest
from helpers_host import pid_alive, processes

import servers as S

pytestmark = pytest.mark.engine  # sandbox crashes, timeouts and leftovers on the engine

RUNS = 2000
SEED = 20261121
RSS_BOUND_MB = 64  # steady-state RSS after the soak; the peak is reported, bounded below

# kind -> (weight, code, timeout, expected status, check on the text)
KINDS = {
    "print": (70, "print(40 + 2)", 30, "ok", lambda t: t.strip().endswith("42")),
    "state": (5, "soak_n = globals().get('soak_n', 0) + 1\nprint('n', soak_n)", 30, "ok",
              lambda t: t.strip().splitlines()[-1].startswith("n ")),
    "tool": (10, "r = await mcp_stub.echo(text='soak')\nprint(r['text'])", 30, "ok",
             lambda t: t.strip().endswith("soak")),
    "big_out": (4, "print('x' * 3_000_000)", 30, "ok", lambda t: "characters cut" in t),
    "stderr_flood": (3, "import os\nfor _ in range(64):\n    os.write(2, b'e' * (1 << 20))\nprint('done')",
                     60, "ok", lambda t: t.strip().endswith("done")),
    "error": (3, "raise ValueError('soak-boom')", 30, "error", lambda t: "soak-boom" in t),
    "timeout": (2, "import time\ntime.sleep(30)", 1, "timeout", lambda t: "interrupted" in t),
    "stuck": (1, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass", 1,
              "timeout", lambda t: "killed" in t),
    "crash": (1, "import os\nos._exit(3)", 30, "sandbox_error", lambda t: "exit" in t.lower()),
    "server_crash": (1, "await mcp_crashy.crash()", 30, "error", lambda t: "crashy" in t),
}


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _stub_pids(marker: str) -> list[int]:
    """Live stub-mcp processes started with SOAK_MARKER=marker."""
    found = []
    for pid, argv in processes():
        if not (argv and argv[0].endswith(b"stub-mcp")):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"SOAK_MARKER={marker}".encode() in f.read().split(b"\0") and pid_alive(pid):
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.timeout(1200)
def test_soak_2000_mixed_runs(bridge_factory, stub_ready, helpers):
    rnd = random.Random(SEED)
    names = list(KINDS)
    weights = [KINDS[k][0] for k in names]
    plan = rnd.choices(names, weights, k=RUNS)
    marker = "soak-" + str(SEED)
    config = {"mcpServers": {
        "stub": S.stub("stub", env={"SOAK_MARKER": marker}),
        "crashy": S.stub("crashy", env={"SOAK_MARKER": marker}),
    }}
    b = bridge_factory(name="soak", config=config)
    started = time.monotonic()
    b.run("print('warm')", servers=["stub", "crashy"])
    rss_start = _rss_kb(b.pid)
    seen = collections.Counter()
    failures = []
    for i, kind in enumerate(plan):
        _, code, timeout, want, check = KINDS[kind]
        servers = ["stub", "crashy"] if kind in ("tool", "server_crash") else None
        r = b.run(code, timeout=timeout, servers=servers, wait=timeout + 60)
        seen[kind] += 1
        if r.status != want or not check(r.text):
            failures.append(f"run {i} ({kind}): status {r.status!r}, wanted {want!r}: {r.text[:300]!r}")
            if len(failures) > 10:
                break
    rss_end = _rss_kb(b.pid)
    peak = _rss_kb(b.pid, "VmHWM")
    elapsed = time.monotonic() - started
    pid = b.pid
    print(f"\nsoak: {sum(seen.values())} runs in {elapsed:.0f} s: {dict(seen)}; bridge RSS "
          f"{rss_start // 1024} MiB at start, {rss_end // 1024} MiB at end, peak {peak // 1024} MiB")
    assert not failures, "\n".join(failures)
    assert sum(seen.values()) == RUNS
    assert rss_end < RSS_BOUND_MB * 1024, f"RSS {rss_end} kB after the soak"
    assert peak < 4 * RSS_BOUND_MB * 1024, f"peak RSS {peak} kB"

    assert _stub_pids(marker), "the downstream servers were running during the soak"
    b.close()
    assert helpers.poll(lambda: not pid_alive(pid), timeout=20), "the bridge exited"
    assert helpers.poll(lambda: not helpers.containers({"mcp-code-bridge.pid": str(pid)}), timeout=20), \
        "no sandbox container left"
    assert helpers.poll(lambda: not _stub_pids(marker), timeout=20), "no downstream server left"
    own_service = [p for p, argv in processes() if b"system" in argv and b"service" in argv
                   and any(f"podman-{pid}.".encode() in a for a in argv)]
    assert not own_service, f"the bridge's podman service is still running: {own_service}"
