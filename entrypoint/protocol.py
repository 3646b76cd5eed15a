"""The frame channel (ARCHITECTURE.md, "The sandbox frame protocol"): newline-JSON codec, the
frame writer, the line splitter for the reader, and the pending-call table behind `call` /
`call_sync`. Owns the private output fd; knows nothing about exec, captures or user namespaces.

Frames are written by one writer thread (signal handlers only ever run on the main thread, so an
interrupt can never cut a frame in half); each frame is one os.write loop under a lock."""
import asyncio
import base64
import itertools
import json
import os
import queue
import threading

from .errors import BridgeCallError, from_reply
from .values import Record

# -- the frames the entrypoint sends (ARCHITECTURE.md, "Container → host"; parsed by
# src/bridge/protocol/). Built only here; "t" comes first, the host's fast tag check expects it.

VERSION = 1  # the protocol version sent in `ready` (PROTOCOL_VERSION on the host)


def ready_frame(python, posture):
    """`ready`: booted; frames stay on stdio until the caller switches `channel` to "socket"
    (or sets `channel_error`)."""
    return {"t": "ready", "v": VERSION, "python": python, "channel": "stdio", "posture": posture}


def started_frame(exec_id):
    """`started`: exec `exec_id` is running (ack.py decides when it goes out)."""
    return {"t": "started", "id": exec_id}


def result_frame(exec_id, ok, stdout="", stderr="", error=None, stdout_dropped=0,
                 stderr_dropped=0, interrupted=False, exit_info=None):
    """`result`: exec `exec_id` finished; `error` is the traceback when `ok` is false.
    `exit_info` = `(code, message)` when the code raised SystemExit: the frame then also carries
    `exit_code` (the status `python3 -c` would exit with) and, when the exit argument was
    neither None nor an int, `exit_message` (what python3 would print)."""
    frame = {"t": "result", "id": exec_id, "ok": ok, "stdout": stdout, "stderr": stderr,
             "error": error, "stdout_dropped": stdout_dropped, "stderr_dropped": stderr_dropped,
             "interrupted": interrupted}
    if exit_info is not None:
        frame["exit_code"] = exit_info[0]
        if exit_info[1] is not None:
            frame["exit_message"] = exit_info[1]
    return frame


def call_frame(call_id, exec_id, method, params):
    """`call`: sandbox code asks the host for `method` during exec `exec_id`."""
    return {"t": "call", "id": call_id, "exec": exec_id, "method": method, "params": params}


def file_frame(exec_id, n, data, end, name=None, show=False):
    """`file`: a chunk (bytes, sent as base64) of file `n` delivered by exec `exec_id`; the first
    chunk names the file (the host decides the real name) and says whether it is a picture to
    show; `end` marks the last chunk."""
    frame = {"t": "file", "exec": exec_id, "n": n,
             "data": base64.b64encode(data).decode("ascii"), "end": end}
    if name is not None:
        frame["name"] = name
        frame["show"] = show
    return frame


def file_skip_frame(exec_id, n, name, skip, size=None, count=None):
    """`file` with `skip`: file `n` is not sent ("too_large", with its `size`), or `count`
    files are left out ("too_many")."""
    frame = {"t": "file", "exec": exec_id, "n": n, "name": name, "skip": skip, "end": True}
    if size is not None:
        frame["size"] = size
    if count is not None:
        frame["count"] = count
    return frame


def output_frame(exec_id, stdout, stdout_total, stderr, stderr_total):
    """`output`: the last characters each stream of exec `exec_id` printed so far, and how many
    it printed in all (the answer to a `progress` frame)."""
    return {"t": "output", "id": exec_id, "stdout": stdout, "stdout_total": stdout_total,
            "stderr": stderr, "stderr_total": stderr_total}


def snapshot_line(save_id, data):
    """`snapshot`, encoded: the next chunk (`data`, base64 bytes) of the namespace snapshot
    `save_namespace` `save_id` (an int) asked for. Built by hand: base64 needs no escaping, and the JSON
    encoder would spend ~10 ns on every byte of a snapshot."""
    return b'{"t":"snapshot","id":%d,"data":"%s"}\n' % (save_id, data)


def saved_frame(save_id, size, names, error=None):
    """`saved`: the snapshot is complete: `size` bytes in all, of `names` user names (0 when
    there was nothing to save); `error` when saving failed."""
    frame = {"t": "saved", "id": save_id, "bytes": size, "names": names}
    if error is not None:
        frame["error"] = error
    return frame


def restored_frame(restore_id, names, failed):
    """`restored`: the names a restore brought back, and [name, why] for those it did not."""
    return {"t": "restored", "id": restore_id, "names": list(names),
            "failed": [[name, why] for name, why in failed]}


def preloaded_frame(imported, failed, ms):
    """`preloaded`: the answer to `preload`: how many modules were imported, [module, why] for
    those that failed, and the milliseconds it took."""
    return {"t": "preloaded", "imported": imported, "failed": [list(f) for f in failed], "ms": ms}


def hello_frame(token):
    """`hello`: the first frame on the socket channel, proving the sandbox holds the token."""
    return {"t": "hello", "token": token}


class FrameError(ValueError):
    """A line from the host that is not a frame (bad UTF-8/JSON, not an object, no "t")."""


def log(msg):
    """A diagnostic line on the container's stderr (the host logs it); never raises."""
    try:
        os.write(2, ("mcp-bridge entrypoint: %s\n" % msg).encode("utf-8", "replace"))
    except OSError:
        pass


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# The C encoder behind _ENCODER, made once: JSONEncoder.encode builds a new one per call. It
# keeps no table of containers being encoded (the table is left stale when encoding fails, and
# frames are encoded on several threads), so a circular value recurses until RecursionError,
# reported as the ValueError json gives.
_C_ENCODE = None if json.encoder.c_make_encoder is None else json.encoder.c_make_encoder(
    None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False)


def _to_json(frame):
    if _C_ENCODE is None:
        return _ENCODER.encode(frame)
    try:
        return "".join(_C_ENCODE(frame, 0))
    except RecursionError:
        raise ValueError("Circular reference detected (or a value nested too deeply)") from None


def encode(frame):
    """One frame as bytes: compact JSON, raw UTF-8, a single trailing newline.

    Raises TypeError/ValueError for values JSON cannot carry (NaN, sets, objects, circular
    containers). Lone surrogates (from user strings) are turned into valid UTF-8 so the host never
    sees an invalid frame."""
    text = _to_json(frame)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
    return data + b"\n"


# Every JSON object from the host is a values.Record: a dict whose keys are also attributes, so
# tool results and helper answers read as `issue.title` (decoded in C; one call per object).
_DECODER = json.JSONDecoder(object_hook=Record)


def _from_json(text):
    # raw_decode skips JSONDecoder.decode's two whitespace regex matches; a line it cannot
    # read whole (leading whitespace, or an error) goes through decode for the same rules
    # and error messages as json.loads.
    try:
        value, end = _DECODER.raw_decode(text)
        if end == len(text) or text[end:].isspace():
            return value
    except ValueError:
        pass
    return _DECODER.decode(text)


def decode(line):
    """Parse one line (bytes, without the newline) into a frame dict, or raise FrameError."""
    try:
        frame = _from_json(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError("not a JSON line: %s" % exc) from None
    if not isinstance(frame, dict) or not isinstance(frame.get("t"), str):
        raise FrameError("not a frame object with a string \"t\"")
    return frame


def split_lines(buf, chunk):
    """Append `chunk` to bytearray `buf`; remove and return the complete lines it now holds."""
    if chunk and not buf and chunk.find(b"\n") == len(chunk) - 1:  # the usual case: one line
        return [chunk[:-1]]
    start, pos, lines = len(buf), 0, []
    buf += chunk
    nl = buf.find(b"\n", start)
    while nl >= 0:
        lines.append(bytes(buf[pos:nl]))
        pos = nl + 1
        nl = buf.find(b"\n", pos)
    del buf[:pos]
    return lines


class FrameWriter:
    """Serializes frames onto `fd` from one daemon thread, in the order `send` was called."""

    def __init__(self, fd, main_guard=None):
        self.fd = fd
        self.lock = threading.Lock()
        self.broken = False
        # Context manager that defers SIGINT while the main thread writes (runner.ExecState).
        # With it, the main thread writes its frames directly instead of via the thread: one
        # thread hop less per call.
        self.main_guard = main_guard
        self._main_ident = threading.main_thread().ident
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="mcp-frame-writer", daemon=True)
        self._thread.start()

    def send(self, frame):
        """Send a frame. Encoding errors raise here, in the caller (e.g. non-JSON params)."""
        self.send_line(encode(frame))

    def send_line(self, data):
        """Send a frame already encoded as one line (`encode`, `snapshot_line`)."""
        guard = self.main_guard
        if guard is not None and threading.get_ident() == self._main_ident:
            with guard:
                self.write_now(data)
        else:
            self._queue.put(data)

    def write_now(self, data):
        """Write encoded bytes immediately (writer thread, or tests); a whole frame per lock."""
        with self.lock:
            if self.broken:
                return
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self.fd, view):]
            except OSError as exc:
                self.broken = True
                log("writing frames failed (host gone?): %s" % exc)

    def close(self, timeout=2.0):
        """Flush everything queued so far, then stop the thread (bounded wait)."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self):
        while True:
            data = self._queue.get()
            if data is None:
                return
            self.write_now(data)


class CallTable:
    """Container → host calls: ids, the pending table, and reply resolution.

    `call` (async) parks an asyncio future that the reader thread settles through
    `loop.call_soon_threadsafe`; `call_sync` parks a threading.Event, so it also works while the
    event loop is blocked by the caller. A failed reply raises the exception of its "kind"
    (errors.py); `where` = (server, tool) the call is about fills its `server`/`tool`."""

    def __init__(self, send, current_exec):
        self._send = send  # frame dict -> None
        self._current_exec = current_exec  # () -> int, the exec the call belongs to
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending = {}
        self._closed = None  # reason string once the host is gone
        self.inbox = None  # inbox.Inbox: told when the main thread blocks in `call_sync`
        self._main = threading.main_thread()

    def _open(self, entry, method, params):
        if not isinstance(method, str):
            raise TypeError("method must be a str")
        with self._lock:
            if self._closed:
                raise BridgeCallError(self._closed, None, *entry[3])
            cid = next(self._ids)
            self._pending[cid] = entry
        try:
            self._send(call_frame(cid, self._current_exec(), method,
                                  {} if params is None else params))
        except BaseException:
            self._drop(cid)
            raise
        return cid

    def _drop(self, cid):
        with self._lock:
            self._pending.pop(cid, None)

    async def call(self, method, params=None, where=(None, None)):
        """Ask the host to run `method`; returns the reply value or raises BridgeCallError."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        cid = self._open(("future", loop, fut, where), method, params)
        try:
            if self.inbox is not None:
                self.inbox.settle_inline(loop, fut)
            return await fut  # a settled future returns at once, without suspending
        except BaseException:  # cancelled or interrupted: withdraw (a reply already removed it)
            self._drop(cid)
            raise

    def call_sync(self, method, params=None, where=(None, None)):
        """Blocking `call` for synchronous code (safe inside a running event loop too)."""
        box = {}
        event = threading.Event()
        cid = self._open(("event", event, box, where), method, params)
        try:
            if self.inbox is not None and threading.current_thread() is self._main:
                with self.inbox.waiting_sync():  # the loop cannot read while this blocks
                    event.wait()
            else:
                event.wait()
        finally:
            self._drop(cid)
        if box["ok"]:
            return box["value"]
        raise box["error"]

    def resolve(self, frame):
        """Settle the call a reply frame answers (reader thread). Unknown ids are logged."""
        cid = frame.get("id")
        with self._lock:
            entry = self._pending.pop(cid, None) if isinstance(cid, int) else None
        if entry is None:
            log("reply for unknown call id %r ignored" % (cid,))
            return
        self._settle(entry, frame)

    def close(self, reason):
        """The host is gone: fail every pending call and refuse new ones."""
        with self._lock:
            self._closed = reason
            entries, self._pending = list(self._pending.values()), {}
        for entry in entries:
            self._settle(entry, {"ok": False, "error": reason})

    @staticmethod
    def _settle(entry, frame):
        kind, waker, target, where = entry
        ok = frame.get("ok") is True
        outcome = (ok, frame.get("value") if ok else None, None if ok else from_reply(frame, where))
        if kind == "event":
            target["ok"], target["value"], target["error"] = outcome
            waker.set()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is waker:  # read by the loop itself: no hand-off needed
            _settle_future(target, outcome)
            return
        try:
            waker.call_soon_threadsafe(_settle_future, target, outcome)
        except RuntimeError:  # that event loop is closed: nobody is waiting any more
            pass


def _settle_future(fut, outcome):
    if fut.done():
        return
    ok, value, error = outcome
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(error)
