"""Runs one `exec` frame in the persistent namespace and builds its `result` frame: compile with
top-level await, run on the process's single event loop, capture stdout/stderr, and turn an
exception into a traceback that shows only the sandbox code's frames. Also owns the interrupt
state and the SIGINT handler. Never writes to the frame channel itself."""
import asyncio
import builtins
import collections
import inspect
import signal
import sys
import traceback
import types

from . import cell, cellprocs, jscells, precheck, protocol
from .inbox import TrackedSelector

FILENAME = "<run_python>"
DEFAULT_OUTPUT_LIMIT = 65536
CANCEL_GRACE = 0.5  # seconds an interrupted task gets to unwind after cancel()
HISTORY = 200  # execs whose source lines tracebacks can still show
_PKG = __name__.rpartition(".")[0]


class ExecState:
    """Which exec is running and whether an interrupt was asked for it. The reader thread and the
    SIGINT handler share it through single attribute reads/writes (no locks in the handler).

    `procs` (cellprocs.CellProcesses; by default the one boot.py enabled, else none) kills the
    processes an interrupted exec started: at once from the reader thread, then again before
    the result is sent."""

    def __init__(self, procs=None):
        self.procs = procs if procs is not None else cellprocs.ACTIVE
        self.began = 0.0  # CLOCK_BOOTTIME when the running exec began (when procs is set)
        self.swept_for = None  # the exec an interrupt was sent to: sweep when it ends
        self.running = None  # id of the exec being run, None between execs
        self.interrupt_for = None  # exec id an interrupt frame asked to stop
        self.fired = False  # a KeyboardInterrupt was raised for the running exec
        self.last_exec = 0
        self.writing = False  # the main thread is writing a frame: defer the interrupt
        self.deferred = False  # an interrupt arrived while writing
        self.pending_cancel = None  # id of a queued exec the host interrupted before it began

    def begin(self, exec_id):
        self.interrupt_for, self.fired, self.last_exec = None, False, exec_id
        if self.procs is not None:
            self.began = cellprocs.boottime()
        self.running = exec_id

    def cancelled_before_start(self, exec_id):
        """Main thread, after `begin`: True (once) if the host interrupted this exec while it
        was still queued; it must then not run."""
        if self.pending_cancel != exec_id:
            return False
        self.pending_cancel = self.interrupt_for = None  # a signal sent meanwhile is moot
        self.fired = True
        return True

    def request_interrupt(self, exec_id, main_ident):
        """Reader thread: SIGINT the main thread if `exec_id` is running. An exec that has not
        begun yet (ids only grow) is remembered and stopped as it begins; older ones are
        ignored, so a late interrupt never hits the next exec."""
        running = self.running
        if running != exec_id:
            if exec_id <= (self.last_exec if running is None else running):
                return False
            self.pending_cancel = exec_id
            if self.running != exec_id:  # not begun yet: `cancelled_before_start` stops it
                return False
        self.interrupt_for = exec_id
        if self.procs is not None and self.swept_for != exec_id:
            # Before the signal: once it lands, the main thread may unwind and reach
            # `sweep_after` before this thread runs again, and must find the sweep asked for.
            self.swept_for = exec_id
            # the main thread may be stuck: do not wait for it
            self.procs.sweep_soon(self.began, lambda: self.running == exec_id)
        signal.pthread_kill(main_ident, signal.SIGINT)
        return True

    def sweep_after(self, exec_id):
        """Main thread, once exec `exec_id` is over: if it was interrupted, kill what it
        started before its result goes out."""
        if self.swept_for == exec_id and self.procs is not None:
            self.procs.sweep(self.began)

    def on_sigint(self, signum, frame):
        """Main-thread SIGINT handler: raise only for an interrupt of the exec still running, so
        a late or stray signal can never break result sending."""
        target = self.interrupt_for
        if target is not None and target == self.running:
            if self.writing:  # never cut a frame in half: raise once it is written
                self.deferred = True
                return
            self.interrupt_for, self.fired = None, True
            raise KeyboardInterrupt

    def __enter__(self):
        """Main thread writes a frame: interrupts wait until it is complete."""
        self.writing = True
        return self

    def __exit__(self, *exc):
        self.writing = False
        if self.deferred:
            self.deferred = False
            if self.interrupt_for is not None and self.interrupt_for == self.running:
                self.interrupt_for, self.fired = None, True
                raise KeyboardInterrupt
        return False


class _Interrupted(BaseException):
    def __init__(self, text):
        super().__init__(text)
        self.text = text


class Runner:
    """The persistent interpreter state: one namespace, one event loop, and the captures."""

    def __init__(self, state, stdout, stderr, prepare=None, main_module=False):
        self.state, self.stdout, self.stderr = state, stdout, stderr
        self.prepare = prepare  # (namespace, exec frame) -> None, run before each exec
        # exec id -> None, run after each exec's code while it still counts as running (an
        # interrupt can stop it): the pictures and files out. Not after an interrupted exec.
        self.after = None
        self.module = types.ModuleType("__main__")
        self.namespace = self.module.__dict__
        self.namespace["__builtins__"] = builtins
        self.main_module = main_module  # also publish the namespace as sys.modules["__main__"]
        self._orig = (sys.stdout, sys.stderr)
        self._sources = {}  # id(code) -> (code, source lines), for traceback lines
        self._history = collections.OrderedDict()  # serial -> code objects of that exec
        self._serial = 0
        self._outputs = {}
        self.loop = self.selector = None
        self.inbox = None  # inbox.Inbox: the exec loop reads host frames while it waits
        self.js = None  # jscells.JsCells: runs exec frames whose "language" is "typescript"
        self._js_error = None  # why node could not be started for the exec being run
        self._ensure_loop()

    def close(self):
        if self.loop is not None and not self.loop.is_closed():
            self.loop.close()

    def _ensure_loop(self):
        if self.loop is None or self.loop.is_closed():
            self.selector = TrackedSelector()
            self.loop = asyncio.SelectorEventLoop(self.selector)
        asyncio.set_event_loop(self.loop)  # sandbox code may have replaced or cleared it
        return self.loop

    # -- one exec --------------------------------------------------------------------------
    def run(self, frame):
        """Run one exec frame (a dict with "id" and "code"); returns the result frame."""
        eid, code, limit = frame["id"], frame.get("code"), frame.get("output_limit")
        if not isinstance(limit, int) or isinstance(limit, bool):
            limit = DEFAULT_OUTPUT_LIMIT
        limit = max(0, limit)
        st, outcome = self.state, None
        self._outputs = {}
        if frame.get("language") == "typescript" and self.js is not None:
            # node starts before the exec counts as begun: an interrupt's sweep spares it
            self._js_error = self.js.prepare()
        try:
            try:
                st.begin(eid)
                sys.stdout, sys.stderr = self.stdout, self.stderr
                self.stdout.start(limit)
                self.stderr.start(limit)
                outcome = self._execute(code, frame)
                if self.after is not None and not st.fired:
                    self._after(eid)
            finally:
                st.running = None
                self._leave()
        except KeyboardInterrupt:  # the interrupt landed in this function's own bookkeeping
            st.running = None
            self._leave()
            outcome = outcome or (False, "KeyboardInterrupt\n", None)
        try:
            st.sweep_after(eid)
        except KeyboardInterrupt:  # a stray signal: the reader thread's sweep goes on anyway
            pass
        ok, error, exit_info = outcome
        (out, out_dropped), (err, err_dropped) = self._outputs["out"], self._outputs["err"]
        cap = max(limit, 8192)
        if exit_info is not None and exit_info[1] is not None:
            exit_info = (exit_info[0], _cap(exit_info[1], cap))
        return protocol.result_frame(eid, ok, out, err,
                                     None if ok else _cap(error, cap),
                                     out_dropped, err_dropped, bool(st.fired and not ok), exit_info)

    def _after(self, eid):
        try:
            self.after(eid)
        except Exception:  # noqa: BLE001 - an entrypoint bug: the exec's own outcome stands
            self.stderr.write("note: the cell's files could not be sent:\n%s"
                              % traceback.format_exc())

    def _leave(self):
        sys.stdout, sys.stderr = self._orig
        for key, cap in (("out", self.stdout), ("err", self.stderr)):
            if key not in self._outputs:
                self._outputs[key] = cap.stop()

    def _execute(self, code, frame):
        try:
            if not isinstance(code, str):
                raise TypeError("malformed exec frame: \"code\" must be a string")
            loop = self._ensure_loop()
            if self.main_module:
                sys.modules["__main__"] = self.module
            if self.prepare is not None:  # even when cancelled: the host counts its tools sent
                self.prepare(self.namespace, frame)
            if self.state.cancelled_before_start(frame["id"]):
                raise KeyboardInterrupt("interrupted before it started")
            if frame.get("language") is not None and frame.get("language") != "python":
                self._execute_js(loop, frame)
                return True, None, None
            precheck.check(code, self.namespace, cell.FLAGS)
            compiled, shows = cell.compile_cell(code, FILENAME)
            self._remember(compiled, code)
            if compiled.co_flags & inspect.CO_COROUTINE:
                self._await(loop, eval(compiled, self.namespace))
            else:
                exec(compiled, self.namespace)
            if shows:  # notebook behaviour: the final expression's value is shown
                cell.show(cell.take_result(self.namespace), sys.stdout, sys.stderr)
            return True, None, None
        except BaseException as exc:  # noqa: BLE001 - everything the sandbox code raises
            cell.take_result(self.namespace)
            return False, self.format_exception(cell.explain(exc)), exit_of(exc)

    def _execute_js(self, loop, frame):
        """Run a TypeScript exec in the node child (jscells.py); raises _Interrupted with the
        error text when the cell failed, was interrupted or took node with it."""
        js = self.js
        if frame.get("language") != "typescript" or js is None:
            raise _Interrupted("this sandbox runs python and typescript cells, not %r"
                               % (frame.get("language"),))
        if self._js_error is not None:
            raise _Interrupted(self._js_error)
        servers = jscells.servers_of(self.namespace.get("mcp_servers"))
        eid, code = frame["id"], frame.get("code")
        if self.inbox is not None:
            self.inbox.attach(loop, self.selector)
        try:
            task = loop.create_task(js.start_cell(eid, code, servers))
            try:
                done = loop.run_until_complete(task)
            except KeyboardInterrupt:
                done = self._stop_js(loop, task, eid)
        except jscells.NodeLost as exc:
            raise _Interrupted(js.lost(str(exc))) from None
        finally:
            if self.inbox is not None:
                self.inbox.detach()
        if done.get("ok") is not True:
            error = done.get("error")
            raise _Interrupted(error if isinstance(error, str) and error else "the cell failed")

    def _stop_js(self, loop, task, eid):
        """The exec was interrupted: SIGINT node and wait INTERRUPT_WAIT for the cell's end;
        else kill node (its state is lost; the error says so)."""
        js = self.js
        if not task.done():
            task.cancel()
        js.interrupt()
        try:
            loop.run_until_complete(asyncio.wait([task], timeout=0.05))
            return loop.run_until_complete(
                asyncio.wait_for(js.wait_done(eid), jscells.INTERRUPT_WAIT))
        except (TimeoutError, KeyboardInterrupt):
            raise _Interrupted("KeyboardInterrupt: the cell did not stop within %.1f s of the "
                               "interrupt. %s" % (jscells.INTERRUPT_WAIT,
                                                  js.lost("was killed"))) from None

    def _await(self, loop, coro):
        task = loop.create_task(coro)
        if self.inbox is not None:
            self.inbox.attach(loop, self.selector)
        try:
            self._run_task(loop, task)
        finally:
            if self.inbox is not None:
                self.inbox.detach()

    def _run_task(self, loop, task):
        try:
            loop.run_until_complete(task)
        except KeyboardInterrupt:
            if task.done():  # the code's own outcome wins (it may be the KeyboardInterrupt)
                task.result()
                return
            # Raised by the loop itself (e.g. while waiting in select): show where the code was.
            text = self._format_frames(task.get_stack(), "KeyboardInterrupt\n")
            self._cancel(loop, task)
            raise _Interrupted(text) from None
        except BaseException:  # e.g. sandbox code stopped the loop: do not leave the task behind
            self._cancel(loop, task)
            raise

    @staticmethod
    def _cancel(loop, task):
        """Cancel the exec's task and give it CANCEL_GRACE seconds to unwind."""
        if task.done():  # e.g. it raised SystemExit, which the loop passes on: mark it retrieved
            if not task.cancelled():
                task.exception()
            return
        task.cancel()
        try:
            loop.run_until_complete(asyncio.wait([task], timeout=CANCEL_GRACE))
        except BaseException:  # noqa: BLE001 - a second interrupt, a stopped loop: stop waiting
            pass
        if task.done() and not task.cancelled():
            task.exception()  # mark retrieved

    # -- tracebacks ------------------------------------------------------------------------
    def _remember(self, compiled, source):
        lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        lines = lines if len(source) <= 1 << 20 else []
        codes, todo = [], [compiled]
        while todo:
            code = todo.pop()
            codes.append(code)
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for code in codes:
            self._sources[id(code)] = (code, lines)
        self._serial += 1
        self._history[self._serial] = codes
        while len(self._history) > HISTORY:
            for code in self._history.popitem(last=False)[1]:
                if self._sources.get(id(code), (None,))[0] is code:
                    del self._sources[id(code)]

    def source_lines(self, code):
        """The source lines of the cell `code` was compiled in (one of the last HISTORY cells),
        or None."""
        entry = self._sources.get(id(code))
        return entry[1] if entry is not None and entry[0] is code else None

    def _line(self, code, lineno):
        entry = self._sources.get(id(code)) if code is not None else None
        if entry is None or entry[0] is not code or not lineno or not 0 < lineno <= len(entry[1]):
            return ""
        return entry[1][lineno - 1]

    def format_exception(self, exc):
        """The traceback text for `exc`, with the entrypoint's own frames removed."""
        if isinstance(exc, _Interrupted):
            return exc.text
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        self._clean(te, exc, set())
        return "".join(te.format())

    def _clean(self, te, exc, seen):
        if te is None or exc is None or id(te) in seen:
            return
        seen.add(id(te))
        frames = [f for f, _ in traceback.walk_tb(exc.__traceback__)]
        codes = [f.f_code for f in frames] if len(frames) == len(te.stack) else None
        te.stack = traceback.StackSummary.from_list(
            self._user_frames(list(zip(te.stack, codes or [None] * len(te.stack), strict=False))))
        self._clean(te.__cause__, exc.__cause__, seen)
        self._clean(te.__context__, exc.__context__, seen)
        for sub_te, sub in zip(getattr(te, "exceptions", None) or (),
                               getattr(exc, "exceptions", None) or (), strict=False):
            self._clean(sub_te, sub, seen)

    def _format_frames(self, frames, tail):
        pairs = [(traceback.FrameSummary(f.f_code.co_filename, f.f_lineno, f.f_code.co_name,
                                         lookup_line=False), f.f_code) for f in frames]
        kept = self._user_frames(pairs)
        head = "Traceback (most recent call last):\n" if kept else ""
        return head + "".join(traceback.StackSummary.from_list(kept).format()) + tail

    def _user_frames(self, pairs):
        """Keep the frames from the first sandbox-code frame on (else those after the last
        entrypoint frame), minus entrypoint frames; give sandbox frames their source line."""
        internal = _internal_files()
        user = [i for i, (fs, _) in enumerate(pairs) if fs.filename == FILENAME]
        ours = [i for i, (fs, _) in enumerate(pairs) if fs.filename in internal]
        pairs = pairs[user[0]:] if user else pairs[(ours[-1] + 1 if ours else 0):]
        kept = []
        for fs, code in pairs:
            if fs.filename in internal:
                continue
            if fs.filename == FILENAME:
                fs = traceback.FrameSummary(FILENAME, fs.lineno, fs.name, lookup_line=False,
                                            line=self._line(code, fs.lineno))
            kept.append(fs)
        return kept


def exit_of(exc):
    """`(code, message)` for a SystemExit, as the `python3` command would exit with it (None
    → 0, an int → its low byte, anything else → 1 with its str as the message); else None."""
    if not isinstance(exc, SystemExit):
        return None
    code = exc.code
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code & 0xFF, None
    try:
        return 1, str(code)
    except Exception:  # noqa: BLE001 - a hostile __str__: still an exit with code 1
        return 1, None


def _internal_files():
    return {getattr(mod, "__file__", None) for name, mod in list(sys.modules.items())
            if (name == _PKG or name.startswith(_PKG + ".")) and ".tests" not in name} - {None}


def _cap(text, limit):
    """Keep huge error texts inside the frame budget (head 3/4, tail 1/4, marker between)."""
    if text is None or len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return "%s\n[... %d characters cut ...]\n%s" % (text[:head], len(text) - limit, text[-tail:])
