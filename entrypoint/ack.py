"""The `started` acknowledgement of an exec: at once on the socket channel, lazily on stdio.

The host retries an exec on a fresh sandbox if the sandbox dies before `started` arrived (the
code provably never ran). Each frame crossing a container engine's attach proxy can cost
milliseconds, so `started` is not sent for execs that finish quickly (their `result` implies it):
it goes out after DELAY from a helper thread, or at once before the exec's first `call` frame,
so anything the host could observe as a side effect is always preceded by `started`. On the
socket channel a frame is cheap, so `started` goes out before the code runs (`eager`): then a death
after it is always reported on the call, never mistaken for "killed before the code arrived"."""
import threading

from .protocol import started_frame

DELAY = 0.005  # seconds an exec may run before `started` is sent anyway


class StartedAck:
    """One pending acknowledgement at a time (execs run one after another)."""

    def __init__(self, send, delay=DELAY, eager=False):
        self._send = send  # frame dict -> None
        self._delay = delay
        self.eager = eager  # `started` goes out as each exec begins; `now` has nothing to do
        self._cond = threading.Condition()
        self._pending = None  # exec id whose `started` has not been sent
        if not eager:
            threading.Thread(target=self._run, name="mcp-started-ack", daemon=True).start()

    def begin(self, exec_id):
        """The main thread is about to run exec `exec_id`."""
        if self.eager:
            self._send(started_frame(exec_id))
            return
        with self._cond:
            self._pending = exec_id
            self._cond.notify()

    def now(self):
        """Send the pending `started` immediately (before a `call` frame)."""
        if self.eager:  # sent when the exec began
            return
        with self._cond:
            pending, self._pending = self._pending, None
        if pending is not None:
            self._send(started_frame(pending))

    def finish(self):
        """The exec is done: its `result` implies it started."""
        with self._cond:
            self._pending = None

    def _run(self):
        while True:
            with self._cond:
                while self._pending is None:
                    self._cond.wait()
                pending = self._pending
                self._cond.wait(self._delay)
                if self._pending != pending:
                    continue  # finished, or already sent, in time
                self._pending = None
            self._send(started_frame(pending))
