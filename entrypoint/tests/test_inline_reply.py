"""Inbox.settle_inline: a proxied call whose loop has nothing else to do is answered inside the
calling task, without suspending it; anything else that becomes runnable still runs first."""
import asyncio
import collections
import json
import os
import signal
import socket
import sys
import threading
import time
import types
import unittest
import unittest.mock

from entrypoint import inbox, protocol
from entrypoint.inbox import Inbox, TrackedSelector

HOLD_LIMIT = 3.0  # seconds a held reply waits for its release before it is sent anyway


class Host:
    """The bridge's side of a socketpair: answers every call frame with its params, at once or,
    while `hold` is set, only once `release` is set (or HOLD_LIMIT passed)."""

    def __init__(self, sock):
        self.sock, self.hold, self.release = sock, threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                frame = json.loads(line)
                if self.hold.is_set():
                    self.release.wait(HOLD_LIMIT)
                reply = {"t": "reply", "id": frame["id"], "ok": True, "value": frame["params"]}
                try:
                    self.sock.sendall(json.dumps(reply).encode() + b"\n")
                except OSError:  # the test is over
                    return


def counting(coro, counter):
    """`coro`, counting how often it suspends into the event loop."""
    @types.coroutine
    def run():
        it = coro.__await__()
        value = None
        while True:
            try:
                yielded = it.send(value)
            except StopIteration as stop:
                return stop.value
            counter.append(yielded)
            value = yield yielded
    return run()


class ReadyQueue(collections.deque):
    """A deque of another type: what a loop keeping its ready queue differently looks like."""


_HIDDEN = frozenset(("_ready", "_scheduled", "_stopping"))


class HiddenQueuesLoop(asyncio.SelectorEventLoop):
    """A working event loop whose private queues only asyncio's own code can see: to the
    entrypoint it looks like a loop without them."""

    def __getattribute__(self, name):
        if name in _HIDDEN and not sys._getframe(1).f_globals.get("__name__", "").startswith(
                "asyncio."):
            raise AttributeError(name)
        return super().__getattribute__(name)


class InlineReplyTest(unittest.TestCase):
    def setUp(self):
        host_sock, ours = socket.socketpair()
        self.host = Host(host_sock)
        self.ours = ours
        self.table = protocol.CallTable(lambda f: ours.sendall(protocol.encode(f)), lambda: 1)

        def dispatch(line):
            self.table.resolve(protocol.decode(line))
            return True

        self.inbox = Inbox(ours.fileno(), dispatch, threading.Lock())
        self.table.inbox = self.inbox
        self.reader = threading.Thread(target=self.inbox.run_thread, daemon=True)
        self.reader.start()
        self.selector = TrackedSelector()
        self.loop = asyncio.SelectorEventLoop(self.selector)
        self.inbox.attach(self.loop, self.selector)

    def tearDown(self):
        self.inbox.detach()
        self.host.release.set()
        self.host.sock.shutdown(socket.SHUT_RDWR)  # wakes the host's recv and ends the channel
        self.host.thread.join(5)
        self.host.sock.close()
        self.reader.join(5)
        self.assertFalse(self.reader.is_alive())
        self.loop.close()
        self.ours.close()

    def run_exec(self, coro):
        return self.loop.run_until_complete(coro)

    def test_sequential_calls_never_suspend_the_task(self):
        suspensions = []

        async def body():
            return [await self.table.call("ping", {"i": i}) for i in range(50)]

        # The reader thread takes over when the loop stays out of `select` for STALL (5 ms), which
        # a loaded machine can cause between `attach` and the first call: this test is about the
        # loop reading, so the takeover is kept out of it.
        with unittest.mock.patch.object(inbox, "STALL", 60):
            got = self.run_exec(counting(body(), suspensions))
        self.assertEqual(got, [{"i": i} for i in range(50)])
        self.assertEqual(suspensions, [])
        self.assertEqual(self.table._pending, {})

    def sequential_calls_on(self, loop):
        """50 sequential calls from an exec on `loop` (attached in place of the test's loop):
        returns the suspensions of the exec's task; every reply must have come back."""
        self.inbox.detach()
        self.inbox.attach(loop, self.selector)
        suspensions = []

        async def body():
            return [await self.table.call("ping", {"i": i}) for i in range(50)]

        got = loop.run_until_complete(counting(body(), suspensions))
        self.assertEqual(got, [{"i": i} for i in range(50)])
        self.assertEqual(self.table._pending, {})
        return suspensions

    def test_a_loop_without_cpythons_private_queues_still_gets_its_replies(self):
        # settle_inline reads _ready/_scheduled/_stopping; a loop without them (uvloop, a later
        # Python) must fall back to awaiting the future: each call then suspends once.
        self.inbox.detach()
        self.loop.close()
        self.selector = TrackedSelector()
        self.loop = HiddenQueuesLoop(self.selector)
        self.assertIsNone(inbox._loop_queues(self.loop))
        self.assertEqual(len(self.sequential_calls_on(self.loop)), 50)

    def test_a_loop_whose_queues_have_other_types_still_gets_its_replies(self):
        self.loop._ready = ReadyQueue(self.loop._ready)  # works for the loop; not CPython's type
        self.assertIsNone(inbox._loop_queues(self.loop))
        self.assertEqual(len(self.sequential_calls_on(self.loop)), 50)

    def test_cpythons_loop_has_the_queues_the_inline_wait_reads(self):
        self.assertIsNotNone(inbox._loop_queues(self.loop))  # the inline wait is not lost
        self.assertIsNone(inbox._loop_queues(types.SimpleNamespace()))

    def served(self, what):
        """Something other than the call ran: record it and let the host reply."""
        self.order.append(what)
        self.host.release.set()

    def order_around_a_held_reply(self, arrange):
        """Run an exec that awaits one call whose reply the host holds until `served`;
        `arrange()` (a coroutine) runs in the exec just before the call. Returns what happened,
        in order; the reply must not have needed HOLD_LIMIT."""
        self.order = []

        async def body():
            self.host.hold.set()
            await arrange()
            self.order.append(await self.table.call("ping", "reply"))

        started = time.monotonic()
        self.run_exec(body())
        self.assertLess(time.monotonic() - started, HOLD_LIMIT / 2)
        return self.order

    def test_a_ready_callback_runs_before_a_held_reply(self):
        async def arrange():
            self.loop.call_soon(self.served, "callback")

        self.assertEqual(self.order_around_a_held_reply(arrange), ["callback", "reply"])

    def test_a_due_timer_fires_while_a_reply_is_outstanding(self):
        async def arrange():
            self.loop.call_later(0.05, self.served, "timer")

        self.assertEqual(self.order_around_a_held_reply(arrange), ["timer", "reply"])

    def test_another_descriptor_is_served_while_a_reply_is_outstanding(self):
        r, w = os.pipe()

        def readable():
            os.read(r, 10)
            self.loop.remove_reader(r)
            self.served("pipe")

        async def arrange():
            self.loop.add_reader(r, readable)
            threading.Timer(0.05, os.write, (w, b"x")).start()

        try:
            self.assertEqual(self.order_around_a_held_reply(arrange), ["pipe", "reply"])
        finally:
            os.close(r)
            os.close(w)

    def test_a_callback_from_another_thread_is_served_while_a_reply_is_outstanding(self):
        async def arrange():
            threading.Timer(0.05, self.loop.call_soon_threadsafe,
                            (self.served, "threadsafe")).start()

        self.assertEqual(self.order_around_a_held_reply(arrange), ["threadsafe", "reply"])

    def test_gathered_calls_all_get_their_own_replies(self):
        async def body():
            return await asyncio.gather(*[self.table.call("ping", i) for i in range(100)])

        self.assertEqual(self.run_exec(body()), list(range(100)))
        self.assertEqual(self.table._pending, {})

    def test_an_interrupt_during_an_inline_wait_ends_the_task_at_its_await(self):
        # The runner then reports the code's own KeyboardInterrupt, raised at the user's line;
        # the call is withdrawn at once, not when the task is cancelled afterwards.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        main = threading.main_thread().ident
        self.host.hold.set()  # never released: only the interrupt ends the wait

        async def body():
            threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT)).start()
            await self.table.call("ping", "never")

        task = self.loop.create_task(body())
        try:
            with self.assertRaises(KeyboardInterrupt):
                self.run_exec(task)
        finally:
            signal.signal(signal.SIGINT, previous)
        self.assertTrue(task.done())
        self.assertIsInstance(task.exception(), KeyboardInterrupt)
        self.assertEqual(self.table._pending, {})


if __name__ == "__main__":
    unittest.main()
