"""confine: the seccomp filter (no unix socket by path) and the Landlock write rule, each
installed in a child process (they cannot be undone) and probed there."""
import json
import os
import platform
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest

from entrypoint import confine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _child(code):
    """Runs `code` in a fresh interpreter that can import the entrypoint; its last stdout line
    as JSON."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


PROBES = """
import errno, json, os, socket
def attempt(fn):
    try:
        fn()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def pair(kind):
    for s in socket.socketpair(socket.AF_UNIX, kind):
        s.close()
"""


class FilterProgramTest(unittest.TestCase):
    def test_known_machines_get_a_whole_program(self):
        for machine in ("x86_64", "aarch64"):
            prog = confine.filter_program(machine)
            self.assertEqual(len(prog) % 8, 0)
            ops = [struct.unpack("<HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
            # it starts by checking the architecture, and every jump lands inside the program
            self.assertEqual(ops[0][3], 4)
            for at, (op, jt, jf, _) in enumerate(ops):
                if op & 0x07 == 0x05:
                    self.assertLess(at + 1 + max(jt, jf), len(ops))
        x86 = confine.filter_program("x86_64")
        self.assertIn(struct.pack("<I", 0x40000000), x86)  # the x32 ABI is refused
        self.assertIsNone(confine.filter_program("mips"))

    def test_an_unknown_machine_is_reported_not_installed(self):
        out = _child("""
            from entrypoint import confine
            import json
            print(json.dumps([confine.install_socket_filter("mips"), confine.state["why"]]))
        """)
        self.assertEqual(out[0], False)
        self.assertIn("mips", out[1][0])


@unittest.skipUnless(platform.machine() in ("x86_64", "aarch64"), "no filter for this machine")
class SocketFilterTest(unittest.TestCase):
    def test_unix_sockets_are_refused_and_stream_pairs_kept(self):
        out = _child(PROBES + """
            from entrypoint import confine
            before = confine.unix_sockets_blocked()
            ok = confine.install_socket_filter()
            import subprocess, sys
            child = subprocess.run([sys.executable, "-c",
                                    "import socket; socket.socket(socket.AF_UNIX)"],
                                   capture_output=True, text=True).stderr
            print(json.dumps({
                "before": before, "ok": ok, "after": confine.unix_sockets_blocked(),
                "unix": attempt(lambda: socket.socket(socket.AF_UNIX).close()),
                "unix_nonblock": attempt(lambda: socket.socket(
                    socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK).close()),
                "pair_stream": attempt(lambda: pair(socket.SOCK_STREAM)),
                "pair_dgram": attempt(lambda: pair(socket.SOCK_DGRAM)),
                "pair_seqpacket": attempt(lambda: pair(socket.SOCK_SEQPACKET)),
                "inet": attempt(lambda: socket.socket().close()),
                "child": "PermissionError" in child,
            }))
        """.replace("\n            ", "\n"))
        self.assertEqual(out.pop("before"), False)
        self.assertEqual(out, {"ok": True, "after": True, "unix": "EPERM",
                               "unix_nonblock": "EPERM", "pair_stream": "allowed",
                               "pair_dgram": "EPERM", "pair_seqpacket": "EPERM",
                               "inet": "allowed", "child": True})


class WriteRuleTest(unittest.TestCase):
    def test_writes_outside_scratch_are_refused_fifos_included(self):
        with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as shared:
            fifo = os.path.join(shared, "pipe")
            os.mkfifo(fifo, 0o666)
            reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            try:
                out = _child(PROBES + """
                    from entrypoint import confine
                    ok = confine.install_write_rule(scratch=(%r,))
                    print(json.dumps({
                        "ok": ok, "why": confine.state["why"],
                        "scratch": attempt(lambda: open(%r + "/f", "w").close()),
                        "shared": attempt(lambda: open(%r + "/f", "w").close()),
                        "fifo": attempt(lambda: os.close(
                            os.open(%r, os.O_WRONLY | os.O_NONBLOCK))),
                        "read": attempt(lambda: open(%r).close()),
                    }))
                """.replace("\n                    ", "\n") % (scratch, scratch, shared, fifo,
                                                               "/etc/hostname"))
            finally:
                os.close(reader)
        if out["ok"] is False and any("landlock:" in w for w in out["why"]):
            self.skipTest("Landlock is not available here: %s" % out["why"])
        self.assertEqual(out["ok"], True, out)
        self.assertEqual((out["scratch"], out["shared"], out["fifo"]),
                         ("allowed", "EACCES", "EACCES"), out)
        self.assertIn(out["read"], ("allowed", "ENOENT"), "reading stays allowed")

    def test_it_is_refused_once_other_threads_run(self):
        out = _child("""
            import json, threading, time
            from entrypoint import confine
            threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
            print(json.dumps([confine.install_write_rule(scratch=("/tmp",)),
                              confine.state["why"]]))
        """)
        self.assertEqual(out[0], False)
        self.assertIn("other threads", out[1][0])


if __name__ == "__main__":
    unittest.main()
