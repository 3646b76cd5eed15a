"""Pictures back, the sandbox's side: the size budget, the pyplot hook, display()."""
import builtins
import contextlib
import io
import os
import random
import struct
import sys
import tempfile
import textwrap
import types
import unittest
import zlib

from entrypoint import pictures


def png(width, height, noise=True):
    """A real PNG of `width`×`height` RGB pixels (noise compresses badly: bytes ~ pixels)."""
    rnd = random.Random(width * 7919 + height)
    row = (lambda: bytes(rnd.getrandbits(8) for _ in range(width * 3))) if noise else \
        (lambda: bytes(width * 3))
    raw = b"".join(b"\x00" + row() for _ in range(height))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 1))
            + chunk(b"IEND", b""))


def size_of(data):
    return struct.unpack(">II", data[16:24])


class FakeFigure:
    """Quacks like matplotlib's Figure for rendering: size in inches, dpi, savefig."""
    __module__ = "matplotlib.figure"

    def __init__(self, width_in, height_in, dpi=100, noise=True):
        self.size, self.dpi, self.noise, self.calls = (width_in, height_in), dpi, noise, []

    def get_size_inches(self):
        return self.size

    def savefig(self, buf, format, dpi):
        self.calls.append(dpi)
        buf.write(png(int(self.size[0] * dpi), int(self.size[1] * dpi), self.noise))


class Collect:
    def __init__(self):
        self.pictures = []

    def add_picture(self, name, data):
        self.pictures.append((name, data))


class PicturesTest(unittest.TestCase):
    def setUp(self):
        self.box = Collect()
        self.pics = pictures.Pictures(self.box, lambda: 7, max_side=400, max_bytes=64 << 10)

    def test_a_figure_is_rendered_within_the_side_and_byte_budget(self):
        small = self.pics.figure_png(FakeFigure(2, 1, noise=False))
        self.assertEqual(size_of(small), (200, 100), "within budget: the figure's own dpi")
        wide = self.pics.figure_png(FakeFigure(20, 5, noise=False))
        self.assertEqual(size_of(wide), (400, 100), "the long side is capped")
        fig = FakeFigure(4, 3)  # 400x300 of noise: ~360 KB at first
        data = self.pics.figure_png(fig)
        self.assertLessEqual(len(data), 64 << 10)
        w, h = size_of(data)
        self.assertLess(w, 400)
        self.assertAlmostEqual(w / h, 4 / 3, delta=0.05)
        self.assertGreater(len(fig.calls), 1, "the resolution was lowered until it fit")

    def test_open_figures_are_handed_over_and_closed(self):
        figs = {1: FakeFigure(2, 1, noise=False), 2: FakeFigure(1, 1, noise=False)}
        closed = []
        plt = types.SimpleNamespace(get_fignums=lambda: sorted(figs), figure=figs.__getitem__,
                                    close=lambda f: closed.append(f))
        with _module(pictures.PYPLOT, plt):
            self.pics.take_open_figures()
        names = [n for n, _ in self.box.pictures]
        self.assertEqual(names, ["figure-7-1.png", "figure-7-2.png"])
        self.assertEqual(closed, [figs[1], figs[2]])

    def test_display_shows_pictures_and_prints_tables_and_the_rest(self):
        class Drawing:
            def _repr_png_(self):
                return png(3, 2, noise=False)

        frame_type = type("DataFrame", (), {
            "__module__": "pandas.core.frame",
            "to_string": lambda self, max_rows, max_cols: "   a\n0  1",
        })
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.pics.display(Drawing(), frame_type(), "plain text", [1, 2])
        self.assertEqual(out.getvalue(), "   a\n0  1\nplain text\n[1, 2]\n")
        self.assertEqual([size_of(d) for _, d in self.box.pictures], [(3, 2)])

    def test_display_of_a_figure_closes_it(self):
        fig = FakeFigure(1, 1, noise=False)
        closed = []
        with _module(pictures.PYPLOT, types.SimpleNamespace(close=closed.append)):
            self.pics.display(fig)
        self.assertEqual(closed, [fig])
        self.assertEqual(len(self.box.pictures), 1)

    def test_importing_pyplot_hooks_show(self):
        """A fake matplotlib package on sys.path: importing its pyplot patches `show`."""
        with tempfile.TemporaryDirectory() as tmp:
            pkg = os.path.join(tmp, "matplotlib")
            os.makedirs(pkg)
            with open(os.path.join(pkg, "__init__.py"), "w") as f:
                f.write("")
            with open(os.path.join(pkg, "pyplot.py"), "w") as f:
                f.write(textwrap.dedent("""\
                    FIGS = {}
                    def get_fignums(): return sorted(FIGS)
                    def figure(n): return FIGS[n]
                    def close(f): FIGS.pop(next(k for k, v in FIGS.items() if v is f))
                    def show(): raise AssertionError("the real show ran")
                    """))
            saved_display = getattr(builtins, "display", None)
            sys.path.insert(0, tmp)
            try:
                self.pics.install()
                self.assertIs(builtins.display.__func__, pictures.Pictures.display)
                import matplotlib.pyplot as plt  # noqa: PLC0415 - the fake one
                plt.FIGS[1] = FakeFigure(1, 1, noise=False)
                plt.show()
                self.assertEqual(plt.FIGS, {}, "shown figures are closed")
                self.assertEqual([n for n, _ in self.box.pictures], ["figure-7-1.png"])
            finally:
                sys.path.remove(tmp)
                for name in ("matplotlib.pyplot", "matplotlib"):
                    sys.modules.pop(name, None)
                sys.meta_path[:] = [f for f in sys.meta_path
                                    if not isinstance(f, pictures._PyplotHook)]
                if saved_display is None:
                    del builtins.display
                else:
                    builtins.display = saved_display


@contextlib.contextmanager
def _module(name, module):
    saved = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved


if __name__ == "__main__":
    unittest.main()
