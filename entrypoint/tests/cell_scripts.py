"""Sandbox code shared by the unit (test_cell_processes.py) and end-to-end
(tests/e2e/test_cell_processes.py) tests of killing an interrupted cell's processes."""

# One program for the processes the cells start: `python -c WORKER <mode> <notes file> WORKER`.
WORKER = r'''
import os, subprocess, sys, time
mode, path = sys.argv[1], sys.argv[2]
def note(kind):
    with open(path, "a") as f:
        f.write("%s %d\n" % (kind, os.getpid()))
if mode == "helper":  # started on purpose by a cell that ends normally
    note("helper")
    time.sleep(1000)
elif mode == "parent":  # a child that starts a grandchild and waits for it
    note("parent")
    subprocess.Popen([sys.executable, "-c", sys.argv[3], "grandchild", path, sys.argv[3]]).wait()
elif mode == "grandchild":
    note("grandchild")
    while True:
        pass
elif mode == "daemon":  # the classic double fork: ends up re-parented, in its own session
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    note("daemon")
    while True:
        time.sleep(0.01)
'''

# Cell 1, ends normally: a helper process meant to outlive it.
START_HELPER = """
import json, os, subprocess, sys, tempfile, time
WORKER = WORKER_SOURCE
cp_notes = os.path.join(tempfile.mkdtemp(), "pids")
cp_helper = subprocess.Popen([sys.executable, "-c", WORKER, "helper", cp_notes, WORKER])

def cp_noted():
    try:
        with open(cp_notes) as f:
            return {kind: int(pid) for kind, pid in (line.split() for line in f)}
    except OSError:
        return {}

def cp_start(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])

def cp_alive(pids, starts):
    return {kind: cp_start(pid) is not None and cp_start(pid) == starts[kind]
            for kind, pid in pids.items()}

while "helper" not in cp_noted():
    time.sleep(0.01)
cp_helper_start = {"helper": cp_start(cp_helper.pid)}
time.sleep(0.05)  # the next exec begins in a later clock tick
""".replace("WORKER_SOURCE", repr(WORKER))


# Cell 2, interrupted: every kind of process, then a long sleep.
START_ALL = """
cp_busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
cp_session = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
subprocess.Popen([sys.executable, "-c", WORKER, "parent", cp_notes, WORKER])
subprocess.run([sys.executable, "-c", WORKER, "daemon", cp_notes, WORKER], check=True)
while len(cp_noted()) < 4:
    time.sleep(0.01)
cp_pids = dict(cp_noted(), busy=cp_busy.pid, session=cp_session.pid)
del cp_pids["helper"]
cp_starts = {kind: cp_start(pid) for kind, pid in cp_pids.items()}
"""
