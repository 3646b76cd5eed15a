"""Output floods (GUIDE.md, "Output"; benches/RESULTS.md, "Output floods"): sandbox code writing ~1 GiB cannot grow the bridge's memory.

Three kinds of flood run as separate calls of one bridge:

(a) `print` in a loop: 1 GiB through the entrypoint's capture, which keeps the head and tail of
    the output budget and counts the rest; the host only sees one bounded result frame.
(b) `os.write(1, ...)` and `sys.__stdout__.write(...)`: 1 GiB of 1 KiB lines below the capture.
    The entrypoint points fd 1 at fd 2, so every byte crosses the engine's attach stream as
    container stderr and goes through the bridge's stderr line assembler (lines of at most
    STDERR_LINE_MAX bytes, a tail of STDERR_TAIL_LINES kept for crash reports).
(c) One enormous line on fd 2 with no newline at all: the assembler's too-long path, which must
    drop the line's bytes as they come instead of buffering them. 256 MiB rather than 1 GiB, to
    keep this module under two minutes on a loaded 2-CPU machine: podman's API service, which
    relays the attach stream, and the debug bridge moved only 20-80 MiB/s here (1 GiB for all
    three took 2m11s under load); the bench (`cargo bench --bench bridge -- flood`) runs all
    three at 1 GiB on the release binary.

For each: the call returns ok, its result text is bounded, the next call works, and the bridge's
peak RSS (VmHWM) stays under RSS_PEAK_BOUND_MIB and grew by less than RSS_GROWTH_BOUND_MIB over
the flood. For (b) and (c) the flood is shown to have reached the bridge: the engine process that
relays the attach stream (the bridge's own podman service, or dockerd) wrote at least that many
bytes (/proc/<pid>/io wchar; the bridge's own rchar does not count socket recv). Since the result
comes over the frame channel and can overtake the end of the flood, the peak is read once the
relay has passed the whole flood on, and again after a probe that crashes the sandbox, whose death
report's stderr tail must end with the flood's last line (b) or the long line's cut marker (c):
by then the bridge has read everything. Figures print with -s.
"""
from __future__ import annotations

import os
import re
import time

import pytest
from helpers_host import poll, processes

pytestmark = pytest.mark.engine  # floods through the container's stdout/stderr and the engine's streams

MIB = 1 << 20
GIB = 1 << 30
PRINT_BYTES = GIB  # (a)
FD1_BYTES = GIB  # (b)
LONG_LINE_BYTES = 256 * MIB  # (c), see the module docstring
OUTPUT_LIMIT = 65_536  # MCP_BRIDGE_MAX_OUTPUT's default, characters per stream

# Measured (debug build, podman 4.3): VmHWM ~24 MiB before and after every flood, growth < 1 MiB.
RSS_PEAK_BOUND_MIB = 100
# A regression that buffered a stderr line up to MCP_BRIDGE_MAX_FRAME (64 MiB) would pass the
# absolute bound in a 24 MiB process; this one catches it.
RSS_GROWTH_BOUND_MIB = 32
RESULT_TEXT_BOUND = 2 * OUTPUT_LIMIT + 4096  # stdout and stderr budgets plus markers
CALL_TIMEOUT = 300  # seconds; the bridge's MCP_BRIDGE_MAX_TIMEOUT is raised to allow it

STDERR_LINE_CUT = "[a very long stderr line was cut]"  # src/bridge/reader.rs


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _wchar(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _relay_pids(bridge_pid: int, engine: str | None) -> list[int]:
    """The engine process that relays the sandbox's attach stream to the bridge: the podman
    service this bridge started (else any `podman system service`), or dockerd."""
    own, services, dockerd = [], [], []
    for pid, argv in processes():
        if not argv or not argv[0]:
            continue
        exe = os.path.basename(argv[0])
        if exe == b"dockerd":
            dockerd.append(pid)
        elif exe == b"podman" and b"system" in argv and b"service" in argv:
            if any(f"podman-{bridge_pid}.".encode() in a for a in argv):
                own.append(pid)
            else:
                services.append(pid)
    if engine == "docker":
        return dockerd
    return own or services


def _relay_written(pids: list[int]) -> int | None:
    counts = [w for w in (_wchar(p) for p in pids) if w is not None]
    return sum(counts) if counts else None


@pytest.fixture(scope="module")
def flood_bridge(bridge_factory):
    b = bridge_factory(name="floods", env={"MCP_BRIDGE_MAX_TIMEOUT": str(CALL_TIMEOUT)})
    r = b.run("print('warm')")
    assert not r.is_error and r.text.strip() == "warm", str(r)
    yield b
    b.close()


class Measured:
    """One flood call with the bridge's memory and the relay's bytes around it."""

    def __init__(self, bridge, engine: str | None, label: str, code: str, relayed: int = 0):
        self.bridge, self.label, self.expected = bridge, label, relayed
        pid = bridge.pid
        relays = _relay_pids(pid, engine)
        self.hwm_before = _status_kib(pid, "VmHWM")
        relayed_before = _relay_written(relays)
        log_before = bridge.stderr_path.stat().st_size
        t0 = time.monotonic()
        self.result = bridge.run(code, timeout=CALL_TIMEOUT, wait=CALL_TIMEOUT + 30)
        self.seconds = time.monotonic() - t0
        # The result comes over the frame channel and can overtake the end of the flood on the
        # attach stream: measure once the relay has passed it all on (or after a while).
        self.relayed = None
        if relayed_before is not None:
            def passed_on() -> bool:
                now = _relay_written(relays)
                self.relayed = None if now is None else now - relayed_before
                return self.relayed is None or self.relayed >= relayed

            poll(passed_on, timeout=30, interval=0.1)
        self.hwm_after = _status_kib(pid, "VmHWM")
        self.rss_after = _status_kib(pid, "VmRSS")
        self.log_grown = bridge.stderr_path.stat().st_size - log_before
        shown = "n/a" if self.relayed is None else f"{self.relayed / MIB:.0f} MiB"
        print(f"\nflood {label}: {self.seconds:.2f} s; bridge VmHWM {self.hwm_before / 1024:.1f} -> "
              f"{self.hwm_after / 1024:.1f} MiB, VmRSS {self.rss_after / 1024:.1f} MiB; relayed by the engine "
              f"{shown}; result text {len(self.result.text)} chars")

    def check_peak(self, when: str = "") -> None:
        hwm = _status_kib(self.bridge.pid, "VmHWM")
        assert hwm < RSS_PEAK_BOUND_MIB * 1024, (
            f"{self.label}: bridge peak RSS {hwm} KiB >= {RSS_PEAK_BOUND_MIB} MiB{when}")
        grown = hwm - self.hwm_before
        assert grown < RSS_GROWTH_BOUND_MIB * 1024, (
            f"{self.label}: bridge peak RSS grew by {grown} KiB over the flood{when} (bound {RSS_GROWTH_BOUND_MIB} MiB)")

    def check_common(self) -> None:
        r = self.result
        assert r.status == "ok" and not r.is_error, str(r)
        assert len(r.text) < RESULT_TEXT_BOUND, f"{self.label}: result text of {len(r.text)} chars"
        self.check_peak()
        # The host logs sandbox stderr at debug level only; at info its own log must not grow with it.
        assert self.log_grown < MIB, f"{self.label}: the bridge's stderr log grew by {self.log_grown} bytes"
        # The flood crossed the attach stream to the bridge (when the relay's counters are readable).
        if self.relayed is not None:
            assert self.relayed >= self.expected, (
                f"{self.label}: the engine relayed only {self.relayed} bytes of a {self.expected}-byte flood; "
                "the flood did not reach the bridge, so its memory was not tested")
        nxt = self.bridge.run("print('after', 6 * 7)")
        assert nxt.status == "ok" and _stdout(nxt) == "after 42", f"{self.label}: next call: {nxt}"


def _stdout(r) -> str:
    """The run's stdout (without the notices the text may start with)."""
    return ((r.structured or {}).get("stdout") or "").strip()


def _crash_tail(bridge, marker: str) -> list[str]:
    """Writes `marker` as a fresh stderr line and ends the sandbox; returns the stderr tail of the
    death report (what the bridge's stderr reader kept) up to `marker`."""
    r = bridge.run(
        "import os, time\n"
        "time.sleep(0.1)\n"  # after the `started` ack on either channel: no silent retry
        f"os.write(2, b'\\n{marker}\\n')\n"
        "os._exit(3)\n",
        timeout=60,
    )
    assert r.status == "sandbox_error" and "exit" in r.text.lower(), str(r)
    _, sep, tail = r.text.partition("sandbox stderr (last lines):\n")
    assert sep, f"no stderr tail in the death report: {r}"
    lines = [line for line in tail.splitlines() if line]  # the probe's leading newline may add one
    assert marker in lines, f"{marker!r} is not in the stderr tail: {[line[:80] for line in lines]}"
    return lines[: lines.index(marker) + 1]


@pytest.mark.timeout(CALL_TIMEOUT + 120)
def test_print_storm_is_cut_by_the_capture(flood_bridge, helpers):
    """(a) 1 GiB of print(): 1 MiB strings, 1024 times. Fails if the capture stopped cutting (the
    text would lack the marker, or a 1 GiB result frame would be refused as oversized) or if the
    bridge held the output."""
    line = MIB - 1  # + print's newline = 1 MiB per call
    n = PRINT_BYTES // MIB
    m = Measured(flood_bridge, helpers.engine, "(a) print 1 GiB",
                 f"s = 'x' * {line}\nfor _ in range({n}):\n    print(s)\n")
    m.check_common()
    marker = re.compile(r"\n\[\.\.\. (\d+) characters cut here by the output limit \(MCP_BRIDGE_MAX_OUTPUT\) \.\.\.\]\n")
    out = (m.result.structured or {}).get("stdout") or ""
    cuts = marker.findall(out)
    assert len(cuts) == 1, f"wanted one cut marker in the result: {m.result}"
    assert int(cuts[0]) == PRINT_BYTES - OUTPUT_LIMIT, (
        f"the capture counted {cuts[0]} dropped characters of a {PRINT_BYTES}-character storm")
    kept = marker.sub("", out)
    assert set(kept) <= {"x", "\n"} and len(kept) <= OUTPUT_LIMIT, f"kept {len(kept)} chars: {kept[:100]!r}"


@pytest.mark.timeout(CALL_TIMEOUT + 120)
def test_fd1_storm_below_the_capture(flood_bridge, helpers):
    """(b) 1 GiB of 1 KiB lines: half with os.write(1, ...), half with sys.__stdout__.write().
    Fails if the stderr reader kept lines (the peak grows by the flood) or the bridge stopped
    reading its sandbox's stderr (the relay count stays low, the last line never arrives)."""
    n = FD1_BYTES // MIB
    code = (
        "import os, sys\n"
        "chunk = (b'y' * 1023 + b'\\n') * 1024\n"  # 1 MiB of 1 KiB lines
        "def put(fd, data):\n"
        "    view = memoryview(data)\n"
        "    while view:\n"
        "        view = view[os.write(fd, view):]\n"
        f"for _ in range({n // 2}):\n"
        "    put(1, chunk)\n"
        "text = chunk.decode()\n"
        f"for _ in range({n - n // 2}):\n"
        "    sys.__stdout__.write(text)\n"
        "sys.__stdout__.flush()\n"
        "put(1, b'flood-b-end\\n')\n"
        "print('flooded')\n"
    )
    m = Measured(flood_bridge, helpers.engine, "(b) os.write(1)/sys.__stdout__ 1 GiB", code, relayed=FD1_BYTES)
    m.check_common()
    assert _stdout(m.result) == "flooded", str(m.result)  # nothing of the flood in the result
    lines = _crash_tail(flood_bridge, "probe-after-b")
    m.check_peak(" (after the probe: the whole flood was read)")
    assert lines[-2] == "flood-b-end", f"the flood's last line did not reach the bridge: {lines[-3:]}"
    assert all(len(line) <= 2000 for line in lines), "a stderr tail line is longer than STDERR_LINE_MAX"
    nxt = flood_bridge.run("print('replaced')")
    assert nxt.status == "ok" and _stdout(nxt) == "replaced", str(nxt)


@pytest.mark.timeout(CALL_TIMEOUT + 120)
def test_one_enormous_line_on_fd2(flood_bridge, helpers):
    """(c) 256 MiB on fd 2 with no newline. Fails if the line assembler buffered an overlong
    line (the peak grows by the line) or stopped recovering at its end (no cut marker and probe
    line in the tail)."""
    n = LONG_LINE_BYTES // MIB
    code = (
        "import os\n"
        f"chunk = b'z' * {MIB}\n"
        f"for _ in range({n}):\n"
        "    view = memoryview(chunk)\n"
        "    while view:\n"
        "        view = view[os.write(2, view):]\n"
        "print('flooded')\n"
    )
    m = Measured(flood_bridge, helpers.engine, f"(c) one {n} MiB line on fd 2", code, relayed=LONG_LINE_BYTES)
    m.check_common()
    assert _stdout(m.result) == "flooded", str(m.result)
    lines = _crash_tail(flood_bridge, "probe-after-c")
    m.check_peak(" (after the probe: the whole line was read)")
    assert lines[-2] == STDERR_LINE_CUT, f"the long line was not reported as cut: {[line[:80] for line in lines[-3:]]}"
    assert all(len(line) <= 2000 for line in lines), "a stderr tail line is longer than STDERR_LINE_MAX"
    nxt = flood_bridge.run("print('replaced')")
    assert nxt.status == "ok" and _stdout(nxt) == "replaced", str(nxt)


@pytest.mark.timeout(CALL_TIMEOUT + 120)
def test_a_line_on_the_containers_own_stdout_is_not_buffered_as_a_frame(flood_bridge, helpers):
    """(d) Once frames use the socket channel, the container's real stdout (the entrypoint still
    holds a private copy, which sandbox code can find in /proc/self/fd) carries no frames. A
    48 MiB line written there must be treated like stray stderr (cut, bounded), not buffered up
    to MCP_BRIDGE_MAX_FRAME (64 MiB) as a would-be frame: fails on the growth bound if it is."""
    code = (
        "import fcntl, os, stat\n"
        "err = os.readlink('/proc/self/fd/2')\n"
        "outs = []\n"
        "for name in os.listdir('/proc/self/fd'):\n"
        "    fd = int(name)\n"
        "    try:\n"
        "        link, st, fl = os.readlink('/proc/self/fd/%d' % fd), os.fstat(fd), fcntl.fcntl(fd, fcntl.F_GETFL)\n"
        "    except OSError:\n"
        "        continue\n"
        "    if (stat.S_ISFIFO(st.st_mode) and fl & os.O_ACCMODE == os.O_WRONLY and link != err\n"
        "            and not fl & os.O_NONBLOCK):\n"
        "        outs.append(fd)\n"
        f"chunk = b'w' * {MIB}\n"
        "for fd in outs:\n"
        "    for _ in range(48):\n"
        "        view = memoryview(chunk)\n"
        "        while view:\n"
        "            view = view[os.write(fd, view):]\n"
        "    os.write(fd, b'\\n')\n"
        "print('stdout fds', len(outs))\n"
    )
    m = Measured(flood_bridge, helpers.engine, "(d) 48 MiB line on the container's stdout", code)
    m.check_common()
    assert _stdout(m.result) == "stdout fds 1", f"expected to find the container's stdout: {m.result}"
    lines = _crash_tail(flood_bridge, "probe-after-d")
    m.check_peak(" (after the probe: the whole line was read)")
    assert STDERR_LINE_CUT in lines, f"the line was not reported as cut: {[line[:80] for line in lines[-3:]]}"
    nxt = flood_bridge.run("print('replaced')")
    assert nxt.status == "ok" and _stdout(nxt) == "replaced", str(nxt)
