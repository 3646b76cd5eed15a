"""Tests of the sandbox entrypoint (stdlib unittest). Run from the repository root:

    python3 -m unittest discover -s entrypoint/tests -t .

This module holds the shared harness: `Sandbox` spawns the real bootstrap
(`python3 -I -c <boot.py>`), sends the boot frame the way the Rust host does (every *.py directly
in entrypoint/ except boot.py) and talks frames over the child's stdin/stdout."""
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading

ENTRYPOINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "_mcp_bridge"


def boot_source():
    with open(os.path.join(ENTRYPOINT_DIR, "boot.py"), encoding="utf-8") as f:
        return f.read()


def entrypoint_files():
    """The boot frame's `files`, as the bridge ships them (sandbox/entrypoint.rs): every *.py
    directly in entrypoint/ but boot.py, and every js/*.js under its `js/` name."""
    files = {}
    js_dir = os.path.join(ENTRYPOINT_DIR, "js")
    for folder, prefix, suffix in ((ENTRYPOINT_DIR, "", ".py"), (js_dir, "js/", ".js")):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if name.endswith(suffix) and name != "boot.py" and os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    files[prefix + name] = f.read()
    return files


def encode(frame):
    return (json.dumps(frame, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def echo_host(sandbox, call):
    """Default fake host: answer `ping` by echoing params, anything else with an error."""
    if call["method"] == "ping":
        sandbox.send({"t": "reply", "id": call["id"], "ok": True, "value": call["params"]})
    else:
        sandbox.send({"t": "reply", "id": call["id"], "ok": False,
                      "error": "unknown method %r" % call["method"]})


class Sandbox:
    """One entrypoint process, driven like the host drives the container."""

    def __init__(self):
        self.outbox = tempfile.TemporaryDirectory(prefix="outbox-")  # /workspace/out's stand-in
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", boot_source()], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={"HOME": "/tmp", "PATH": "/usr/bin:/bin",
                 "MCP_BRIDGE_OUTBOX": os.path.join(self.outbox.name, "out")})
        self.file_frames = []  # `file` frames seen (recv sets them aside)
        self.frames = queue.Queue()
        self.raw_lines = []
        self.started = []  # exec ids of the `started` frames seen (recv skips them by default)
        self.stderr_chunks = []
        self._next_id = 0
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.raw_lines.append(line)
            try:
                self.frames.put(json.loads(line.decode("utf-8")))
            except ValueError:
                self.frames.put({"t": "<garbage>", "line": line})
        self.frames.put(None)

    def _read_stderr(self):
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):
            self.stderr_chunks.append(chunk)

    @property
    def stderr(self):
        return b"".join(self.stderr_chunks).decode("utf-8", "replace")

    def boot(self, files=None, channel=None):
        frame = {"t": "boot", "v": 1, "package": PACKAGE,
                 "files": entrypoint_files() if files is None else files}
        if channel is not None:
            frame["channel"] = channel
        self.send(frame)
        if channel is not None:
            return None  # `ready` comes on the socket, or on stdout when it fails: caller reads
        ready = self.recv()
        assert ready["t"] == "ready", ready
        return ready

    def send(self, frame):
        self.send_raw(encode(frame))

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, timeout=20.0, skip_started=True):
        while True:
            try:
                frame = self.frames.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError("no frame within %ss; stderr:\n%s" % (timeout, self.stderr)) from None
            if frame is None:
                raise AssertionError("sandbox stdout closed; stderr:\n%s" % self.stderr)
            assert frame["t"] in ("result", "call", "ready", "started", "file", "output", "snapshot",
                                  "saved", "restored", "preloaded"), frame
            if frame["t"] == "file":
                self.file_frames.append(frame)
                continue
            if frame["t"] == "started":
                self.started.append(frame["id"])
                if skip_started:
                    continue
            return frame

    def start_exec(self, code, output_limit=65536, servers=(), tools=None):
        """Send an exec frame; `tools` ({server: [tool, ...]}) also names the loaded servers."""
        self._next_id += 1
        frame = {"t": "exec", "id": self._next_id, "code": code,
                 "servers": list(servers or (tools or ())), "output_limit": output_limit}
        if tools is not None:
            frame["tools"] = tools
        self.send(frame)
        return self._next_id

    def wait_result(self, exec_id, on_call=echo_host, timeout=20.0):
        while True:
            frame = self.recv(timeout)
            if frame["t"] == "call":
                assert frame["exec"] == exec_id, frame
                on_call(self, frame)
                continue
            assert frame["t"] == "result" and frame["id"] == exec_id, frame
            return frame

    def run(self, code, output_limit=65536, on_call=echo_host, timeout=20.0, tools=None):
        return self.wait_result(self.start_exec(code, output_limit, tools=tools), on_call,
                                timeout)

    def close(self, timeout=10.0):
        """Send shutdown (if still running), wait for exit; returns the exit code. Idempotent."""
        try:
            if self.proc.poll() is None:
                self.send({"t": "shutdown"})
        except (OSError, ValueError):  # stdin already closed
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("sandbox did not exit after shutdown") from None
        finally:
            for thread in self._threads:  # all of stdout and stderr has been read
                thread.join(timeout)
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    f.close()
                except OSError:
                    pass
            self.outbox.cleanup()
