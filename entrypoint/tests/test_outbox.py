"""Files out, the sandbox's side: what is sent, in what frames, and what never is."""
import base64
import os
import pathlib
import pickle
import tempfile
import unittest

from entrypoint import outbox


def files_of(frames):
    """{name: (bytes, show)} from `file` frames, and the skip frames."""
    files, skips, names = {}, [], {}
    for f in frames:
        assert f["t"] == "file", f
        if "skip" in f:
            skips.append(f)
            continue
        if "name" in f:
            names[f["n"]] = (f["name"], f["show"])
            files[f["name"]] = b""
        name = names[f["n"]][0]
        files[name] += base64.b64decode(f["data"])
    return {n: (data, names_show(names, n)) for n, data in files.items()}, skips


def names_show(names, name):
    return next(show for (n, show) in names.values() if n == name)


class OutboxTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "out")
        self.frames = []
        self.box = outbox.Outbox(self.root, outbox.Limits(), self.frames.append)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, data):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def flush(self, exec_id=1):
        self.frames.clear()
        self.box.flush(exec_id)
        return files_of(self.frames)

    def test_new_and_changed_files_go_once(self):
        self.assertTrue(os.path.isdir(self.root), "the outbox is made at start")
        self.write("a.csv", b"a,b\n1,2\n")
        self.write("sub/deep/n.txt", b"hi")
        files, skips = self.flush()
        self.assertEqual(files, {"a.csv": (b"a,b\n1,2\n", False), "sub/deep/n.txt": (b"hi", False)})
        self.assertEqual(skips, [])
        self.assertTrue(all(f["exec"] == 1 for f in self.frames))
        self.assertEqual(self.flush(2), ({}, []), "nothing changed: nothing sent")
        self.write("a.csv", b"changed")
        self.assertEqual(self.flush(3)[0], {"a.csv": (b"changed", False)})
        os.remove(os.path.join(self.root, "a.csv"))
        self.assertEqual(self.flush(4), ({}, []))
        self.write("a.csv", b"changed")  # deleted, then written again: new again
        self.assertEqual(self.flush(5)[0], {"a.csv": (b"changed", False)})

    def test_an_empty_settled_outbox_is_not_listed_again_until_it_changes(self):
        os.makedirs(self.root, exist_ok=True)
        old = 1_000_000_000  # long ago: settled
        os.utime(self.root, ns=(old, old))
        self.assertEqual(self.flush(), ({}, []))
        self.assertIsNotNone(self.box.empty_at, "empty and settled")
        self.write("new.txt", b"n")  # changes the folder's mtime
        self.assertEqual(self.flush(2)[0], {"new.txt": (b"n", False)})
        self.assertIsNone(self.box.empty_at)
        os.remove(os.path.join(self.root, "new.txt"))
        self.assertEqual(self.flush(3), ({}, []))
        self.assertIsNone(self.box.empty_at, "just changed: not settled, listed next time too")

    def test_large_files_go_in_chunks_within_the_frame_limit(self):
        self.box.limits = outbox.Limits(max_frame=64 << 10)
        data = os.urandom(300 << 10)
        self.write("big.bin", data)
        files, _ = self.flush()
        self.assertEqual(files["big.bin"][0], data)
        self.assertGreater(len(self.frames), 4)
        for frame in self.frames:
            line = len(repr(frame))  # about the JSON size
            self.assertLess(line, 64 << 10)
        self.assertEqual([f["end"] for f in self.frames], [False] * (len(self.frames) - 1) + [True])
        self.write("empty.txt", b"")
        self.assertEqual(self.flush(2)[0], {"empty.txt": (b"", False)})

    def test_symlinks_and_special_files_are_never_sent(self):
        secret = os.path.join(self.tmp.name, "secret.txt")
        with open(secret, "w") as f:
            f.write("host secret")
        os.makedirs(self.root, exist_ok=True)
        os.symlink(secret, os.path.join(self.root, "link.txt"))
        os.symlink("/etc/passwd", os.path.join(self.root, "passwd"))
        os.symlink(self.tmp.name, os.path.join(self.root, "dirlink"))
        os.mkfifo(os.path.join(self.root, "fifo"))
        self.write("real.txt", b"ok")
        files, skips = self.flush()
        self.assertEqual(files, {"real.txt": (b"ok", False)})
        self.assertEqual(skips, [])

    def test_limits_skip_files_with_the_reason(self):
        self.box.limits = outbox.Limits(max_file=10, max_cell=25, max_files=4)
        self.write("a", b"x" * 11)  # over the file limit
        self.write("b", b"x" * 10)
        self.write("c", b"x" * 10)
        self.write("d", b"x" * 10)  # over the cell's bytes
        self.write("e", b"x")  # over the count
        self.write("f", b"x")
        files, skips = self.flush()
        self.assertEqual(sorted(files), ["b", "c"])
        reasons = [(s["name"], s["skip"], s.get("size"), s.get("count")) for s in skips]
        self.assertEqual(reasons, [("a", "too_large", 11, None), ("d", "cell_full", 10, None),
                                   ("e", "too_many", None, 2)])
        self.assertEqual(self.flush(2), ({}, []), "skipped files are not offered again")

    def test_pictures_go_first_and_are_marked_to_show(self):
        self.write("z.txt", b"z")
        self.box.add_picture("figure-1-1.png", b"\x89PNG fake")
        files, _ = self.flush()
        self.assertEqual(files["figure-1-1.png"], (b"\x89PNG fake", True))
        self.assertEqual(self.frames[0]["name"], "figure-1-1.png")
        self.assertEqual(self.flush(2), ({}, []), "a picture goes once")

    def test_an_interrupted_flush_sends_the_rest_after_the_next_cell(self):
        for name in "abc":
            self.write(name, name.encode())
        sent = []

        def send(frame):
            if len(sent) == 1:
                raise KeyboardInterrupt
            sent.append(frame)

        self.box.send = send
        with self.assertRaises(KeyboardInterrupt):
            self.box.flush(1)
        self.box.send = self.frames.append
        files, _ = self.flush(2)
        self.assertEqual(sorted(files), ["b", "c"])


class SaveTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def save(self, obj, name=None):
        path = outbox.save(obj, name, root=self.root)
        self.assertEqual(os.path.dirname(path), self.root)
        with open(path, "rb") as f:
            return os.path.basename(path), f.read()

    def test_plain_values(self):
        self.assertEqual(self.save(b"\x00\x01", "raw.bin"), ("raw.bin", b"\x00\x01"))
        self.assertEqual(self.save(b"x"), ("data.bin", b"x"))
        self.assertEqual(self.save("héllo", "notes"), ("notes.txt", "héllo".encode()))
        self.assertEqual(self.save({"a": [1, 2]}, "r")[0], "r.json")
        name, data = self.save({1, 2})
        self.assertEqual((name, pickle.loads(data)), ("object.pkl", {1, 2}))

    def test_paths_are_copied(self):
        src = os.path.join(self.tmp.name, "src")
        os.makedirs(src)
        with open(os.path.join(src, "in.csv"), "w") as f:
            f.write("a\n1\n")
        self.assertEqual(self.save(os.path.join(src, "in.csv")), ("in.csv", b"a\n1\n"))
        self.assertEqual(self.save(pathlib.Path(src, "in.csv"), "copy.csv"), ("copy.csv", b"a\n1\n"))

    def test_text_that_names_no_file_needs_a_name(self):
        with self.assertRaisesRegex(ValueError, "give it a name"):
            outbox.save("/no/such/file.csv", root=self.root)

    def test_names_are_plain_file_names(self):
        for bad in ("../x", "/etc/x", "a/b", "..", ".", ""):
            with self.assertRaises(ValueError, msg=bad):
                outbox.save(b"x", bad, root=self.root)

    def test_a_dataframe_is_written_as_csv(self):
        frame_type = type("DataFrame", (), {
            "__module__": "pandas.core.frame",
            "index": type("RangeIndex", (), {})(),
            "to_csv": lambda self, path, index: open(path, "w").write("a\n1\n" if not index else "!"),
        })
        self.assertEqual(self.save(frame_type(), "table"), ("table.csv", b"a\n1\n"))

    def test_a_figure_is_written_as_png(self):
        fig_type = type("Figure", (), {
            "__module__": "matplotlib.figure",
            "savefig": lambda self, path, format: open(path, "wb").write(b"\x89PNG" + format.encode()),
        })
        self.assertEqual(self.save(fig_type()), ("figure.png", b"\x89PNGpng"))


if __name__ == "__main__":
    unittest.main()
