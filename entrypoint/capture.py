"""Output capture for sandbox code: a text stream that, while an exec is active, keeps the first
3/4 and the last 1/4 of `output_limit` characters and counts the rest as dropped. Between execs
it forwards writes to a fallback stream (the container's stderr), so objects that kept a
reference to it (logging handlers, user threads) stay harmless and are captured again on the
next exec. Knows nothing about frames or exec ids."""
import io
import threading


class OutputBuffer:
    """Head/tail character store for one stream of one exec. Counts are in str characters."""

    def __init__(self, limit):
        limit = max(0, int(limit))
        self.head_cap = limit * 3 // 4
        self.tail_cap = limit - self.head_cap
        self.total = 0
        self._head = []
        self._head_len = 0
        self._tail = []
        self._tail_len = 0

    def add(self, text):
        self.total += len(text)
        room = self.head_cap - self._head_len
        if room > 0:
            part = text[:room]
            self._head.append(part)
            self._head_len += len(part)
            text = text[len(part):]
        if not text or self.tail_cap == 0:
            return
        if len(text) >= self.tail_cap:
            self._tail, self._tail_len = [text[-self.tail_cap:]], self.tail_cap
            return
        self._tail.append(text)
        self._tail_len += len(text)
        if self._tail_len > 2 * self.tail_cap + 256:  # amortized trim keeps writes O(len)
            kept = "".join(self._tail)[-self.tail_cap:]
            self._tail, self._tail_len = [kept], len(kept)

    def last(self, n):
        """(the last `n` characters kept so far, total characters written): for progress."""
        pieces, held = [], 0
        for part in reversed(self._tail or self._head):
            pieces.append(part[-(n - held):] if n > held else "")
            held += len(pieces[-1])
            if held >= n:
                break
        return "".join(reversed(pieces)), self.total

    def result(self):
        """(text, dropped): head + tail joined, and how many characters were cut between them."""
        tail = "".join(self._tail)[-self.tail_cap:] if self.tail_cap else ""
        text = "".join(self._head) + tail
        return text, self.total - len(text)


class Capture(io.TextIOBase):
    """The object installed as sys.stdout / sys.stderr. Thread-safe; never raises on write
    except for the TypeError a real text stream raises for non-str data."""

    encoding = "utf-8"
    errors = "strict"
    newlines = None
    line_buffering = False
    mode = "w"

    def __init__(self, name="<stdout>", fallback=None, limit=None):
        super().__init__()
        self.name = name
        self.fallback = fallback
        self._lock = threading.Lock()
        self._buffer = OutputBuffer(limit) if limit is not None else None

    # -- exec lifecycle (called by the runner) --------------------------------------------
    def start(self, limit):
        """Begin capturing for one exec with this output limit (characters)."""
        with self._lock:
            self._buffer = OutputBuffer(limit)

    def stop(self):
        """End capturing; returns (text, dropped). Later writes go to the fallback again."""
        with self._lock:
            buf, self._buffer = self._buffer, None
        return buf.result() if buf is not None else ("", 0)

    def peek(self, n):
        """(the last `n` characters of this exec's output so far, characters written in all);
        ("", 0) when not capturing. Any thread."""
        with self._lock:
            buf = self._buffer
            return buf.last(n) if buf is not None else ("", 0)

    @property
    def capturing(self):
        return self._buffer is not None

    # -- text stream interface ----------------------------------------------------------
    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        with self._lock:
            buf = self._buffer
            if buf is not None:
                buf.add(s)
                return len(s)
        fallback = self.fallback
        if fallback is not None:
            try:
                fallback.write(s)
                fallback.flush()
            except Exception:  # noqa: BLE001 - stray output must never break the caller
                pass
        return len(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def close(self):
        pass  # closing sys.stdout from sandbox code must not break later output

    @property
    def closed(self):
        return False

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False

    def fileno(self):
        raise io.UnsupportedOperation("fileno: sandbox output is captured, not a file")

    def __repr__(self):
        return "<mcp-bridge capture %s>" % self.name
