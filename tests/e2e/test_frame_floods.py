"""Forged frames (ARCHITECTURE.md, "Memory ceiling"): sandbox code that finds the entrypoint's frame
writer through `gc` floods the bridge with every kind of frame, and a short fuzz mutates them.

The bridge runs with small settings so that its documented ceiling (`ceiling_mib`, the formula in
ARCHITECTURE.md) is tight. For each flood: the bridge stays up, its peak RSS (VmHWM) grew by less
than the ceiling, the result text stays bounded (the count of dropped frames is reported instead of
one message per frame), its log grew by little (rate-limited warnings), and a normal call works
afterwards. Names the sandbox chooses (outbox files, call frames) come out escaped.
"""
from __future__ import annotations

import os
import random

import pytest

pytestmark = pytest.mark.host_only  # the bridge's frame decoder and its ceiling; the channel itself is test_core's and test_floods'

MIB = 1 << 20
KIB = 1 << 10

MAX_FRAME = 256 * KIB
MAX_PENDING = 1 * MIB  # MCP_BRIDGE_MAX_PENDING_RESULTS: reply budget and request budget
MAX_OUTPUT = 4096  # characters per stream
SNAPSHOT_MAX = 1 * MIB
MAX_FILES = 5
IMAGES_MAX_BYTES = 16 * KIB

SETTINGS = {
    "MCP_BRIDGE_MAX_FRAME": str(MAX_FRAME),
    "MCP_BRIDGE_MAX_PENDING_RESULTS": str(MAX_PENDING),
    "MCP_BRIDGE_MAX_OUTPUT": str(MAX_OUTPUT),
    "MCP_BRIDGE_SNAPSHOT_MAX": str(SNAPSHOT_MAX),
    "MCP_BRIDGE_OUTBOX_MAX_FILES": str(MAX_FILES),
    "MCP_BRIDGE_OUTBOX_MAX_FILE": "64k",
    "MCP_BRIDGE_OUTBOX_MAX_CELL": "256k",
    "MCP_BRIDGE_IMAGES_MAX_BYTES": str(IMAGES_MAX_BYTES),
    "MCP_BRIDGE_MAX_TIMEOUT": "600",
}

# The formula of ARCHITECTURE.md, "Memory ceiling": bytes the bridge may grow by for sandbox input.
# A request is charged what its JSON takes once read (`bridge/session/json_cost.rs`), within F and P, so no
# multiple of F or P for JSON values appears (it was 48·(F + P), and the real multiple was ~100).
FIXED = 16 * MIB  # in-flight tasks, queues, tails, allocator slack


def ceiling_bytes() -> int:
    return (3 * MAX_FRAME + 3 * MAX_PENDING + SNAPSHOT_MAX + 4 * MIB + 3 * MAX_FILES * IMAGES_MAX_BYTES
            + 36 * MAX_OUTPUT + FIXED)


RESULT_TEXT_BOUND = 3 * MAX_OUTPUT + 8 * KIB
LOG_GROWTH_BOUND = 256 * KIB
FRAMES = int(os.environ.get("E2E_FLOOD_FRAMES", "200000"))  # frames per kind in the flood

PRELUDE = r"""
import base64, gc, json
_w = next(o for o in gc.get_objects() if type(o).__name__ == 'FrameWriter')
_ex = next(o for o in gc.get_objects() if type(o).__name__ == 'ExecState').running
def line(d):
    return (json.dumps(d, separators=(',', ':')) + '\n').encode()
def burst(make, n, per=4000):
    for start in range(0, n, per):
        _w.write_now(b''.join(make(i) for i in range(start, min(n, start + per))))
"""

FLOOD = PRELUDE + r"""
N = {frames}
big = 'x' * ({max_frame} - 1024)
kinds = [
    lambda i: line({{'t': 'ready', 'v': 1, 'channel_error': 'no socket %d' % i}}),
    lambda i: line({{'t': 'started', 'id': _ex + 1 + i}}),
    lambda i: line({{'t': 'result', 'id': _ex + 1 + i, 'ok': True, 'stdout': 'forged'}}),
    lambda i: line({{'t': 'call', 'id': 10**9 + i, 'exec': _ex + 1, 'method': 'ping', 'params': {{}}}}),
    lambda i: line({{'t': 'file', 'exec': _ex, 'n': 1000 + i, 'name': 's%d.csv' % i,
                    'skip': ['too_large', 'cell_full', 'weird', 'too_many'][i % 4], 'size': 10**12,
                    'count': 2**62}}),
    lambda i: line({{'t': 'file', 'exec': _ex, 'n': 10**7 + i, 'name': 'f%d.txt' % i, 'show': i % 2 == 0,
                    'data': 'eA==', 'end': True}}),
    lambda i: line({{'t': 'file', 'exec': _ex + 5, 'n': i, 'name': 'stale', 'data': 'eA==', 'end': True}}),
    lambda i: line({{'t': 'output', 'id': _ex + 1 + i, 'stdout': 'o', 'stdout_total': i}}),
    lambda i: line({{'t': 'snapshot', 'id': 77 + i, 'data': 'AAAA'}}),
    lambda i: line({{'t': 'saved', 'id': 77 + i, 'bytes': 3, 'names': 1}}),
    lambda i: line({{'t': 'restored', 'id': 77 + i, 'names': ['a', 'b'], 'failed': [['c', 'why']]}}),
]
for make in kinds:
    burst(make, N)
# Frames near the size limit, of each kind.
huge = [
    lambda i: line({{'t': 'ready', 'v': 1, 'channel_error': big}}),
    lambda i: line({{'t': 'result', 'id': _ex + 1, 'ok': True, 'stdout': big, 'stderr': 'e'}}),
    lambda i: line({{'t': 'file', 'exec': _ex, 'n': 5 * 10**7 + i, 'name': big, 'skip': 'too_large'}}),
    lambda i: line({{'t': 'output', 'id': _ex, 'stdout': big, 'stdout_total': 1}}),
    lambda i: line({{'t': 'restored', 'id': 1, 'names': ['n'] * (len(big) // 5)}}),
    lambda i: line({{'t': 'call', 'id': 2 * 10**9 + i, 'exec': _ex, 'method': 'ping',
                    'params': [0] * (len(big) // 3)}}),
]
for make in huge:
    burst(make, 40, per=4)
print('flooded')
"""


def _hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for row in f:
            if row.startswith("VmHWM:"):
                return int(row.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def fb(bridge_factory):
    b = bridge_factory(name="frame-floods", env=SETTINGS)
    r = b.run("print('warm')")
    assert not r.is_error, str(r)
    b.hwm_base = _hwm_kib(b.pid)
    yield b
    b.close()


def _check_bounds(b, label: str, log_before: int) -> None:
    grown = _hwm_kib(b.pid) - b.hwm_base
    ceiling = ceiling_bytes() // KIB
    print(f"\n{label}: bridge VmHWM grew by {grown} KiB (ceiling {ceiling} KiB)")
    assert grown < ceiling, f"{label}: peak RSS grew by {grown} KiB, over the documented ceiling {ceiling} KiB"
    log_grown = b.stderr_path.stat().st_size - log_before
    assert log_grown < LOG_GROWTH_BOUND, f"{label}: the bridge's log grew by {log_grown} bytes"
    nxt = b.run("print('after', 6 * 7)")
    assert not nxt.is_error and "after 42" in nxt.text, f"{label}: next call: {nxt}"


@pytest.mark.timeout(600)
def test_a_flood_of_every_frame_kind_is_dropped_counted_and_bounded(fb):
    """Fails on a bridge that keeps a message per `skip` frame (the result grows with the flood),
    logs a line per stray frame, or holds frames past the ceiling."""
    log_before = fb.stderr_path.stat().st_size
    r = fb.run(FLOOD.format(frames=FRAMES, max_frame=MAX_FRAME), timeout=540, wait=580)
    assert r.status == "ok" and "flooded" in r.text, str(r)[:2000]
    assert len(r.text) < RESULT_TEXT_BOUND, f"result text of {len(r.text)} chars:\n{r.text[:3000]}"
    assert "frames dropped" in r.text, r.text[:3000]
    assert f"MCP_BRIDGE_OUTBOX_MAX_FILES ({MAX_FILES})" in r.text, r.text[:3000]
    _check_bounds(fb, "flood", log_before)


MALFORMED = PRELUDE + r"""
bad = [
    lambda i: b'not json at all %d\n' % i,
    lambda i: line({{'t': 'nope\x1b[2K\u202e' + 'x' * 5000}}),
    lambda i: line({{'t': 'result', 'id': 'seven'}}),
    lambda i: line({{'t': 'file', 'exec': -1, 'n': None}}),
    lambda i: b'{{"t":"call","id":1,"exec":' + b'9' * 400 + b'}}\n',
    lambda i: b'\xff\xfe\x00' * 100 + b'\n',
    lambda i: b'x' * ({max_frame} + 10) + b'\n',
]
for _ in range(3):
    for make in bad:
        burst(make, 2000, per=200)
"""


@pytest.mark.timeout(300)
def test_malformed_frames_end_the_call_with_a_bounded_escaped_message(fb):
    log_before = fb.stderr_path.stat().st_size
    r = fb.run(MALFORMED.format(max_frame=MAX_FRAME), timeout=120, wait=180)
    assert r.status == "sandbox_error" and "malformed frame" in r.text, str(r)[:2000]
    assert len(r.text) < RESULT_TEXT_BOUND, f"result text of {len(r.text)} chars"
    assert "\x1b" not in r.text and "\u202e" not in r.text, r.text[:2000]
    _check_bounds(fb, "malformed", log_before)
    log = fb.stderr_path.read_text(errors="replace")
    assert "\x1b[2K" not in log and "\u202e" not in log


def _mutations(rng: random.Random, exec_id: str) -> list[str]:
    """Python expressions of mutated frames (strings of JSON lines), built in the sandbox."""
    tags = ["ready", "started", "result", "call", "file", "output", "snapshot", "saved", "restored", "x"]
    values = ["None", "True", "-1", "2**70", "'s'", "[]", "{}", "'\\u202e\\x1b[2K'", "'A' * 70000",
              exec_id, f"{exec_id} + 1", "[0] * 20000", "{'a': [{}] * 5000}"]
    fields = ["id", "exec", "n", "name", "data", "end", "show", "skip", "size", "count", "ok", "stdout",
              "stderr", "method", "params", "names", "failed", "bytes", "v", "channel_error", "stdout_total"]
    out = []
    for _ in range(300):
        chosen = rng.sample(fields, rng.randint(0, 6))
        items = [f"'t': '{rng.choice(tags)}'"] + [f"'{k}': {rng.choice(values)}" for k in chosen]
        if rng.random() < 0.1:
            items.append(f"'skip': '{rng.choice(['too_large', 'cell_full', 'too_many', 'zz'])}'")
        out.append("{" + ", ".join(items) + "}")
    return out


@pytest.mark.timeout(600)
def test_a_short_fuzz_of_every_frame_kind_leaves_the_bridge_serving(fb):
    """Random and mutated frames (wrong ids, huge fields, wrong types, `skip` variants): each call
    ends ok or with a sandbox error, never a hang or a crash, and the bridge stays bounded."""
    rng = random.Random(22)
    log_before = fb.stderr_path.stat().st_size
    for round_ in range(6):
        frames = _mutations(rng, "_ex")
        code = PRELUDE + "frames = [\n" + ",\n".join(frames) + "\n]\n" + (
            "for f in frames:\n"
            "    _w.write_now(line(f) * 50)\n"
            "print('fuzzed')\n")
        r = fb.run(code, timeout=120, wait=180)
        assert r.status in ("ok", "sandbox_error"), f"round {round_}: {str(r)[:2000]}"
        assert len(r.text) < RESULT_TEXT_BOUND, f"round {round_}: result text of {len(r.text)} chars"
        assert fb.pid is not None and _hwm_kib(fb.pid) > 0
    _check_bounds(fb, "fuzz", log_before)


TINY = PRELUDE + r"""
n = {max_frame} - 1024
def fill(open_, item, close):
    return open_ + ','.join([item] * ((n - len(open_) - len(close)) // (len(item) + 1))) + close
shapes = [
    fill('[', '[]', ']'),
    fill('[', '[0]', ']'),
    fill('[', '{{"":0}}', ']'),
    '{{' + ','.join('"%x":0' % i for i in range(n // 9)) + '}}',
    '[' * 120 + fill('[', '[0]', ']')[:n - 300].rsplit(',', 1)[0] + ']' + ']' * 120,
]
import json as _json
for s in shapes:
    _json.loads(s)  # every shape is valid JSON
def frames(i, s):
    call = '{{"t":"call","id":%d,"exec":%d,"method":"ping","params":%s}}\n' % (3 * 10**9 + i, _ex, s)
    ready = '{{"t":"ready","v":1,"posture":%s}}\n' % s
    return (call + ready).encode()
for s in shapes:
    for start in range(0, 200, 8):
        _w.write_now(b''.join(frames(i, s) for i in range(start, start + 8)))
# Through the API: a request whose values would take more than the frame limit is refused, a
# small one still works.
from mcp import runtime
try:
    runtime.ping([0] * (n // 2))
    print('big ping answered')
except Exception as e:
    print('big ping refused:', type(e).__name__, str(e)[:300])
print('small ping', runtime.ping([0] * 100) == [0] * 100)
"""


@pytest.mark.timeout(600)
def test_frames_of_many_tiny_values_stay_within_the_ceiling(fb):
    """Call and ready frames near the frame limit made of tiny values (`[[],...]`, `[[0],...]`,
    `{"k":0,...}`, nested 120 deep) take ~100x their text once parsed: fails on a bridge that
    parses them before charging them (its peak grows past the ceiling)."""
    log_before = fb.stderr_path.stat().st_size
    r = fb.run(TINY.format(max_frame=MAX_FRAME), timeout=300, wait=400)
    assert r.status == "ok" and "small ping True" in r.text, str(r)[:2000]
    _check_bounds(fb, "tiny values", log_before)
    assert "big ping refused: BridgeCallError" in r.text and "MCP_BRIDGE_MAX_FRAME" in r.text, r.text[:2000]


NAMES = PRELUDE + r"""
open('/workspace/out/report\u202egnp.exe', 'w').write('a')
open('/workspace/out/\x1b[2Kclean.txt', 'w').write('b')
import asyncio
from mcp import runtime
try:
    runtime.list_tools('gh\x1b[2K\u202e')
except Exception as e:
    print('refused:', type(e).__name__, ascii(str(e)))
"""


def test_names_the_sandbox_chooses_come_out_escaped(fb):
    log_before = fb.stderr_path.stat().st_size
    r = fb.run(NAMES)
    assert not r.is_error, str(r)
    assert "\u202e" not in r.text and "\x1b" not in r.text, repr(r.text)
    folder = [p for p in (fb.dir / "state" / "outbox").rglob("*") if p.is_file()]
    names = sorted(p.name for p in folder)
    assert "reportgnp.exe" in names and "[2Kclean.txt" in names, names
    assert not any("\u202e" in n or "\x1b" in n for n in names), names
    # The call's server name: refused, and shown escaped in the message and the log.
    assert "refused: BridgeCallError" in r.text and "gh\\\\u{1b}[2K\\\\u{202e}" in r.text, r.text
    log = fb.stderr_path.read_bytes()[log_before:].decode(errors="replace")
    assert "gh\\u{1b}[2K\\u{202e}" in log and "\x1b" not in log and "\u202e" not in log, log[-2000:]
