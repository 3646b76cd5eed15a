"""The output capture: head 3/4 + tail 1/4 of the limit, exact dropped counts, text-stream API."""
import io
import random
import unittest

from entrypoint.capture import Capture, OutputBuffer


def reference(chunks, limit):
    """What the rule says, computed the obvious way."""
    text = "".join(chunks)
    head = limit * 3 // 4
    tail = limit - head
    if len(text) <= head:
        return text, 0
    kept = text[:head] + (text[head:][-tail:] if tail else "")
    return kept, len(text) - len(kept)


class OutputBufferTest(unittest.TestCase):
    def test_small_output_is_kept_whole(self):
        buf = OutputBuffer(100)
        buf.add("hello ")
        buf.add("world")
        self.assertEqual(buf.result(), ("hello world", 0))

    def test_huge_single_write_keeps_head_and_tail(self):
        buf = OutputBuffer(1000)
        text = "".join(chr(ord("a") + i % 26) for i in range(1000000))
        buf.add(text)
        kept, dropped = buf.result()
        self.assertEqual(kept, text[:750] + text[-250:])
        self.assertEqual(dropped, 1000000 - 1000)

    def test_many_small_writes_match_the_rule_exactly(self):
        rng = random.Random(7)
        for limit in (0, 1, 2, 3, 4, 10, 65, 1000):
            chunks = ["".join(rng.choice("ab\nü😀") for _ in range(rng.randrange(0, 40)))
                      for _ in range(rng.randrange(1, 300))]
            buf = OutputBuffer(limit)
            for chunk in chunks:
                buf.add(chunk)
            self.assertEqual(buf.result(), reference(chunks, limit), limit)

    def test_exactly_at_limit_drops_nothing(self):
        buf = OutputBuffer(8)
        buf.add("12345678")
        self.assertEqual(buf.result(), ("12345678", 0))
        buf.add("9")
        self.assertEqual(buf.result(), ("12345689", 1))


class CaptureTest(unittest.TestCase):
    def test_text_stream_interface(self):
        cap = Capture("<stdout>", limit=100)
        self.assertEqual(cap.write("abc"), 3)
        cap.writelines(["d", "e"])
        cap.flush()
        self.assertFalse(cap.isatty())
        self.assertTrue(cap.writable())
        self.assertFalse(cap.readable())
        self.assertFalse(cap.seekable())
        self.assertEqual(cap.encoding, "utf-8")
        self.assertEqual(cap.errors, "strict")
        self.assertFalse(cap.closed)
        self.assertIsInstance(cap, io.TextIOBase)
        with self.assertRaises(io.UnsupportedOperation):
            cap.fileno()
        with self.assertRaises(TypeError):
            cap.write(b"bytes")
        print("via print", end="!", file=cap)
        cap.close()  # a no-op: sandbox code closing sys.stdout must not break later output
        cap.write("after close")
        self.assertEqual(cap.stop(), ("abcdevia print!after close", 0))

    def test_start_stop_and_fallback(self):
        fallback = io.StringIO()
        cap = Capture("<stderr>", fallback)
        cap.write("before ")
        cap.start(10)
        self.assertTrue(cap.capturing)
        cap.write("0123456789ABCDEF")
        self.assertEqual(cap.stop(), ("0123456DEF", 6))
        self.assertFalse(cap.capturing)
        cap.write("after")
        self.assertEqual(fallback.getvalue(), "before after")
        self.assertEqual(cap.stop(), ("", 0))


if __name__ == "__main__":
    unittest.main()
