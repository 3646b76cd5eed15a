"""The namespace snapshot over the frame channel (ARCHITECTURE.md, "State that outlives the
sandbox"): a `save_namespace` frame is answered with `snapshot` chunks and `saved`; `restore_namespace` chunks are
collected by whoever reads host frames and, once complete, restored on the main thread between
execs, answered with `restored`. The bytes are snapshot.py's; this file only moves them."""
import binascii

from . import protocol, snapshot

CHUNK = 1 << 20  # bytes of snapshot per frame unless the host asks for less
MIN_CHUNK = 1024
# How the host writes a `restore_namespace` frame (serde keeps the field order): read without the JSON
# decoder, which would spend more time on a snapshot's base64 than the unpickling does.
RESTORE_PREFIX = b'{"t":"restore_namespace","id":'
_DATA = b',"data":"'
_DONE = b'","done":'
_ENDS = {b'","done":false}': False, b'","done":true}': True}


def restore_frame(line):
    """The `restore_namespace` frame in `line` as written by the host, with `data` as bytes; None for any
    other spelling (the caller then decodes it as JSON)."""
    head, end = line.find(_DATA, len(RESTORE_PREFIX)), line.rfind(_DONE)
    if head < 0 or end < head + len(_DATA):
        return None
    rid, done = line[len(RESTORE_PREFIX):head], _ENDS.get(line[end:].rstrip())
    if not rid.isdigit() or done is None:
        return None
    return {"t": "restore_namespace", "id": int(rid), "data": line[head + len(_DATA):end],
            "done": done}


class Restoring:
    """`restore_namespace` chunks of one snapshot, collected as they arrive (reader thread)."""

    def __init__(self):
        self.id = None
        self.buf = bytearray()

    def add(self, frame):
        """Take one `restore_namespace` frame; returns the complete job for the exec queue after the last
        chunk (`"done": true`), else None."""
        rid = frame.get("id")
        if rid != self.id:  # a new snapshot: whatever came before is dropped
            self.id, self.buf = rid, bytearray()
        data = frame.get("data")
        if isinstance(data, (str, bytes)) and data:
            self.buf += binascii.a2b_base64(data)
        if frame.get("done") is not True:
            return None
        blob, self.id, self.buf = self.buf, None, bytearray()
        return {"t": "restore_namespace", "id": rid, "blob": blob}


def _pieces(parts, size):
    """The bytes of `parts` again, in pieces of at most `size` bytes."""
    pending, held = [], 0
    for part in parts:
        view = memoryview(part)
        while view:
            take = view[:size - held]
            pending.append(take)
            held += len(take)
            view = view[len(take):]
            if held == size:
                yield b"".join(pending)
                pending, held = [], 0
    if pending:
        yield b"".join(pending)


def _int(value, default):
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def serve_save(frame, namespace, writer, js=None):
    """Answer a `save_namespace` frame: the namespace's snapshot in `snapshot` frames, then `saved`
    (`writer` is the protocol.FrameWriter); `js`, the jscells.JsCells, gives its child's state
    (at most half the limit)."""
    sid = frame["id"]
    limit = max(0, _int(frame.get("limit"), 0))
    size = max(MIN_CHUNK, min(CHUNK, _int(frame.get("chunk"), CHUNK)))
    try:
        js_blob, js_count = js.save_state(limit // 2) if js is not None else (None, 0)
        parts, count = snapshot.save(namespace, limit, js=js_blob)
        count += js_count
    except Exception as exc:  # noqa: BLE001 - an entrypoint bug: say so, keep serving
        protocol.log("saving the namespace failed: %r" % (exc,))
        writer.send(protocol.saved_frame(sid, 0, 0, error="saving failed: %s"
                                         % type(exc).__name__))
        return
    total = 0
    for piece in _pieces(parts or (), size):
        writer.send_line(protocol.snapshot_line(sid, binascii.b2a_base64(piece, newline=False)))
        total += len(piece)
    writer.send(protocol.saved_frame(sid, total, count))


def serve_restore(job, namespace, send, js=None):
    """Restore a complete snapshot (a job from Restoring.add) and answer with `restored`; the
    JavaScript state it holds goes to `js`'s child (started for it)."""
    try:
        names, failed = snapshot.restore(namespace, job["blob"])
    except Exception as exc:  # noqa: BLE001 - an entrypoint bug: nothing came back
        names, failed = [], [("*", "restoring failed: %s" % type(exc).__name__)]
    js_blob = snapshot.js_state(job["blob"])
    if js_blob is not None and js is not None:
        try:
            js_names, js_failed = js.restore_state(js_blob)
        except Exception as exc:  # noqa: BLE001 - an entrypoint bug: Python's names stand
            js_names, js_failed = [], [("* (JavaScript)", "restoring failed: %s"
                                        % type(exc).__name__)]
        names, failed = list(names) + js_names, list(failed) + js_failed
    send(protocol.restored_frame(job["id"], names, failed))
