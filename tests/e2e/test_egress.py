"""The egress allow list (GUIDE.md, "Network"; issue 34 point 2) with real containers: a cell
reaches an allowed local HTTP server with urllib through the bridge's proxy (the container
keeps no interface of its own: the entrypoint's relay on the sandbox's loopback carries each
connection over a unix socket to the bridge), and is refused, with an error naming
MCP_BRIDGE_NETWORK_ALLOW, a host not on the list, a name resolving to 127.0.0.1 or
169.254.169.254 (names come from the hosts file MCP_BRIDGE_NETWORK_HOSTS), a redirect from an
allowed host to another, a CONNECT whose name is not the listed address, and connections past
the run's bound. Every connection is one audit line. With the list, the sandbox has a package
folder on sys.path that may hold compiled code, and `python -m pip install` fills it from an
allowed local PEP 503 index (a wheel built here). Without the setting there is no network.

Local servers only (loopback), as everywhere in these tests.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
import zipfile
from functools import partial
from pathlib import Path

import pytest

SETTING = "MCP_BRIDGE_NETWORK_ALLOW"


class _Handler(http.server.BaseHTTPRequestHandler):
    other_port = 0

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.startswith("/redirect-ip"):
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.other_port}/hello")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/redirect-meta"):
            self.send_response(302)
            self.send_header("Location", "http://meta.test/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve() -> tuple[http.server.ThreadingHTTPServer, int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def _wheel(folder: Path, name: str, version: str, files: dict[str, str | bytes]) -> Path:
    """A minimal pure-Python wheel, as pip accepts it (METADATA, WHEEL, RECORD)."""
    dist = f"{name}-{version}.dist-info"
    contents = {path: data if isinstance(data, bytes) else data.encode() for path, data in files.items()}
    contents[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    contents[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    contents[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    whl = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for path, text in contents.items():
            z.writestr(path, text)
    return whl


# A package with compiled code: the host's zlib (Debian's, as in the image) loaded by its module.
NATIVE_INIT = (
    "import ctypes, os\n"
    "lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libz-copy.so'))\n"
    "lib.zlibVersion.restype = ctypes.c_char_p\n"
    "VERSION = lib.zlibVersion().decode()\n"
)


def _index(root: Path) -> Path:
    """A PEP 503 simple index of wheels built here: `mcb-demo` (pure Python) and `mcb-native`
    (a shared library its module loads)."""
    files = root / "files"
    files.mkdir(parents=True)
    zlib = next(p for p in (Path("/lib/x86_64-linux-gnu/libz.so.1"), Path("/usr/lib/x86_64-linux-gnu/libz.so.1"),
                            Path("/lib/aarch64-linux-gnu/libz.so.1")) if p.exists())
    wheels = {
        "mcb-demo": _wheel(files, "mcb_demo", "1.0", {"mcb_demo/__init__.py": "VALUE = 'installed by pip'\n"}),
        "mcb-native": _wheel(files, "mcb_native", "1.0", {"mcb_native/__init__.py": NATIVE_INIT,
                                                          "mcb_native/libz-copy.so": zlib.read_bytes()}),
    }
    for project, whl in wheels.items():
        folder = root / "simple" / project
        folder.mkdir(parents=True)
        (folder / "index.html").write_text(f'<html><body><a href="../../files/{whl.name}">{whl.name}</a></body></html>\n')
    return root


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Local HTTP servers: `port` (on the list), `other` (not) and `index` (a package index)."""
    other, other_port = _serve()
    allowed, port = _serve()
    _Handler.other_port = other_port
    root = _index(tmp_path_factory.mktemp("index"))
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    index = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=index.serve_forever, daemon=True).start()
    yield {"port": port, "other": other_port, "index": index.server_address[1]}
    for s in (allowed, other, index):
        s.shutdown()


@pytest.fixture(scope="module")
def net_bridge(bridge_factory, servers, tmp_path_factory):
    d = tmp_path_factory.mktemp("egress")
    hosts = d / "hosts"
    hosts.write_text("127.0.0.1 local.test\n169.254.169.254 meta.test\n")
    log = d / "audit.log"
    port = servers["port"]
    env = {
        SETTING: f"127.0.0.1:{port},local.test:{servers['other']},meta.test,127.0.0.1:{servers['index']}",
        "MCP_BRIDGE_NETWORK_HOSTS": str(hosts),
        "MCP_BRIDGE_NETWORK_MAX_CONNECTIONS": "20",
        "MCP_BRIDGE_AUDIT_LOG": str(log),
    }
    b = bridge_factory(name="egress", env=env)
    b.log = log
    yield b
    b.close()


def fetch(url: str) -> str:
    """A cell printing what urllib got from `url`, or the error's text."""
    return (
        "import urllib.request, urllib.error\n"
        "try:\n"
        f"    print('BODY', urllib.request.urlopen({url!r}, timeout=20).read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print('HTTPERROR', e.code, e, e.read().decode(errors='replace'))\n"
        "except Exception as e:\n"
        "    print('ERROR', type(e).__name__, e)\n"
    )


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.engine
def test_an_allowed_local_server_is_reached_with_urllib(net_bridge, servers):
    r = net_bridge.run(fetch(f"http://127.0.0.1:{servers['port']}/hello"))
    assert not r.is_error, r
    assert "BODY hello from the host" in r.text, r
    r = net_bridge.run("import os; print(os.environ['HTTP_PROXY'].startswith('http://127.0.0.1:'))")
    assert "True" in r.text, r


@pytest.mark.engine
def test_a_host_not_on_the_list_is_refused_naming_the_setting(net_bridge, servers):
    r = net_bridge.run(fetch(f"http://127.0.0.1:{servers['other']}/hello"))
    assert "HTTPERROR 403" in r.text and SETTING in r.text, r
    assert "hello from the host" not in r.text, r


@pytest.mark.engine
@pytest.mark.parametrize("name,why", [("local.test", "loopback"), ("meta.test", "metadata")])
def test_a_name_resolving_to_loopback_or_metadata_is_refused(net_bridge, servers, name, why):
    # local.test is listed on the port of `other`, whose IP (127.0.0.1) is not listed with it
    port = servers["other"] if name == "local.test" else 80
    r = net_bridge.run(fetch(f"http://{name}:{port}/hello"))
    assert "HTTPERROR 403" in r.text and SETTING in r.text and why in r.text, r
    assert "hello from the host" not in r.text, r


@pytest.mark.engine
@pytest.mark.parametrize("path", ["/redirect-ip", "/redirect-meta"])
def test_a_redirect_from_an_allowed_host_is_checked_like_a_first_request(net_bridge, servers, path):
    r = net_bridge.run(fetch(f"http://127.0.0.1:{servers['port']}{path}"))
    assert "HTTPERROR 403" in r.text and SETTING in r.text, r
    assert "hello from the host" not in r.text, r


@pytest.mark.engine
def test_a_connect_is_checked_by_its_own_target(net_bridge, servers):
    port = servers["port"]
    code = (
        "import os, socket\n"
        "host, port = os.environ['HTTPS_PROXY'].rsplit('/', 1)[1].split(':')\n"
        "def tunnel(target, host_header):\n"
        "    s = socket.create_connection((host, int(port)), timeout=20)\n"
        "    s.sendall(f'CONNECT {target} HTTP/1.1\\r\\nHost: {host_header}\\r\\n\\r\\n'.encode())\n"
        "    first = s.recv(4096).decode(errors='replace')\n"
        "    if first.startswith('HTTP/1.1 200'):\n"
        "        s.sendall(b'GET /hello HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "        while chunk := s.recv(4096):  # the server closes after its answer\n"
        "            first += chunk.decode(errors='replace')\n"
        "    s.close()\n"
        "    return first\n"
        f"print('NAME', tunnel('other.test:{port}', '127.0.0.1:{port}'))\n"
        f"print('LOCAL', tunnel('local.test:{servers['other']}', '127.0.0.1:{port}'))\n"
        f"print('LISTED', tunnel('127.0.0.1:{port}', 'other.test'))\n"
        "import urllib.request\n"
        "try:\n"
        "    urllib.request.urlopen('https://other.test/', timeout=20)\n"
        "except Exception as e:\n"
        "    print('HTTPS', e)\n"
    )
    r = net_bridge.run(code)
    lines = {line.split(" ", 1)[0]: line for line in r.text.splitlines() if line[:1].isupper()}
    assert "403" in lines.get("NAME", "") and SETTING in lines["NAME"], r
    assert "403" in lines.get("LOCAL", "") and "loopback" in r.text, r
    assert "hello from the host" in r.text.split("LISTED", 1)[1], r
    assert "Tunnel connection failed: 403" in lines.get("HTTPS", "") and SETTING in lines["HTTPS"], r


@pytest.mark.engine
def test_a_flood_of_connections_is_bounded_per_run(net_bridge, servers):
    url = f"http://127.0.0.1:{servers['port']}/hello"
    code = (
        "import urllib.request, urllib.error\n"
        "ok = refused = 0\n"
        "last = ''\n"
        "for _ in range(40):\n"
        "    try:\n"
        f"        urllib.request.urlopen({url!r}, timeout=20).read(); ok += 1\n"
        "    except urllib.error.HTTPError as e:\n"
        "        refused += 1; last = str(e)\n"
        "print('COUNTS', ok, refused, last)\n"
    )
    r = net_bridge.run(code)
    assert "COUNTS 20 20" in r.text and "MCP_BRIDGE_NETWORK_MAX_CONNECTIONS" in r.text, r
    # the next run has its own budget
    r = net_bridge.run(fetch(url))
    assert "BODY hello from the host" in r.text, r


@pytest.mark.engine
def test_every_connection_is_one_audit_line(net_bridge, servers, helpers):
    port = servers["port"]
    marker = f"/hello?audit-{port}"
    net_bridge.run(fetch(f"http://127.0.0.1:{port}{marker}"))
    net_bridge.run(fetch(f"http://127.0.0.1:{servers['other']}/audit"))

    def found():
        lines = [r for r in records(net_bridge.log) if r.get("kind") == "net"]
        ok = [r for r in lines if r["outcome"] == "ok" and r["port"] == port and r["bytes_down"] > 0]
        refused = [r for r in lines if r["outcome"] == "refused" and r["port"] == servers["other"]]
        return (ok, refused) if ok and refused else None

    got = helpers.poll(found, timeout=30, interval=0.1)
    assert got, f"no net lines in {net_bridge.log}:\n{net_bridge.log.read_text() if net_bridge.log.exists() else ''}"
    ok, refused = got
    assert ok[-1]["host"] == "127.0.0.1" and ok[-1]["method"] == "GET" and ok[-1]["bytes_up"] > 0
    assert ok[-1]["run"] and ok[-1]["addr"] == f"127.0.0.1:{port}"
    assert SETTING in refused[-1]["reason"]


@pytest.mark.engine
def test_without_the_setting_there_is_no_network(bridge, servers):
    code = (
        "import os, socket\n"
        "print('PROXY', [k for k in os.environ if k.lower().endswith('_proxy')])\n"
        "print('PACKAGES', os.path.exists('/opt/packages'))\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {servers['port']}), timeout=5)\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('NO NETWORK', e)\n"
    )
    r = bridge.run(code)
    assert "PROXY []" in r.text and "NO NETWORK" in r.text and "CONNECTED" not in r.text, r
    assert "PACKAGES False" in r.text, r


@pytest.mark.engine
def test_the_package_folder_is_on_sys_path_and_may_hold_compiled_code(net_bridge):
    # a shared library copied there loads (the folder is not noexec); the same copy in /tmp does not
    code = (
        "import ctypes, ctypes.util, glob, shutil, sys\n"
        "lib = sorted(glob.glob('/usr/lib/*/libz.so.1') + glob.glob('/lib/*/libz.so.1'))[0]\n"
        "print('ON PATH', '/opt/packages' in sys.path)\n"
        "for where in ('/opt/packages', '/tmp'):\n"
        "    copy = shutil.copy(lib, where + '/libz-copy.so')\n"
        "    try:\n"
        "        print('LOADED', where, ctypes.CDLL(copy).zlibVersion is not None)\n"
        "    except OSError as e:\n"
        "        print('REFUSED', where, e)\n"
        # a CPython extension module (the image's own _json, under a package of ours) imports
        "import importlib, importlib.machinery, os, _json\n"
        "os.makedirs('/opt/packages/mcb_ext', exist_ok=True)\n"
        "open('/opt/packages/mcb_ext/__init__.py', 'w').close()\n"
        "shutil.copy(_json.__file__, '/opt/packages/mcb_ext/' + os.path.basename(_json.__file__))\n"
        "importlib.invalidate_caches()\n"
        "ext = importlib.import_module('mcb_ext._json')\n"
        "print('EXTENSION', type(ext.__loader__).__name__, ext.__file__, ext.scanstring('\"ok\"', 1))\n"
    )
    r = net_bridge.run(code)
    assert "ON PATH True" in r.text, r
    assert "LOADED /opt/packages True" in r.text, r
    assert "REFUSED /tmp" in r.text, r
    assert "EXTENSION ExtensionFileLoader /opt/packages/mcb_ext/_json" in r.text and "('ok', 4)" in r.text, r


@pytest.mark.engine
def test_pip_installs_from_an_allowed_index_into_the_package_folder(net_bridge, servers):
    index = f"http://127.0.0.1:{servers['index']}/simple/"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.run([sys.executable, '-m', 'pip', 'install', '--index-url', {index!r}, 'mcb-demo', 'mcb-native'],\n"
        "                   capture_output=True, text=True, timeout=120)\n"
        "print('PIP', p.returncode, p.stdout[-2000:], p.stderr[-2000:])\n"
        "import mcb_demo\n"
        "print('VALUE', mcb_demo.VALUE, mcb_demo.__file__)\n"
        "import mcb_native\n"
        "print('NATIVE', mcb_native.VERSION, mcb_native.__file__)\n"
    )
    r = net_bridge.run(code, timeout=120, wait=150)
    assert "PIP 0" in r.text, r
    assert "VALUE installed by pip /opt/packages/mcb_demo/__init__.py" in r.text, r
    assert "NATIVE 1." in r.text and "/opt/packages/mcb_native/__init__.py" in r.text, r


@pytest.mark.engine
def test_without_the_socket_channel_the_list_is_refused_naming_it(bridge_factory, servers):
    env = {SETTING: f"127.0.0.1:{servers['port']}", "MCP_BRIDGE_CHANNEL": "stdio"}
    b = bridge_factory(name="egress-stdio", env=env)
    try:
        r = b.run("print('ran')")
        assert r.is_error and SETTING in r.text and "ran" not in r.text, r
    finally:
        b.close()
