"""Pictures back (ARCHITECTURE.md, "Pictures"): a matplotlib figure shown (`plt.show()`) or left
open at the end of a cell, and a figure or PIL image given to `display()`, is rendered to a PNG
within the image budget (at most MCP_BRIDGE_IMAGES_MAX_SIDE pixels on its long side and
MCP_BRIDGE_IMAGES_MAX_BYTES bytes: the resolution is lowered until it fits), handed to the outbox
as a picture to show, and closed. `display()` prints DataFrames and other objects as text.

matplotlib and PIL are never imported here: sandbox code imports them, and an import hook
replaces `matplotlib.pyplot.show` as pyplot is loaded (the backend stays Agg, MPLBACKEND)."""
import builtins
import importlib.abc
import importlib.util
import io
import math
import sys

from . import protocol

PYPLOT = "matplotlib.pyplot"
MIN_SIDE = 64  # pixels: a picture is not shrunk below this to meet the byte budget
SHRINK_TRIES = 8
TABLE_ROWS, TABLE_COLUMNS = 60, 20  # what display() prints of a DataFrame


class Pictures:
    """Renders pictures into `outbox` (outbox.Outbox); `current_exec()` names the exec."""

    def __init__(self, outbox, current_exec, max_side=1568, max_bytes=1 << 20):
        self.outbox, self.current_exec = outbox, current_exec
        self.max_side, self.max_bytes = max_side, max_bytes
        self.count = 0  # pictures of the current exec, for their names
        self.exec_seen = None

    def _name(self):
        exec_id = self.current_exec()
        if exec_id != self.exec_seen:
            self.exec_seen, self.count = exec_id, 0
        self.count += 1
        return "figure-%s-%d.png" % (exec_id, self.count)

    # -- matplotlib --------------------------------------------------------------------------
    def figure_png(self, fig):
        """`fig` as PNG bytes within the budget (the smallest tried when none fits)."""
        width, height = fig.get_size_inches()
        longest = max(width, height, 1e-3)
        dpi = min(float(fig.dpi), self.max_side / longest)
        data = b""
        for _ in range(SHRINK_TRIES):
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi)
            data = buf.getvalue()
            if len(data) <= self.max_bytes or longest * dpi <= MIN_SIDE:
                break
            dpi = max(MIN_SIDE / longest, dpi * max(0.5, 0.95 * math.sqrt(self.max_bytes / len(data))))
        return data

    def take_open_figures(self):
        """Render and close every open pyplot figure (plt.show(), and the end of a cell)."""
        plt = sys.modules.get(PYPLOT)
        if plt is None:
            return
        try:
            numbers = list(plt.get_fignums())
        except Exception:  # noqa: BLE001 - sandbox code may have broken pyplot
            return
        for num in numbers:
            fig = plt.figure(num)
            try:
                self.outbox.add_picture(self._name(), self.figure_png(fig))
            finally:
                plt.close(fig)

    # -- PIL and _repr_png_ ------------------------------------------------------------------
    def image_png(self, img):
        """A PIL image as PNG bytes within the budget (never enlarged)."""
        img = img.copy()
        if img.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"):
            img = img.convert("RGBA")
        img.thumbnail((self.max_side, self.max_side))
        data = b""
        for _ in range(SHRINK_TRIES):
            buf = io.BytesIO()
            img.save(buf, format="PNG", optimize=True)
            data = buf.getvalue()
            if len(data) <= self.max_bytes or max(img.size) <= MIN_SIDE:
                break
            scale = max(0.5, 0.95 * math.sqrt(self.max_bytes / len(data)))
            img = img.resize((max(1, int(img.size[0] * scale)), max(1, int(img.size[1] * scale))))
        return data

    # -- display() ---------------------------------------------------------------------------
    def display(self, *objs):
        """Show each object: a matplotlib figure or PIL image (or anything with `_repr_png_`)
        comes back as a picture, a DataFrame or Series is printed as a text table, anything
        else as its repr (a str as it is)."""
        for obj in objs:
            self._display_one(obj)

    def _display_one(self, obj):
        module = type(obj).__module__ or ""
        if module.startswith("matplotlib") and hasattr(obj, "savefig"):
            try:
                self.outbox.add_picture(self._name(), self.figure_png(obj))
            finally:
                plt = sys.modules.get(PYPLOT)
                if plt is not None:
                    plt.close(obj)
            return
        if module.startswith("PIL") and hasattr(obj, "save") and hasattr(obj, "thumbnail"):
            self.outbox.add_picture(self._name(), self.image_png(obj))
            return
        repr_png = getattr(obj, "_repr_png_", None)
        if callable(repr_png) and not isinstance(obj, type):
            data = repr_png()
            if isinstance(data, (bytes, bytearray)):
                self.outbox.add_picture(self._name(), bytes(data))
                return
        if module.startswith("pandas") and hasattr(obj, "to_string"):
            try:
                text = obj.to_string(max_rows=TABLE_ROWS, max_cols=TABLE_COLUMNS)
            except TypeError:  # a Series takes no max_cols
                text = obj.to_string(max_rows=TABLE_ROWS)
            print(text)
            return
        print(obj if isinstance(obj, str) else repr(obj))

    # -- hooks -------------------------------------------------------------------------------
    def install(self):
        """Make `display` a builtin and hook pyplot's `show` (now, or as pyplot is imported)."""
        builtins.display = self.display
        plt = sys.modules.get(PYPLOT)
        if plt is not None:
            self.patch(plt)
        if not any(isinstance(f, _PyplotHook) for f in sys.meta_path):
            sys.meta_path.insert(0, _PyplotHook(self.patch))

    def patch(self, plt):
        """Replace `plt.show` by one that hands the open figures over."""
        if getattr(getattr(plt, "show", None), "_mcp_bridge", False):
            return

        def show(*args, **kwargs):
            """Show the open figures: they come back with the run_python result as pictures
            (and files), and are closed."""
            self.take_open_figures()

        show._mcp_bridge = True
        plt.show = show


class _PyplotHook(importlib.abc.MetaPathFinder):
    """Finds `matplotlib.pyplot` through the other finders and patches it once it has run."""

    def __init__(self, patch):
        self.patch, self.busy = patch, False

    def find_spec(self, name, path=None, target=None):
        if name != PYPLOT or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, self.patch)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then the patch; everything else goes to the real loader."""

    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._patch(module)
        except Exception as exc:  # noqa: BLE001 - pyplot works, just without the hand-over
            protocol.log("could not hook pyplot.show: %s" % exc)

    def __getattr__(self, name):
        return getattr(self._loader, name)
