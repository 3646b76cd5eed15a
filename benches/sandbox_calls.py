"""The sandbox side of proxied calls, alone: the real entrypoint modules (proxies, call table,
frame writer, inbox, the exec loop's selector) over a socketpair, answered by a forked echo host.
Prints the CPU time per call of this process (all its threads) and the wall time per call.

    python3 benches/sandbox_calls.py            # N=5000 calls x REPS=5, medians
    N=500 REPS=1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \\
        "$(python3 -c 'import sys; print(sys.executable)')" benches/sandbox_calls.py
    # instructions per call: (total at N=1500 - total at N=500) / 1000, of the parent's file

Not part of the test suite; see benches/RESULTS.md for what it measured."""
import asyncio
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from entrypoint import inbox, protocol, sandbox_api  # noqa: E402
from entrypoint.ack import StartedAck  # noqa: E402
from entrypoint.runner import ExecState  # noqa: E402

REPLY = {"content": [{"type": "text", "text": "x"}]}


def echo_host(sock):
    """Answers every `call` frame with REPLY until the socket closes (child process)."""
    fd, buf = sock.fileno(), b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            os._exit(0)
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            frame = json.loads(line)
            if frame.get("t") == "call":
                reply = {"t": "reply", "id": frame["id"], "ok": True, "value": REPLY}
                os.write(fd, json.dumps(reply).encode() + b"\n")


def main():
    ours, theirs = socket.socketpair()
    if os.fork() == 0:
        ours.close()
        echo_host(theirs)
    theirs.close()
    fd = ours.detach()
    state = ExecState()
    writer = protocol.FrameWriter(fd, main_guard=state)
    ack = StartedAck(writer.send, eager=True)

    def send_call(frame):
        ack.now()
        writer.send(frame)

    calls = protocol.CallTable(send_call, lambda: state.last_exec)
    sandbox_api.install(calls)

    def dispatch(line):
        frame = protocol.decode(line)
        if frame["t"] == "reply":
            calls.resolve(frame)
        return True

    box = inbox.Inbox(fd, dispatch, state)
    calls.inbox = box
    threading.Thread(target=box.run_thread, daemon=True).start()
    echo = sandbox_api._registry.load({"stub": ["echo"]})["stub"].echo
    selector = inbox.TrackedSelector()
    loop = asyncio.SelectorEventLoop(selector)
    asyncio.set_event_loop(loop)
    n, reps = int(os.environ.get("N", "5000")), int(os.environ.get("REPS", "5"))

    async def run(count):
        for _ in range(count):
            await echo(text="x")

    async def measure():
        await run(300)
        out = []
        for _ in range(reps):
            cpu, wall = time.process_time(), time.perf_counter()
            await run(n)
            out.append(((time.process_time() - cpu) / n * 1e6,
                        (time.perf_counter() - wall) / n * 1e6))
        return out

    state.begin(1)
    box.attach(loop, selector)
    try:
        results = loop.run_until_complete(measure())
    finally:
        box.detach()
    cpu = sorted(r[0] for r in results)
    wall = sorted(r[1] for r in results)
    print("sandbox side: CPU %.1f µs/call, wall %.1f µs/call (medians of %d x %d calls)"
          % (cpu[len(cpu) // 2], wall[len(wall) // 2], reps, n))
    prepare_cost()


def _entry(i):
    """A tool entry shaped like docs::proxy_entry's."""
    return {"name": "tool_%02d" % i, "doc": "Does thing %d with the given values." % i,
            "params": [["a", "str", True], ["b", "int", False, 3]], "returns": "dict"}


def prepare_cost(servers=50, tools=20, runs=2000):
    """CPU per exec spent binding the exec's servers (decode of the exec frame + prepare_exec),
    naming `servers` servers of `tools` tools each vs naming one, once their tool lists were
    sent. The frames mark every server unchanged with `true`, which every entrypoint version
    reads as unchanged."""
    names = ["bench%02d" % i for i in range(servers)]
    namespace = {}
    full = {"t": "exec", "id": 1, "code": "", "servers": names,
            "tools": {n: [_entry(i) for i in range(tools)] for n in names}}
    sandbox_api.prepare_exec(namespace, full)
    out = []
    for named in (names, names[:1]):
        line = protocol.encode(dict(full, servers=named, tools={n: True for n in named}))[:-1]
        cpu = time.process_time()
        for _ in range(runs):
            sandbox_api.prepare_exec(namespace, protocol.decode(line))
        out.append((time.process_time() - cpu) / runs * 1e6)
        sandbox_api.prepare_exec(namespace, full)
    print("exec preparation: CPU %.1f µs naming %d servers x %d tools, %.1f µs naming 1"
          % (out[0], servers, tools, out[1]))


if __name__ == "__main__":
    main()
