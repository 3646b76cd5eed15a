"""Process entry of the sandbox: claims fds 0/1 for the frame channel, sends `ready`, runs the
reader thread (host frames -> exec queue, reply resolution, interrupts) and the exec loop on the
main thread. Frames use fds 0/1, or the socket channel when the boot frame offers one (channel.py).
Exits 0 on EOF or a `shutdown` frame. Only this file touches fds 0/1/2."""
import fcntl
import os
import queue
import signal
import sys
import threading
import traceback

from . import (
    channel,
    confine,
    egress,
    inbox,
    jscells,
    keeper,
    outbox,
    pictures,
    preload,
    protocol,
    runtime,
    sandbox_api,
    selfcheck,
    snapshot,
)
from .ack import StartedAck
from .capture import Capture
from .runner import ExecState, Runner

EXIT_GRACE = 3.0  # seconds the main thread gets to finish after EOF/shutdown before a hard exit
PRIVATE_FD_MIN = 100  # the frame fds sit out of the way of code that reuses low fds
MAX_TAIL = 65536  # characters of output a `progress` frame may ask for per stream


def _dup_private(fd):
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, PRIVATE_FD_MIN)
    except OSError:
        return os.dup(fd)  # also close-on-exec (non-inheritable)


def claim_fds():
    """Take fd 0/1 for frames: returns (in_fd, out_fd). Afterwards fd 0 reads /dev/null and fd 1
    is a copy of fd 2, so stray output from any code or subprocess lands on stderr."""
    in_fd, out_fd = _dup_private(0), _dup_private(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, ValueError):
        pass
    return in_fd, out_fd


def _is_id(value):
    return isinstance(value, int) and not isinstance(value, bool)


class HostReader:
    """The reader thread: parses host frames and dispatches them."""

    def __init__(self, state, calls, execq, main_ident, on_progress=None):
        self.state, self.calls, self.execq, self.main_ident = state, calls, execq, main_ident
        self.on_progress = on_progress  # `progress` frame -> None (answers with `output`)
        self.restoring = keeper.Restoring()

    def dispatch_line(self, line):
        """Handle one line from the host (see inbox.Inbox); False when reading should stop."""
        if not line or line.isspace():
            return True
        if line.startswith(keeper.RESTORE_PREFIX):
            frame = keeper.restore_frame(line)
            if frame is not None:
                return self.dispatch(frame)
        try:
            frame = protocol.decode(line)
        except protocol.FrameError as exc:
            protocol.log("malformed frame from the host ignored: %s" % exc)
            return True
        try:
            return self.dispatch(frame)
        except Exception:  # noqa: BLE001 - a bad frame must never kill the reader
            protocol.log("frame %r failed:\n%s" % (frame.get("t"), traceback.format_exc()))
            return True

    def run(self, inbox):
        """The reader thread: read until the channel ends or the host asks to shut down."""
        if inbox.run_thread() == "stdin closed":
            self.stop("stdin closed")

    def dispatch(self, frame):
        """Handle one frame; returns False when reading should stop (shutdown)."""
        kind = frame["t"]
        if kind == "reply":
            self.calls.resolve(frame)
        elif kind == "exec":
            if _is_id(frame.get("id")):
                self.execq.put(frame)
            else:
                protocol.log("exec frame without an integer id ignored")
        elif kind == "interrupt":
            if _is_id(frame.get("id")):
                self.state.request_interrupt(frame["id"], self.main_ident)
        elif kind == "progress":
            if _is_id(frame.get("id")) and self.on_progress is not None:
                self.on_progress(frame)
        elif kind == "save_namespace":
            if _is_id(frame.get("id")):
                self.execq.put(frame)  # runs between execs, on the main thread
        elif kind == "preload":
            self.execq.put(frame)  # imported on the main thread, before the next exec
        elif kind == "restore_namespace":
            job = self.restoring.add(frame)
            if job is not None:
                self.execq.put(job)
        elif kind == "shutdown":
            self.stop("shutdown requested")
            return False
        else:
            protocol.log("unknown frame type %r ignored" % (kind,))
        return True

    def stop(self, reason):
        """No more frames will come: wake waiting calls, stop a running exec, end the exec loop,
        and make sure the process is gone even if sandbox code refuses to stop."""
        self.calls.close("the bridge connection is closed (%s)" % reason)
        running = self.state.running
        if running is not None:
            self.state.request_interrupt(running, self.main_ident)
        self.execq.put(None)
        timer = threading.Timer(EXIT_GRACE, os._exit, (0,))
        timer.daemon = True
        timer.start()


def serve(runner, execq, writer, ack):
    """The exec loop (main thread): one exec at a time, in arrival order, until None."""
    while True:
        frame = None
        try:
            frame = execq.get()
            if frame is None:
                return
            if frame["t"] == "save_namespace":
                keeper.serve_save(frame, runner.namespace, writer, runner.js)
                continue
            if frame["t"] == "restore_namespace":
                keeper.serve_restore(frame, runner.namespace, writer.send, runner.js)
                continue
            if frame["t"] == "preload":
                preload.serve(frame, runner.stdout, runner.stderr, writer.send)
                continue
            # sandbox code may have replaced the handler; this one is the interrupt contract
            signal.signal(signal.SIGINT, runner.state.on_sigint)
            ack.begin(frame["id"])  # the host may retry the exec until `started` is sent
            result = runner.run(frame)
            ack.finish()
            writer.send(result)
        except KeyboardInterrupt:  # only possible after several interrupts in a row
            protocol.log("interrupt outside sandbox code ignored")
        except Exception:  # noqa: BLE001 - an entrypoint bug: still answer the exec
            text = traceback.format_exc()
            protocol.log("exec failed inside the entrypoint:\n%s" % text)
            if isinstance(frame, dict) and frame.get("t") == "exec":
                writer.send(protocol.result_frame(frame["id"], False,
                                                  error="sandbox entrypoint error:\n" + text))


def main(leftover=b"", channel_offer=None):
    """Run the entrypoint until EOF/shutdown; returns the exit code (0)."""
    in_fd, out_fd = claim_fds()
    ready = protocol.ready_frame("%d.%d.%d" % sys.version_info[:3], None)
    egress_fd = None
    if isinstance(channel_offer, dict) and channel_offer.get("egress") is not None:
        # first: the bridge removes the channel's folder once the frame socket is taken
        egress_fd, why = egress.connect(channel_offer["egress"])
        if egress_fd is None:
            ready["egress_error"] = why
            protocol.log("no way out for the sandbox: %s" % why)
    if channel_offer is not None:
        fd, why = channel.connect(channel_offer)
        if fd is None:
            ready["channel_error"] = why
        else:  # every frame moves to the socket; stdin is no longer read
            os.close(in_fd)
            in_fd = out_fd = _dup_private(fd)
            os.close(fd)
            leftover = b""
            ready["channel"] = "socket"
    # the channel is connected and no other thread runs yet: the rules against ways out of a
    # shared folder go on now, and the posture reports whether they are in force
    confine.install(os.environ.get("MCP_BRIDGE_SHARED", ""))
    for why in confine.state["why"]:
        protocol.log("sandbox rule not in force: %s" % why)
    if egress_fd is not None:
        egress.start(egress_fd)  # after confinement: Landlock wants a single thread
    ready["posture"] = selfcheck.posture()
    state = ExecState()
    writer = protocol.FrameWriter(out_fd, main_guard=state)
    ack = StartedAck(writer.send, eager=ready["channel"] == "socket")

    def send_call(frame):
        ack.now()  # every host-visible side effect comes after `started`
        writer.send(frame)

    # On the socket channel `started` went out before the code ran: calls go straight out.
    host_send = writer.send if ack.eager else send_call
    calls = protocol.CallTable(host_send, lambda: state.last_exec)
    sandbox_api.install(calls)
    runner = Runner(state, Capture("<stdout>", sys.stdout), Capture("<stderr>", sys.stderr),
                    prepare=sandbox_api.prepare_exec, main_module=True)
    files_out = outbox.Outbox.from_env(host_send)
    shown = pictures.Pictures(files_out, lambda: state.last_exec,
                              outbox.env_int("MCP_BRIDGE_IMAGES_MAX_SIDE", 1568),
                              outbox.env_int("MCP_BRIDGE_IMAGES_MAX_BYTES", 1 << 20))
    shown.install()

    def after(exec_id):
        shown.take_open_figures()
        files_out.flush(exec_id)

    runner.after = after
    runner.js = jscells.JsCells()
    def reset():
        """`runtime.reset()`: Python's names, and the JavaScript runtime with its own."""
        runner.js.end()
        return snapshot.clear(runner.namespace)

    runtime.bind_reset(reset)
    runtime.bind_sources(runner.source_lines)
    signal.signal(signal.SIGINT, state.on_sigint)  # before `ready`: no interrupt can be lost
    execq = queue.Queue()

    def on_progress(frame):
        """Answer the host's `progress` poll: the running exec's output so far."""
        eid = frame["id"]
        if state.running != eid:
            return  # over already: its result says the rest
        tail = frame.get("tail")
        tail = tail if _is_id(tail) and 0 <= tail <= MAX_TAIL else 1024
        ack.now()  # output is a side effect the host may see only after `started`
        out, out_total = runner.stdout.peek(tail)
        err, err_total = runner.stderr.peek(tail)
        writer.send(protocol.output_frame(eid, out, out_total, err, err_total))

    reader = HostReader(state, calls, execq, threading.get_ident(), on_progress)
    box = inbox.Inbox(in_fd, reader.dispatch_line, state, leftover)
    calls.inbox = runner.inbox = box
    writer.send(ready)
    threading.Thread(target=reader.run, args=(box,), name="mcp-frame-reader",
                     daemon=True).start()
    serve(runner, execq, writer, ack)
    writer.close()
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    return 0
