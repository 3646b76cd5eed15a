"""Modules imported ahead (MCP_BRIDGE_PRELOAD; ARCHITECTURE.md, "Importing ahead"): the host sends
one `preload` frame to a sandbox it started before any run. The main thread imports the modules
between execs, before the next one, into sys.modules only: the user's namespace stays as it was, and
a cell's `import pandas as pd` then finds the module loaded. What the imports print is dropped (the
cell captures are installed with no room, so a logging handler made now keeps them, as it would in
a cell). A module that fails, whatever it raises (SystemExit included), is named in the
`preloaded` answer and the next one is tried: the sandbox goes on either way."""
import importlib
import sys
import time

from . import protocol

MAX_MODULES = 32  # MCP_BRIDGE_PRELOAD's bound (MAX_PRELOAD on the host)
MAX_NAME = 256  # characters of a module name
MAX_WHY = 400  # characters of a failure's reason sent back


def module_names(value):
    """The module names of a frame's `modules`: the dotted identifiers among its first
    MAX_MODULES items."""
    if not isinstance(value, list):
        return []
    return [name for name in value[:MAX_MODULES]
            if isinstance(name, str) and len(name) <= MAX_NAME
            and all(part.isidentifier() for part in name.split("."))]


def why(exc):
    """`Type: message` of a failed import, cut to MAX_WHY characters."""
    try:
        text = "%s: %s" % (type(exc).__name__, exc)
    except Exception:  # noqa: BLE001 - a str() that raises
        text = type(exc).__name__
    return text if len(text) <= MAX_WHY else text[:MAX_WHY - 1] + "…"


def import_ahead(names, stdout, stderr):
    """Import each of `names` with `stdout`/`stderr` (capture.Capture) as sys.stdout/sys.stderr,
    capturing nothing; returns [[name, why], ...] for those that failed."""
    failed = []
    saved = sys.stdout, sys.stderr
    stdout.start(0)
    stderr.start(0)
    sys.stdout, sys.stderr = stdout, stderr
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except BaseException as exc:  # noqa: BLE001 - a module may raise anything, even SystemExit
                failed.append([name, why(exc)])
    finally:
        sys.stdout, sys.stderr = saved
        stdout.stop()
        stderr.stop()
    return failed


def serve(frame, stdout, stderr, send):
    """Answer one `preload` frame (main thread, between execs) with `preloaded`."""
    names = module_names(frame.get("modules"))
    began = time.monotonic()
    failed = import_ahead(names, stdout, stderr)
    send(protocol.preloaded_frame(len(names) - len(failed), failed,
                                  int((time.monotonic() - began) * 1000)))
