"""Sandbox bootstrap (`python3 -I -c "$(cat boot.py)"`): read the boot frame from fd 0 with raw
os.read, install its files as an in-memory package (nothing touches the disk), then run
<package>.__main__.main(bytes_after_the_boot_line, channel_offer). Stdlib only; any boot failure
exits 2."""
import importlib.abc, importlib.util, json, linecache, os, sys, traceback


def _fail(msg):
    sys.stderr.write("mcp-bridge boot: %s\n" % msg), sys.stderr.flush(), os._exit(2)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, pkg, files):
        self.pkg, self.files = pkg, files

    def _key(self, name):
        if name == self.pkg:
            return "__init__.py"
        sub = name[len(self.pkg) + 1:] if name.startswith(self.pkg + ".") else ""
        return sub + ".py" if sub and "." not in sub and sub + ".py" in self.files else None

    def find_spec(self, name, path=None, target=None):
        key = self._key(name)
        return None if key is None else importlib.util.spec_from_loader(
            name, self, origin="<%s/%s>" % (self.pkg, key), is_package=(name == self.pkg))

    def exec_module(self, module):
        src, module.__file__ = self.get_source(module.__name__), module.__spec__.origin
        linecache.cache[module.__file__] = (len(src), None, src.splitlines(True), module.__file__)
        exec(compile(src, module.__file__, "exec", dont_inherit=True), module.__dict__)

    def get_source(self, name):
        return self.files.get(self._key(name), "")


def _boot():
    buf, nl = bytearray(), -1
    while nl < 0:
        chunk = os.read(0, 1 << 16) or _fail("stdin closed before the boot frame")
        buf += chunk
        nl = buf.find(b"\n", len(buf) - len(chunk))
    try:
        frame = json.loads(bytes(buf[:nl]).decode("utf-8"))
        pkg, files = frame["package"], frame["files"]
        if frame.get("t") != "boot" or frame.get("v") != 1 or not pkg.isidentifier() \
                or not {"__init__.py", "__main__.py"} <= set(files) \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise ValueError("want {t:boot, v:1, package, files:{__init__.py, __main__.py, ...}}")
        sys.meta_path.insert(0, _Finder(pkg, files))
        entry = importlib.import_module(pkg + ".__main__")
    except Exception as exc:  # noqa: BLE001 - any boot failure is fatal and reported
        traceback.print_exc()
        _fail("bad boot frame or package: %s: %s" % (type(exc).__name__, exc))
    return entry.main(bytes(buf[nl + 1:]), frame.get("channel"))


rc = _boot()  # main() flushes its own streams; os._exit skips joining user threads
os._exit(rc if isinstance(rc, int) else 0)
