"""Data in (issue 17, point 1): host folders shared read-only with MCP_BRIDGE_MOUNTS, checked at
startup; the mount cannot be written, remounted or escaped; an engine that cannot see this
machine's folders is named plainly; and the cap on one MCP server message
(MCP_BRIDGE_MAX_SERVER_MESSAGE) is named when hit and lifts large results into the sandbox."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time

import pytest
from helpers_host import pump

import servers as S

SECRET = "HOST SECRET 4b1f"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A data folder to share (a CSV, a subfolder, a symlink pointing out of it, a folder
    mounted inside it on the host) and, beside it, a folder that must stay invisible."""
    root = tmp_path_factory.mktemp("data-in")
    root.chmod(0o755)
    data = root / "data"
    outside = root / "outside"
    for d in (data, data / "sub", outside):
        d.mkdir()
        d.chmod(0o755)
    (data / "sales.csv").write_text("region,amount\nnorth,10\nsouth,32\n")
    (data / "sub" / "more.csv").write_text("x\n1\n")
    (outside / "secret.txt").write_text(SECRET)
    for f in (data / "sales.csv", data / "sub" / "more.csv", outside / "secret.txt"):
        f.chmod(0o644)
    (data / "escape").symlink_to(outside / "secret.txt")
    nested = data / "nested"
    nested.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(nested)],
                             capture_output=True).returncode == 0
    if mounted:
        (nested / "inner.txt").write_text("on a mount inside the shared folder")
    yield {"data": data, "outside": outside, "nested_mounted": mounted}
    if mounted:
        subprocess.run(["umount", str(nested)], capture_output=True)


@pytest.fixture(scope="module")
def data_bridge(bridge_factory, shared):
    b = bridge_factory(name="data-in", env={"MCP_BRIDGE_MOUNTS": f"{shared['data']}:/data"})
    yield b
    b.close()


# Engine markers per test (engine_markers.py): `engine` where the outcome depends on the container
# engine (why, beside it; the docker pass runs these too), `host_only` where the subject is on the host.
@pytest.mark.engine  # the engine's read-only bind mount
def test_a_mounted_csv_is_read_with_pandas(data_bridge):
    r = data_bridge.run("import pandas as pd\ndf = pd.read_csv('/data/sales.csv')\n"
                        "print(df['amount'].sum(), sorted(__import__('os').listdir('/data/sub')))")
    assert not r.is_error, str(r)
    assert r.structured["stdout"] == "42 ['more.csv']\n", str(r)


@pytest.mark.engine  # the engine's read-only bind mount
def test_the_mount_cannot_be_written_or_remounted(data_bridge):
    code = r"""
import errno, os, subprocess
out = {}
for what, op in [("write", lambda: open('/data/new.txt', 'w')),
                 ("append", lambda: open('/data/sales.csv', 'a')),
                 ("delete", lambda: os.remove('/data/sales.csv')),
                 ("chmod", lambda: os.chmod('/data/sales.csv', 0o777)),
                 ("mkdir", lambda: os.mkdir('/data/d'))]:
    try:
        op()
        out[what] = "allowed"
    except OSError as e:
        out[what] = errno.errorcode[e.errno]
def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stderr.strip()[-200:]
out["remount"] = run("mount", "-o", "remount,rw", "/data")
out["remount_in_userns"] = run("unshare", "-rm", "sh", "-c", "mount -o remount,rw /data && touch /data/x")
out["cap_eff"] = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0]
out["opts"] = [l.split()[5] for l in open('/proc/self/mountinfo') if l.split()[4] == '/data']
print(__import__('json').dumps(out))
"""
    r = data_bridge.run(code)
    assert not r.is_error, str(r)
    out = json.loads(r.structured["stdout"])
    for what in ("write", "append", "delete", "chmod", "mkdir"):
        assert out[what] in ("EROFS", "EACCES", "EPERM"), out
    assert out["remount"][0] != 0, out
    assert out["remount_in_userns"][0] != 0, out
    assert out["cap_eff"] == "0000000000000000", out
    assert out["opts"] and all(o.split(",")[0] == "ro" for o in out["opts"]), out


@pytest.mark.engine  # the engine's bind mount
def test_nothing_outside_the_mount_is_visible(data_bridge, shared):
    code = f"""
import os, json
out = {{}}
out["listing"] = sorted(os.listdir('/data'))
out["outside_exists"] = os.path.exists({str(shared['outside'])!r})
try:
    out["through_symlink"] = open('/data/escape').read()
except OSError as e:
    out["through_symlink"] = type(e).__name__
out["nested"] = sorted(os.listdir('/data/nested'))
out["parent"] = sorted(os.listdir('/data/..'))[:50]
print(json.dumps(out))
"""
    r = data_bridge.run(code)
    assert not r.is_error, str(r)
    out = json.loads(r.structured["stdout"])
    assert out["listing"] == ["escape", "nested", "sales.csv", "sub"], out
    assert out["outside_exists"] is False, out
    assert out["through_symlink"] != SECRET, "a symlink resolves inside the sandbox, not on the host"
    if shared["nested_mounted"]:
        assert out["nested"] == [], "a folder mounted inside the shared one on the host is not shared"
    assert "outside" not in out["parent"], out
    assert SECRET not in r.text


@pytest.mark.host_only  # checked on the host at startup
@pytest.mark.parametrize("value, reason", [
    ("/no/such/folder:/data", "cannot be used"),
    ("{file}:/data", "not a directory"),
    ("/:/data", "must not be /"),
    ("relative/dir:/data", "absolute"),
    ("{data}:/workspace/in", "collides with /workspace"),
    ("{data}:/usr/share/x", "collides with /usr"),
    ("{data}:relative", "must be an absolute path"),
    ("{data}:/data,{data}:/data/more", "overlaps"),
    ("{xdg}:/data", "socket"),
    ("{private}:/data", "cannot be read by the sandbox"),
])
def test_bad_mounts_are_startup_errors(helpers, shared, tmp_path, value, reason):
    xdg = tmp_path / "xdg"
    (xdg / "podman").mkdir(parents=True)
    xdg.chmod(0o755)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    value = value.format(file=shared["data"] / "sales.csv", data=shared["data"], xdg=xdg,
                         private=private)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    env.update({"MCP_BRIDGE_MOUNTS": value, "XDG_RUNTIME_DIR": str(xdg),
                "MCP_BRIDGE_STATE_DIR": str(tmp_path / "state")})
    for cmd in (["run"], ["exec", "print(1)"]):
        p = subprocess.run([helpers.BRIDGE_BIN, *cmd], env=env, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        assert p.returncode == 2, (cmd, p.stdout, p.stderr)
        assert "MCP_BRIDGE_MOUNTS" in p.stderr and reason in p.stderr, p.stderr


# -- an engine that cannot see this machine's folders -------------------------------------------

class _TcpToUnix:
    """Forwards 127.0.0.1:<port> to a unix socket: a 'remote' engine (tcp DOCKER_HOST)."""

    def __init__(self, path: str):
        self.path = path
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    def close(self):
        self.server.close()


@pytest.fixture
def remote_engine(helpers, tmp_path):
    """`tcp://127.0.0.1:PORT` in front of the engine the suite uses: DOCKER_HOST's socket for
    docker, a podman service of the test's own for podman."""
    service = None
    if helpers.engine == "docker":
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        path = host.removeprefix("unix://")
    else:
        path = str(tmp_path / "podman.sock")
        service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{path}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.1)
    proxy = _TcpToUnix(path)
    yield f"tcp://127.0.0.1:{proxy.port}"
    proxy.close()
    if service is not None:
        service.terminate()
        service.wait(timeout=30)


@pytest.mark.engine  # what the engine says about itself
def test_a_remote_engine_is_named_plainly(bridge_factory, shared, remote_engine):
    b = bridge_factory(name="remote-mounts", env={"DOCKER_HOST": remote_engine,
                                                 "MCP_BRIDGE_MOUNTS": f"{shared['data']}:/data"})
    try:
        r = b.run("print(1)")
        assert r.is_error, str(r)
        assert "MCP_BRIDGE_MOUNTS" in r.text and "remote engine" in r.text, r.text
        assert b.containers() == [], "nothing was created on the remote engine"
    finally:
        b.close()


# -- the cap on one server message ------------------------------------------------------------

@pytest.fixture(scope="module")
def stub_config(tmp_path_factory, stub_ready):
    d = tmp_path_factory.mktemp("message-cap")
    S.write_config(d, {"stub": S.stub("stub")})
    return d


@pytest.mark.host_only  # the cap on a downstream server's message
def test_the_server_message_cap_is_named_when_hit(bridge_factory, stub_config):
    b = bridge_factory(name="message-cap", env={"MCP_BRIDGE_CONFIG_DIR": str(stub_config),
                                               "MCP_BRIDGE_MAX_SERVER_MESSAGE": "1m"})
    try:
        r = b.run("try:\n    await mcp_stub.big(bytes=2_000_000)\n"
                  "except Exception as e:\n    print(type(e).__name__, e)", servers=["stub"])
        assert not r.is_error, str(r)
        out = r.structured["stdout"]
        assert out.startswith("ServerError"), out
        assert "MCP_BRIDGE_MAX_SERVER_MESSAGE (1 MiB)" in out, out
        r = b.run("print(len(await mcp_stub.big(bytes=500_000)))", servers=["stub"])
        assert r.structured["stdout"] == "500000\n", "the server restarts and serves what fits"
    finally:
        b.close()


@pytest.mark.engine  # a large result copied into the container
def test_a_result_larger_than_the_old_cap_reaches_the_sandbox(bridge_factory, stub_config):
    """A 70 MB result (the issue's 34 MB file came back as about twice that) with the cap
    raised: it passes the server transport, the reply budget and the frame channel."""
    b = bridge_factory(name="big-result", env={"MCP_BRIDGE_CONFIG_DIR": str(stub_config),
                                              "MCP_BRIDGE_MAX_SERVER_MESSAGE": "100m"})
    try:
        r = b.run("t = await mcp_stub.big(bytes=70_000_000)\nprint(len(t), t[:3])",
                  servers=["stub"], timeout=120, wait=180)
        assert not r.is_error, str(r)
        assert r.structured["stdout"] == "70000000 xxx\n", str(r)
    finally:
        b.close()
