"""inbox.Inbox: who reads host frames (the event loop while it waits, else the reader thread)."""
import asyncio
import contextlib
import socket
import threading
import time
import unittest

from entrypoint.inbox import Inbox, TrackedSelector


class InboxTest(unittest.TestCase):
    def setUp(self):
        self.host, self.sandbox = socket.socketpair()
        self.seen = []  # (line, name of the thread that dispatched it)
        self.got = threading.Condition()
        self.inbox = Inbox(self.sandbox.fileno(), self.dispatch, contextlib.nullcontext(),
                           leftover=b"early\n")
        self.thread = threading.Thread(target=self.inbox.run_thread, name="reader", daemon=True)
        self.thread.start()
        self.selector = TrackedSelector()
        self.loop = asyncio.SelectorEventLoop(self.selector)

    def tearDown(self):
        self.host.close()
        self.thread.join(5)
        self.assertFalse(self.thread.is_alive())
        self.loop.close()
        self.sandbox.close()

    def dispatch(self, line):
        with self.got:
            self.seen.append((line, threading.current_thread().name))
            self.got.notify_all()
        return line != b"bye"

    def wait_for(self, line):
        with self.got:
            self.assertTrue(self.got.wait_for(lambda: any(s[0] == line for s in self.seen), 5),
                            self.seen)
        return dict(self.seen)[line]

    def test_the_loop_reads_while_it_waits_and_the_thread_otherwise(self):
        self.assertEqual(self.wait_for(b"early"), "reader")  # came with the boot frame
        self.host.sendall(b"between\n")
        self.assertEqual(self.wait_for(b"between"), "reader")

        async def exec_body():
            for i in range(20):
                self.host.sendall(b"reply %d\n" % i)
                await asyncio.sleep(0.005)
            time.sleep(0.001)
            self.host.sendall(b"while blocked\n")
            time.sleep(0.2)  # sync code inside the coroutine: the loop cannot read

        self.inbox.attach(self.loop, self.selector)
        try:
            self.loop.run_until_complete(exec_body())
        finally:
            self.inbox.detach()
        readers = [dict(self.seen)[b"reply %d" % i] for i in range(20)]
        self.assertGreaterEqual(readers.count("MainThread"), 15, readers)
        self.assertEqual(dict(self.seen)[b"while blocked"], "reader")
        self.host.sendall(b"after\n")
        self.assertEqual(self.wait_for(b"after"), "reader")
        self.assertEqual([s[0] for s in self.seen][-1], b"after")

    def test_frames_keep_their_order_and_shutdown_ends_reading(self):
        self.inbox.attach(self.loop, self.selector)
        lines = [b"f%d" % i for i in range(2000)]
        self.host.sendall(b"\n".join(lines) + b"\nbye\nignored\n")

        async def idle():
            await asyncio.sleep(0.3)

        try:
            self.loop.run_until_complete(idle())
        finally:
            self.inbox.detach()
        self.thread.join(5)
        self.assertEqual([s[0] for s in self.seen], [b"early"] + lines + [b"bye"])
        self.assertEqual(self.inbox.closed, "shutdown requested")

    def test_eof_ends_the_thread(self):
        self.host.sendall(b"last\n")
        self.host.shutdown(socket.SHUT_WR)
        self.thread.join(5)
        self.assertEqual(self.inbox.closed, "stdin closed")
        self.assertEqual([s[0] for s in self.seen], [b"early", b"last"])


class PipeInboxTest(unittest.TestCase):
    """The stdio channel is a pipe: no `recv`, a readiness check before each read."""

    def test_frames_in_order_then_eof_over_a_pipe(self):
        import os
        r, w = os.pipe()
        seen = []
        inbox = Inbox(r, lambda line: seen.append(line) or True, contextlib.nullcontext())
        self.assertTrue(inbox.pump())  # nothing there yet: no block, no EOF
        os.write(w, b"a\nb\npartial")
        self.assertTrue(inbox.pump())
        self.assertEqual(seen, [b"a", b"b"])
        os.write(w, b"\n")
        os.close(w)
        self.assertTrue(inbox.pump())
        self.assertEqual(seen, [b"a", b"b", b"partial"])
        self.assertFalse(inbox.pump())
        self.assertEqual(inbox.closed, "stdin closed")
        os.close(r)


class TrackedSelectorTest(unittest.TestCase):
    def test_one_zero_timeout_poll_after_a_wake_is_skipped_and_the_next_polls(self):
        a, b = socket.socketpair()
        selector = TrackedSelector()
        try:
            selector.register(a, 1)  # EVENT_READ
            b.sendall(b"x")  # stays readable: nobody reads it
            self.assertEqual(len(selector.select(None)), 1)  # a wait that returned events
            self.assertEqual(selector.select(0), [])  # skipped once
            self.assertEqual(len(selector.select(0)), 1)  # then polled again
            self.assertEqual(len(selector.select(0)), 1)  # zero-timeout polls never skip twice
            self.assertEqual(len(selector.select(5)), 1)
            self.assertEqual(selector.select(0), [])
            self.assertIsNotNone(selector.busy_since)
        finally:
            selector.close()
            a.close()
            b.close()

    def test_io_gets_through_a_loop_that_never_waits(self):
        a, b = socket.socketpair()
        loop = asyncio.SelectorEventLoop(TrackedSelector())
        got = []
        loop.add_reader(a.fileno(), lambda: got.append(a.recv(10)))

        async def busy():
            b.sendall(b"ping")
            for _ in range(10):
                if got:
                    return
                await asyncio.sleep(0)

        try:
            loop.run_until_complete(busy())
            self.assertEqual(got, [b"ping"])
        finally:
            loop.close()
            a.close()
            b.close()


if __name__ == "__main__":
    unittest.main()
