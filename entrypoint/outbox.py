"""Files out, the sandbox's side (ARCHITECTURE.md, "Files out"): after each cell, the files it
created or changed under the outbox (`/workspace/out`, MCP_BRIDGE_OUTBOX) and the pictures it
rendered go to the host as `file` frames, base64 chunks of one file after another. A file counts
as changed when its size, mtime, ctime or inode changed since it was last sent. Symlinks, fifos
and other special files in the outbox are never followed or sent. The host names the files and
applies the limits again; the limits here only spare sending what the host would refuse. Also
`runtime.save(obj, name)`, which writes into the outbox."""
import json
import os
import pickle
import shutil
import stat
import time

from . import protocol

DEFAULT_DIR = "/workspace/out"
MAX_CHUNK = 512 << 10  # raw bytes per frame (base64 makes them 4/3 larger)
MAX_DEPTH = 8  # folder levels under the outbox that are looked at
MAX_SCAN = 10000  # outbox entries looked at per cell
# A folder whose mtime is at least this old is "settled": any later change gets a later mtime,
# even on file systems with coarse timestamps (tmpfs ticks in milliseconds).
SETTLED_NS = 100_000_000


def env_int(name, default):
    """The positive int in environment variable `name`, else `default`."""
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


class Limits:
    """The limits the host announced in the environment (MCP_BRIDGE_OUTBOX_MAX_*)."""

    def __init__(self, max_file=25 << 20, max_cell=100 << 20, max_files=50, max_frame=64 << 20):
        self.max_file, self.max_cell, self.max_files = max_file, max_cell, max_files
        # A chunk's frame must stay under MCP_BRIDGE_MAX_FRAME: base64 plus a little JSON.
        raw = (max(max_frame, 4096) - 1024) * 3 // 4
        self.chunk = max(3, min(MAX_CHUNK, raw - raw % 3))

    @classmethod
    def from_env(cls):
        return cls(env_int("MCP_BRIDGE_OUTBOX_MAX_FILE", 25 << 20),
                   env_int("MCP_BRIDGE_OUTBOX_MAX_CELL", 100 << 20),
                   env_int("MCP_BRIDGE_OUTBOX_MAX_FILES", 50),
                   env_int("MCP_BRIDGE_MAX_FRAME", 64 << 20))


def _signature(st):
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class Outbox:
    """The outbox folder and what of it the host already has; sends through `send(frame)`.
    Without a folder (`root` None) only pictures are sent."""

    def __init__(self, root, limits, send):
        self.root, self.limits, self.send = root, limits, send
        self.seen = {}  # relative path -> signature when it was last sent (or refused)
        self.pictures = []  # (name, PNG bytes) rendered this cell, to show
        self.empty_at = None  # (mtime, ctime, size, inode) of the root when it was settled empty
        if root is not None:
            try:
                os.makedirs(root, exist_ok=True)
            except OSError as exc:
                protocol.log("no outbox at %s: %s" % (root, exc))

    @classmethod
    def from_env(cls, send):
        """The outbox the host set up (MCP_BRIDGE_OUTBOX; none when it is not set)."""
        return cls(os.environ.get("MCP_BRIDGE_OUTBOX") or None, Limits.from_env(), send)

    def add_picture(self, name, png):
        """Send `png` (bytes) as picture `name` at the end of this cell."""
        self.pictures.append((name, png))

    def scan(self):
        """{relative path: (signature, absolute path)} of the regular files in the outbox.
        An outbox that was empty and whose folder has not changed since costs one stat (the
        usual cell writes no file)."""
        found, budget = {}, [MAX_SCAN]
        if self.root is None:
            return found
        try:
            st = os.stat(self.root)
        except OSError:
            return found
        key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        if key == self.empty_at:
            return found
        self.empty_at = None

        def walk(folder, prefix, depth):
            try:
                entries = list(os.scandir(folder))
            except OSError:
                return
            for entry in entries:
                budget[0] -= 1
                if budget[0] < 0:
                    return
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                rel = prefix + entry.name
                if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
                    walk(entry.path, rel + "/", depth + 1)
                elif stat.S_ISREG(st.st_mode):
                    found[rel] = (_signature(st), entry.path)

        walk(self.root, "", 0)
        if budget[0] == MAX_SCAN and time.time_ns() - st.st_mtime_ns > SETTLED_NS:
            self.empty_at = key  # no entry at all, and settled
        return found

    def flush(self, exec_id):
        """Send this cell's pictures and new or changed outbox files. What was sent (or refused)
        is remembered as it goes, so files an interrupt kept from going out go after the next
        cell."""
        pictures, self.pictures = self.pictures, []
        found = self.scan()
        changed = sorted(rel for rel, (sig, _) in found.items() if self.seen.get(rel) != sig)
        for rel in [r for r in self.seen if r not in found]:
            del self.seen[rel]  # deleted: a new file of that name is new again
        if not pictures and not changed:
            return
        state = {"n": 0, "bytes": 0}
        lim = self.limits
        for name, png in pictures:
            if not self._room(state, exec_id, name, len(png)):
                continue
            self._send_bytes(exec_id, state, name, png)
        for i, rel in enumerate(changed):
            sig, path = found[rel]
            if state["n"] >= lim.max_files:
                state["n"] += 1
                self.send(protocol.file_skip_frame(exec_id, state["n"], rel, "too_many",
                                                   count=len(changed) - i))
                for rest in changed[i:]:
                    self.seen[rest] = found[rest][0]
                return
            if self._room(state, exec_id, rel, sig[0]):
                self._send_file(exec_id, state, rel, path)
            self.seen[rel] = sig

    def _room(self, state, exec_id, name, size):
        """Count one more file of `size` bytes; False (and a skip frame) when it cannot go."""
        lim = self.limits
        if state["n"] >= lim.max_files:
            state["n"] += 1
            self.send(protocol.file_skip_frame(exec_id, state["n"], name, "too_many", count=1))
            return False
        state["n"] += 1
        why = _too_big(size, state["bytes"], lim)
        if why is not None:
            self.send(protocol.file_skip_frame(exec_id, state["n"], name, why, size=size))
            return False
        return True

    def _send_bytes(self, exec_id, state, name, data):
        chunk, n = self.limits.chunk, state["n"]
        state["bytes"] += len(data)
        for at in range(0, max(len(data), 1), chunk):
            piece = data[at:at + chunk]
            self.send(protocol.file_frame(exec_id, n, piece, at + chunk >= len(data),
                                          name if at == 0 else None, show=True))

    def _send_file(self, exec_id, state, rel, path):
        """Send the regular file at `path` in chunks; never follows a symlink or opens a fifo
        (the entry may have been swapped since the scan)."""
        n, lim = state["n"], self.limits
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            protocol.log("outbox file %s not sent: %s" % (rel, exc))
            self.send(protocol.file_skip_frame(exec_id, n, rel, "unreadable"))
            return
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            why = _too_big(st.st_size, state["bytes"], lim)
            if not stat.S_ISREG(st.st_mode) or why is not None:
                self.send(protocol.file_skip_frame(exec_id, n, rel, why or "special",
                                                   size=st.st_size))
                return
            left = st.st_size
            first = True
            while True:
                piece = f.read(min(lim.chunk, left))
                left -= len(piece)
                end = not piece or left <= 0
                self.send(protocol.file_frame(exec_id, n, piece, end, rel if first else None))
                state["bytes"] += len(piece)
                first = False
                if end:
                    return


def _too_big(size, cell_bytes, lim):
    """Why a file of `size` bytes cannot go after `cell_bytes` of this cell: "too_large" (over
    the per-file limit), "cell_full" (over what is left of the cell's), or None."""
    if size > lim.max_file:
        return "too_large"
    if cell_bytes + size > lim.max_cell:
        return "cell_full"
    return None


# -- runtime.save ---------------------------------------------------------------------------------

def _module_of(obj):
    return type(obj).__module__ or ""


def _check_name(name):
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name \
            or "\0" in name:
        raise ValueError("name must be a plain file name such as 'result.csv', not %r" % (name,))
    return name


def _pick(name, default):
    return _check_name(default if name is None else name)


def _with_ext(name, ext):
    return name if os.path.splitext(name)[1] else name + ext


def save(obj, name=None, root=None):
    """Save `obj` into the outbox (/workspace/out) so it is copied to the host after this cell
    and returned as a file link; returns its path in the sandbox. A path (an os.PathLike, or a
    str naming an existing file) is copied; bytes are written as they are; a str that names no
    file is written as UTF-8 text (then `name` is required); a pandas DataFrame or Series as
    CSV; a matplotlib Figure or a PIL image as PNG; a numpy array as .npy; a dict or list as
    JSON when it can be; anything else is pickled. `name` (a plain file name) gets the usual
    extension when it has none; an existing file of that name is replaced."""
    root = root or os.environ.get("MCP_BRIDGE_OUTBOX") or DEFAULT_DIR
    os.makedirs(root, exist_ok=True)
    if isinstance(obj, os.PathLike) or (isinstance(obj, str) and os.path.isfile(obj)):
        src = os.fspath(obj)
        target = os.path.join(root, _pick(name, os.path.basename(src)))
        if os.path.abspath(src) != os.path.abspath(target):
            shutil.copyfile(src, target)
        return target
    if isinstance(obj, str):
        if name is None:
            raise ValueError("no such file %r; to save text, give it a name: "
                             "runtime.save(text, 'notes.txt')" % (obj[:200],))
        return _write(root, _with_ext(_check_name(name), ".txt"), obj.encode("utf-8"))
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return _write(root, _pick(name, "data.bin"), bytes(obj))
    module = _module_of(obj)
    if module.startswith("pandas") and hasattr(obj, "to_csv"):
        target = os.path.join(root, _with_ext(_pick(name, "data.csv"), ".csv"))
        index = type(getattr(obj, "index", None)).__name__ != "RangeIndex"
        obj.to_csv(target, index=index)
        return target
    if module.startswith("matplotlib") and hasattr(obj, "savefig"):
        target = os.path.join(root, _with_ext(_pick(name, "figure.png"), ".png"))
        obj.savefig(target, format="png")
        return target
    if module.startswith("PIL") and hasattr(obj, "save"):
        target = os.path.join(root, _with_ext(_pick(name, "image.png"), ".png"))
        obj.save(target, format="PNG")
        return target
    if module.startswith("numpy") and hasattr(obj, "dtype") and hasattr(obj, "shape"):
        import numpy  # noqa: PLC0415 - only when saving a numpy array
        target = os.path.join(root, _with_ext(_pick(name, "array.npy"), ".npy"))
        with open(target, "wb") as f:
            numpy.save(f, obj, allow_pickle=False)
        return target
    if isinstance(obj, (dict, list)):
        try:
            text = json.dumps(obj, ensure_ascii=False, indent=1)
        except (TypeError, ValueError):
            pass
        else:
            return _write(root, _with_ext(_pick(name, "data.json"), ".json"),
                          text.encode("utf-8"))
    return _write(root, _with_ext(_pick(name, "object.pkl"), ".pkl"), pickle.dumps(obj))


def _write(root, name, data):
    target = os.path.join(root, name)
    with open(target, "wb") as f:
        f.write(data)
    return target
