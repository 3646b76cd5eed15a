"""An interrupted exec's processes are killed (cellprocs.py); other processes are left alone.

Every process these tests signal or look for is one they started themselves (directly, or
through the sandbox code they run): the sandbox here is a plain local process, and /proc shows
every process on the machine."""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

from entrypoint import cellprocs
from entrypoint.runner import ExecState
from entrypoint.tests import Sandbox
from entrypoint.tests.cell_scripts import START_ALL, START_HELPER

START_ALL = 'cp_kept = "survived"\n' + START_ALL

# Cell 3: what is still alive, read from /proc inside the sandbox.
REPORT = """
print(json.dumps([cp_alive(cp_pids, cp_starts), cp_alive({"helper": cp_helper.pid},
                  cp_helper_start), cp_kept], sort_keys=True))
"""

STOP_HELPER = "cp_helper.kill()\ncp_helper.wait()\nprint('stopped')"

KINDS = {"busy", "session", "parent", "grandchild", "daemon"}


def start_tick(pid):
    """`pid`'s start time in clock ticks, None once it is gone or a zombie."""
    stat = cellprocs._stat(pid)
    return None if stat is None or stat[0] in (b"Z", b"X") else stat[2]


def wait_gone(pid, start, timeout):
    deadline = time.monotonic() + timeout
    while start_tick(pid) == start:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class InterruptedCellTest(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()
        self.sb.boot()
        self.leftovers = {}  # pid -> start tick of processes this test started, for cleanup

    def tearDown(self):
        for pid, start in self.leftovers.items():  # only what this test started, if still there
            cellprocs.kill(pid, start)  # (they hold the sandbox's stderr open)
        self.sb.close()

    def assert_ok(self, result, stdout=None):
        self.assertTrue(result["ok"], result["error"])
        if stdout is not None:
            self.assertEqual(result["stdout"], stdout)

    def interrupt_when_started(self, code):
        """Run `code` + a ping telling the pids + a long sleep; interrupt it once it pinged.
        Returns (the ping's value, the result)."""
        exec_id = self.sb.start_exec(
            code + "from mcp import runtime\n"
            "runtime.ping_sync({k: [p, cp_start(p)] for k, p in cp_pids.items()})\n"
            "time.sleep(100)\n")
        call = self.sb.recv()
        self.assertEqual(call["t"], "call", call)
        self.sb.send({"t": "reply", "id": call["id"], "ok": True, "value": call["params"]})
        pids = call["params"]["value"]
        for pid, start in pids.values():
            self.leftovers[pid] = start
        time.sleep(0.1)
        self.sb.send({"t": "interrupt", "id": exec_id})
        return pids, self.sb.wait_result(exec_id, timeout=10)

    def start_helper(self):
        self.assert_ok(self.sb.run(START_HELPER))
        helper = self.sb.run("print(cp_helper.pid, cp_helper_start['helper'])")["stdout"].split()
        self.leftovers[int(helper[0])] = int(helper[1])

    def test_an_interrupt_kills_every_process_the_exec_started_and_no_other(self):
        self.start_helper()
        pids, result = self.interrupt_when_started(START_ALL)
        self.assertTrue(result["interrupted"], result)
        self.assertEqual(set(pids), KINDS)
        for kind, (pid, start) in pids.items():  # seen from outside the sandbox too
            self.assertTrue(wait_gone(pid, start, 2.0), f"{kind} {pid} survived")
        report = self.sb.run(REPORT)
        self.assert_ok(report, '[{"busy": false, "daemon": false, "grandchild": false, '
                               '"parent": false, "session": false}, {"helper": true}, '
                               '"survived"]\n')
        self.assert_ok(self.sb.run(STOP_HELPER), "stopped\n")

    def test_processes_of_cells_that_end_or_raise_are_left_alone(self):
        self.start_helper()
        result = self.sb.run(START_ALL + "raise ValueError('cell failed')")
        self.assertFalse(result["ok"])
        self.assertFalse(result["interrupted"])
        pids = self.sb.run("print(json.dumps({k: [p, cp_starts[k]] for k, p in cp_pids.items()}))")
        for pid, start in json.loads(pids["stdout"]).values():
            self.leftovers[pid] = start
        time.sleep(0.2)
        self.assert_ok(self.sb.run(REPORT), '[{"busy": true, "daemon": true, "grandchild": true, '
                                            '"parent": true, "session": true}, {"helper": true}, '
                                            '"survived"]\n')
        self.assert_ok(self.sb.run(STOP_HELPER), "stopped\n")

    def test_processes_die_while_the_main_thread_ignores_the_interrupt(self):
        self.start_helper()
        exec_id = self.sb.start_exec(
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "cp_busy = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
            "from mcp import runtime\n"
            "runtime.ping_sync([cp_busy.pid, cp_start(cp_busy.pid)])\n"
            "while True:\n    time.sleep(0.01)\n")
        call = self.sb.recv()
        self.sb.send({"t": "reply", "id": call["id"], "ok": True, "value": call["params"]})
        pid, start = call["params"]["value"]
        self.leftovers[pid] = start
        time.sleep(0.1)
        self.sb.send({"t": "interrupt", "id": exec_id})
        self.assertTrue(wait_gone(pid, start, 2.0), "the busy child survived the interrupt")
        self.assertTrue(self.sb.frames.empty(), "the exec should still be running")


class CellProcessesTest(unittest.TestCase):
    """cellprocs against children of this very test process (the root): each test starts its
    own and compares only those."""

    def setUp(self):
        self.started = []

    def tearDown(self):
        for proc in self.started:
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()

    def popen(self, code, **kw):
        proc = subprocess.Popen([sys.executable, "-c", code], **kw)
        self.started.append(proc)
        return proc

    def test_kill_checks_the_start_time(self):
        proc = self.popen("import time; time.sleep(60)")
        start = start_tick(proc.pid)
        self.assertFalse(cellprocs.kill(proc.pid, start - 1))  # a reused pid: not ours
        self.assertIsNone(proc.poll())
        self.assertTrue(cellprocs.kill(proc.pid, start))
        self.assertEqual(proc.wait(5), -signal.SIGKILL)

    def test_found_processes_are_new_and_reached_through_new_ones_only(self):
        older = self.popen("import subprocess, sys, time\nsys.stdin.readline()\n"
                           "p = subprocess.Popen([sys.executable, '-c', 'import time; "
                           "time.sleep(60)'])\nprint(p.pid, flush=True)\np.wait()",
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        time.sleep(0.05)
        since = cellprocs.boottime()
        newer = self.popen("import time; time.sleep(60)")
        older.stdin.write(b"go\n")
        older.stdin.flush()
        grandchild = int(older.stdout.readline())
        grandchild_start = start_tick(grandchild)
        try:
            found = cellprocs.started_since((os.getpid(),), int(since * cellprocs.CLK_TCK))
            self.assertIn(newer.pid, found)
            self.assertNotIn(older.pid, found)
            self.assertNotIn(grandchild, found)  # new, but below an older process: its own
        finally:
            cellprocs.kill(grandchild, grandchild_start)

    def test_sweep_kills_a_chain(self):
        since = cellprocs.boottime()
        chain = self.popen(  # child -> grandchild -> great-grandchild
            "import subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import subprocess, sys, time\\n"
            "q = subprocess.Popen([sys.executable, \"-c\", \"while True: pass\"])\\n"
            "print(q.pid, flush=True)\\ntime.sleep(60)'], stdout=subprocess.PIPE)\n"
            "print(p.pid, p.stdout.readline().decode().strip(), flush=True)\n"
            "import time\ntime.sleep(60)", stdout=subprocess.PIPE)
        pids = [chain.pid] + [int(p) for p in chain.stdout.readline().split()]
        starts = [start_tick(p) for p in pids]
        try:
            killed = cellprocs.CellProcesses().sweep(since)
            self.assertEqual(killed, 3)
            self.assertEqual(chain.wait(5), -signal.SIGKILL)
            for pid, start in zip(pids, starts, strict=True):
                self.assertTrue(wait_gone(pid, start, 2.0), pid)
        finally:
            for pid, start in zip(pids, starts, strict=True):
                cellprocs.kill(pid, start)


class InterruptOrderTest(unittest.TestCase):
    """The sweep is asked for before the interrupt's signal goes out: the main thread may unwind
    and reach `sweep_after` before the reader thread runs another line (seen once in CI, on a
    busy machine: every process of the timed-out cell survived)."""

    class Procs:
        def __init__(self):
            self.sweeps = []  # (since, in the background?)

        def sweep(self, since, still=None):
            self.sweeps.append((since, False))
            return 0

        def sweep_soon(self, since, still):
            if still():
                self.sweeps.append((since, True))

    def test_a_main_thread_that_unwinds_at_once_still_sweeps(self):
        procs = self.Procs()
        state = ExecState(procs)
        state.begin(7)
        real_kill = signal.pthread_kill

        def main_thread_wins(_ident, _sig):
            # what the main thread does when it gets the GIL first: the exec is over
            state.running = None
            state.sweep_after(7)

        signal.pthread_kill = main_thread_wins
        try:
            self.assertTrue(state.request_interrupt(7, 0))
        finally:
            signal.pthread_kill = real_kill
        self.assertIn((state.began, False), procs.sweeps, "sweep_after skipped the sweep")


if __name__ == "__main__":
    unittest.main()
