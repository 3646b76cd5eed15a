"""TypeScript and JavaScript cells (`run_typescript`; ARCHITECTURE.md, "TypeScript cells"): a
long-lived `node` child running js/harness.js, started on first use (before the exec counts as
begun, so an interrupt's sweep of the cell's processes spares it), spoken to in JSON lines: its
stdin takes `exec` and `reply`, a pipe of its own (fd given on its command line) brings `out`,
`err`, `call` and `done`. The child's MCP calls go to the host through the same CallTable as the
Python proxies' (so policy, approvals, limits and the audit log apply unchanged); its console
output goes to the exec's captures (so the output cap applies). A cell that does not stop within
INTERRUPT_WAIT of an interrupt takes the child with it: its state is lost, said in the error, and
the next cell starts a fresh one. Never writes to the frame channel itself.

Across an idle stop the child's state goes into the namespace snapshot (keeper.py): `save_state`
asks it for its names (`state` lines: a value by v8's serializer, a function or class by its
source) and `restore_state` starts a child and gives them back, between execs."""
import asyncio
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

from . import runtime

INTERRUPT_WAIT = 0.4  # seconds a cell gets to stop after SIGINT before node is killed
START_WAIT = 10.0  # seconds node gets to say it is ready
EXIT_WAIT = 1.0  # seconds node gets to exit once its channel ended
STATE_WAIT = 10.0  # seconds node gets to save or restore its state
STATE_VERSION = 1  # the format of save_state's bytes
JS = " (JavaScript)"  # how a JavaScript name is told apart in the snapshot's report
MAX_LINE = 8 << 20  # bytes of one line from node; longer ends the child (the harness cuts at 64 KiB)
READ_CHUNK = 65536  # bytes read from node per wake-up: what is queued unread stays this small
# What node code may ask of the host: the helpers' methods (runtime.HOST_METHODS is the list).
METHODS = frozenset(("call_tool", "list_servers", "discovered_servers", "list_tools",
                     "query_tool_docs", "search_tool_docs", "describe_server"))
NO_NODE = ("this sandbox image has no JavaScript runtime (node): run_typescript needs an image "
           "built by this bridge's recipe (mcp-code-bridge image build, or container/build.sh), "
           "which adds Node 22; `mcp-code-bridge image status` shows what an image has")
LOST = ("its JavaScript state (variables, functions) is lost; the next run_typescript call starts "
        "a fresh node. Python's state is kept.")


class NodeLost(Exception):
    """The node child is gone (exited, killed, or its channel broke)."""


JS_PARTS = ("names", "rewrite", "state")  # js/*.js that js/harness.js takes as `part(name)`


def harness_source():
    """The program node runs: js/harness.js with its parts (JS_PARTS) bundled ahead of it as
    `__mcpParts`, from the boot frame's files (boot.py's finder holds them) or, outside the
    sandbox, from disk; None when a file is missing."""
    pkg = sys.modules.get(__name__.rpartition(".")[0])
    files = getattr(getattr(pkg, "__loader__", None), "files", None)
    if not isinstance(files, dict):
        files = {}
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")

    def read(name):
        text = files.get("js/%s.js" % name)
        if isinstance(text, str):
            return text
        try:
            with open(os.path.join(here, name + ".js"), encoding="utf-8") as f:
                return f.read()
        except OSError:
            return None

    texts = {name: read(name) for name in JS_PARTS + ("harness",)}
    if any(text is None for text in texts.values()):
        return None
    bundle = ["const __mcpParts = {};"]
    for name in JS_PARTS:  # each part in a function of its own: its names stay its own
        bundle.append("__mcpParts[%s] = (() => { const module = { exports: {} };\n%s\n"
                      "return module.exports; })();" % (json.dumps(name), texts[name]))
    bundle.append(texts["harness"])
    return "\n".join(bundle)


class JsCells:
    """The node child and its channel; one per entrypoint."""

    def __init__(self, source=None, node=None):
        self.source = source
        self.node = node
        self.proc = None
        self.version = None
        self._out = None  # our read end of node's message pipe
        self._buf = b""
        self._lines = None  # asyncio.Queue of decoded messages, None at EOF
        self._loop = None
        self.lost_note = None  # why the last child went away, for the next cell's stderr

    # -- the child ---------------------------------------------------------------------------
    def prepare(self):
        """Start node if it does not run; returns None, or the error text of why it cannot."""
        if self.proc is not None and self.proc.poll() is None:
            return None
        self._drop()
        node = self.node or shutil.which("node")
        if node is None:
            return NO_NODE
        source = self.source if self.source is not None else harness_source()
        if not source:
            return "the sandbox entrypoint has no JavaScript harness (js/harness.js)"
        r, w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [node, "--no-warnings", "-e", source, "--", "--mcp-bridge-cells", str(w)],
                stdin=subprocess.PIPE, pass_fds=(w,), close_fds=True)
        except OSError as exc:
            os.close(r)
            os.close(w)
            return "node could not be started: %s" % exc
        os.close(w)
        self._out, self._buf = r, b""
        ready = self._read_blocking(START_WAIT)
        if not isinstance(ready, dict) or ready.get("t") != "ready":
            self._drop()
            return "node did not start its harness (%r)" % (ready,)
        self.version = ready.get("version")
        os.set_blocking(r, False)
        return None

    def _read_blocking(self, timeout):
        """One message, read before the channel goes non-blocking (the `ready` line)."""
        import select
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self._out], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._out, 65536)
            if not chunk:
                return None
            self._buf += chunk
            if len(self._buf) > MAX_LINE:
                return None
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            return None

    def _drop(self):
        """Forget the child (killing it if it still runs)."""
        if self._loop is not None and self._out is not None:
            try:
                self._loop.remove_reader(self._out)
            except Exception:  # noqa: BLE001 - the loop may be closed
                pass
        self._loop = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            if self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
        self.proc = None
        if self._out is not None:
            os.close(self._out)
            self._out = None
        self._buf, self._lines = b"", None

    def end(self):
        """End the child, its state with it (`runtime.reset()`); the next cell starts a fresh one."""
        if self.proc is not None:
            self._drop()

    def running(self):
        """Whether a node child runs now."""
        return self.proc is not None and self.proc.poll() is None

    def _read_until(self, deadline):
        """One message read without the event loop (between execs, when none runs); None when
        the channel ended, broke a line's bound, or `deadline` (monotonic) passed."""
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._out], [], [], left)[0]:
                return None
            try:
                chunk = os.read(self._out, READ_CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                return None
            if not chunk or len(self._buf) + len(chunk) > MAX_LINE:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            return {}
        return msg if isinstance(msg, dict) else {}

    def save_state(self, limit):
        """The child's names as bytes for the snapshot, at most `limit` bytes of values, and how
        many it has; (None, 0) when no child runs or it holds nothing. Its output meanwhile (a
        timer a cell left) is dropped."""
        if not self.running():
            return None, 0
        sid = time.monotonic_ns()
        try:
            self._send({"t": "save", "id": sid, "limit": max(0, int(limit))})
        except NodeLost:
            return None, 0
        items, deadline = [], time.monotonic() + STATE_WAIT
        while True:
            msg = self._read_until(deadline)
            if msg is None:
                return None, 0
            if msg.get("id") != sid:
                continue
            if msg.get("t") == "state":
                items.append({k: msg[k] for k in ("name", "kind", "data", "classes") if k in msg})
            elif msg.get("t") == "saved":
                skipped = [s for s in msg.get("skipped") or [] if isinstance(s, list) and len(s) == 2]
                break
        if not items and not skipped:
            return None, 0
        doc = {"v": STATE_VERSION, "items": items, "skipped": skipped}
        return json.dumps(doc, separators=(",", ":")).encode(), len(items) + len(skipped)

    def restore_state(self, blob):
        """Put the names `save_state` gave back into a child started for them; returns (names
        restored, [(name, why)] of those that did not come back), each name marked JavaScript."""
        try:
            doc = json.loads(bytes(blob))
            items = [i for i in doc["items"] if isinstance(i, dict) and isinstance(i.get("name"), str)]
            skipped = [(str(n) + JS, str(w)) for n, w in doc.get("skipped", [])]
            if doc.get("v") != STATE_VERSION:
                raise ValueError(doc.get("v"))
        except Exception:  # noqa: BLE001 - damaged: nothing of it comes back
            return [], [("*" + JS, "the JavaScript state in the snapshot is damaged")]
        if not items:
            return [], skipped
        err = self.prepare()
        if err is not None:
            return [], skipped + [(i["name"] + JS, err) for i in items]
        rid = time.monotonic_ns()
        try:
            for item in items:
                self._send(dict(item, t="restore-item"))
            self._send({"t": "restore", "id": rid})
        except NodeLost:
            return [], skipped + [(i["name"] + JS, "node stopped reading") for i in items]
        deadline = time.monotonic() + STATE_WAIT
        while True:
            msg = self._read_until(deadline)
            if msg is None:
                self._drop()
                return [], skipped + [(i["name"] + JS, "node did not answer") for i in items]
            if msg.get("t") == "restored" and msg.get("id") == rid:
                break
        names = [str(n) + JS for n in msg.get("names") or []]
        failed = [(str(n) + JS, str(w)) for n, w in msg.get("failed") or []]
        return names, skipped + failed

    def interrupt(self):
        """SIGINT the child: a cell in synchronous code stops (vm's breakOnSigint), a waiting
        cell is rejected by the harness."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGINT)
            except OSError:
                pass

    # -- the channel -------------------------------------------------------------------------
    def _attach(self, loop):
        if self._loop is loop and self._lines is not None:
            return
        if self._loop is not None:
            try:
                self._loop.remove_reader(self._out)
            except Exception:  # noqa: BLE001 - the old loop may be closed
                pass
        self._loop, self._lines = loop, asyncio.Queue()
        loop.add_reader(self._out, self._readable)

    def _readable(self):
        try:
            chunk = os.read(self._out, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._loop.remove_reader(self._out)
            self._lines.put_nowait(None)
            return
        self._buf += chunk
        while b"\n" in self._buf:
            line, _, self._buf = self._buf.partition(b"\n")
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                self._lines.put_nowait(msg)
        if len(self._buf) > MAX_LINE:
            self._loop.remove_reader(self._out)
            self._lines.put_nowait(None)

    def _send(self, msg):
        data = (json.dumps(msg, separators=(",", ":"), default=str) + "\n").encode()
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (OSError, ValueError, AttributeError) as exc:
            raise NodeLost("stopped reading its input") from exc

    async def _forward(self, msg):
        """One `call` from node, to the host and back."""
        cid, method, params = msg.get("id"), msg.get("method"), msg.get("params")
        if not isinstance(params, dict):
            params = {}
        where = (params.get("server"), params.get("tool"))
        try:
            if method not in METHODS:
                raise ValueError("unknown host method %r" % (method,))
            value = await runtime.host().call(method, params, where)
            reply = {"t": "reply", "id": cid, "ok": True, "value": value}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the cell
            reply = {"t": "reply", "id": cid, "ok": False, "error": str(exc),
                     "kind": type(exc).__name__}
        try:
            self._send(reply)
        except NodeLost:
            pass

    async def wait_done(self, eid):
        """Serve the child's messages until exec `eid` is done; returns its `done` message."""
        tasks = set()
        while True:
            msg = await self._lines.get()
            if msg is None:  # its channel ended: it exits (reaped within a moment) or broke it
                try:
                    self.proc.wait(timeout=EXIT_WAIT)
                except subprocess.TimeoutExpired:
                    raise NodeLost("closed its channel") from None
                raise NodeLost("exited")
            kind = msg.get("t")
            if kind == "out" and isinstance(msg.get("s"), str):
                sys.stdout.write(msg["s"])
            elif kind == "err" and isinstance(msg.get("s"), str):
                sys.stderr.write(msg["s"])
            elif kind == "call":
                task = asyncio.get_running_loop().create_task(self._forward(msg))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            elif kind == "done" and msg.get("id") == eid:
                return msg

    async def start_cell(self, eid, code, servers):
        """Send exec `eid` to the child (prepare() succeeded); wait with wait_done."""
        self._attach(asyncio.get_running_loop())
        self._send({"t": "exec", "id": eid, "code": code, "servers": servers})
        return await self.wait_done(eid)

    def lost(self, why):
        """The child went away during a cell: forget it; the error text saying so."""
        code = self.proc.poll() if self.proc is not None else None
        self._drop()
        exit_note = " (exit code %s)" % code if code is not None else ""
        return "The JavaScript runtime %s%s: %s" % (why, exit_note, LOST)


def servers_of(loaded):
    """{server: [tool names] or None} of a ServerDict of proxies (None: tools unknown)."""
    out = {}
    for name, proxy in (loaded or {}).items():
        tools = getattr(proxy, "_mcp_tools", None)
        out[name] = list(tools) if tools is not None else None
    return out
