"""MCP proxying to real third-party servers (GUIDE.md, "Your MCP servers"): the npm servers
(everything, memory, filesystem) and mcp-server-time over stdio, and server-everything over
streamable HTTP with configured headers.

Values come back from the sandbox as one JSON line printed by the code (`_json`), so assertions
compare exact Python values, not rendered text.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from helpers_host import pump
from helpers_proxy import json_of as _json
from helpers_proxy import ok_output as _ok
from helpers_proxy import stdout_of as _stdout

import servers as S

pytestmark = pytest.mark.host_only  # proxying to real servers: host-side

# run_python timeout for runs that load real servers: loading counts against it, and a Python
# server (mcp-server-time) can take ~10 s to start on a busy 2-CPU machine.
REAL_TIMEOUT = 110


# --- real third-party servers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_env(tmp_path_factory, real_ready, stub_ready):
    d = tmp_path_factory.mktemp("proxy-real")
    cfg = S.real_servers(d)
    S.write_config(d / "mcps", cfg)
    return {"dir": d, "files": d / "files", "mcps": d / "mcps", "memory_file": d / "memory.jsonl"}


@pytest.fixture(scope="module")
def rb(bridge_factory, real_env):
    b = bridge_factory(name="proxy-real", env={"MCP_BRIDGE_CONFIG_DIR": str(real_env["mcps"])})
    yield b
    b.close()


def test_everything_echo_and_sum(rb):
    got = _json(
        rb,
        """
import json
out = {
  "echo": await mcp_everything.echo(message="hi"),
  "sum": await mcp_everything.get_sum(a=2, b=3),
  "sum_real_name": await getattr(mcp_everything, "get-sum")(a=20, b=22),
  "structured": await mcp_everything.get_structured_content(location="New York"),
  "image": await mcp_everything.get_tiny_image(),
}
print(json.dumps(out))
""",
        servers=["everything"],
        timeout=REAL_TIMEOUT,
    )
    assert got["echo"] == "Echo: hi"
    assert got["sum"] == "The sum of 2 and 3 is 5."
    assert got["sum_real_name"] == "The sum of 20 and 22 is 42."
    assert isinstance(got["structured"], dict) and {"temperature", "conditions", "humidity"} <= set(got["structured"]), got
    # Non-text content comes back as the list of content blocks.
    assert isinstance(got["image"], list), got["image"]
    images = [c for c in got["image"] if c.get("type") == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png" and images[0]["data"], got["image"]


def test_everything_fifty_parallel_calls(rb):
    got = _json(
        rb,
        """
import asyncio, json
res = await asyncio.gather(*[mcp_everything.echo(message=f"p{i}") for i in range(50)])
print(json.dumps(res))
""",
        servers=["everything"],
        timeout=REAL_TIMEOUT,
    )
    assert got == [f"Echo: p{i}" for i in range(50)]


def test_memory_create_entities_then_read_graph(rb):
    got = _json(
        rb,
        """
import json
created = await mcp_memory.create_entities(entities=[
    {"name": "Ada_e2e", "entityType": "person", "observations": ["wrote the first program"]}])
graph = await mcp_memory.read_graph()
print(json.dumps({"created": created, "graph": graph}))
""",
        servers=["memory"],
        timeout=REAL_TIMEOUT,
    )
    ada = {"name": "Ada_e2e", "entityType": "person", "observations": ["wrote the first program"]}
    assert got["created"] == {"entities": [ada]}
    assert ada in got["graph"]["entities"], got
    assert "relations" in got["graph"]


def test_filesystem_reads_a_file_in_the_allowed_dir(rb, real_env):
    f = real_env["files"] / "hello.txt"
    f.write_text("hello from the host\nline 2\n")
    got = _json(
        rb,
        """
import json
from mcp import runtime
out = {"read": await mcp_filesystem.read_text_file(path=%r)}
try:
    await mcp_filesystem.read_text_file(path="/etc/hostname")
except runtime.ToolError as e:
    out["outside"] = str(e)
print(json.dumps(out))
"""
        % str(f.resolve()),
        servers=["filesystem"],
        timeout=REAL_TIMEOUT,
    )
    assert got["read"] == {"content": "hello from the host\nline 2\n"}
    assert "outside allowed directories" in got.get("outside", ""), got


def test_time_current_time_in_utc(rb):
    got = _json(rb, "import json\nprint(json.dumps(await mcp_time.get_current_time(timezone='UTC')))", servers=["time"], timeout=REAL_TIMEOUT)
    assert got["timezone"] == "UTC"
    assert got["datetime"].endswith("+00:00"), got
    when = dt.datetime.fromisoformat(got["datetime"])
    now = dt.datetime.now(dt.UTC)
    assert abs((now - when).total_seconds()) < 300, (got, now)
    assert set(got) >= {"timezone", "datetime", "is_dst"}


def test_multi_server_workflow_in_one_run(rb, real_env):
    f = real_env["files"] / "workflow.txt"
    f.write_text("the bridge works")
    r = rb.run(
        wait=REAL_TIMEOUT + 60,
        code="""
import asyncio
from mcp.servers.filesystem import read_text_file
text = (await read_text_file(path=%r))["content"]
await mcp_memory.create_entities(entities=[{"name": "workflow_note", "entityType": "note", "observations": []}])
await mcp_memory.add_observations(observations=[{"entityName": "workflow_note", "contents": [text]}])
graph, now, total = await asyncio.gather(
    mcp_memory.open_nodes(names=["workflow_note"]),
    mcp_time.get_current_time(timezone="UTC"),
    mcp_everything.get_sum(a=len(text), b=1),
)
note = graph["entities"][0]
print("file:", text)
print("memory:", note["name"], note["observations"])
print("time zone:", now["timezone"])
print("sum:", total)
"""
        % str(f.resolve()),
        servers=["filesystem", "memory", "time", "everything"],
        timeout=REAL_TIMEOUT,
    )
    assert not r.is_error, f"{r}\n{rb.stderr_tail()}"
    assert _stdout(r) == (
        "file: the bridge works\n"
        "memory: workflow_note ['the bridge works']\n"
        "time zone: UTC\n"
        "sum: The sum of 16 and 1 is 17.\n"
    ), str(r)
    assert r.structured.get("servers") == ["filesystem", "memory", "time", "everything"], str(r)
    # The memory server really stored it (its file is on the host).
    stored = real_env["memory_file"].read_text()
    assert "workflow_note" in stored and "the bridge works" in stored


# --- remote servers (streamable HTTP) --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _RecordingTcpProxy:
    """Forwards 127.0.0.1:<port> to `target` byte for byte and keeps what clients sent, so a test
    can see the HTTP request headers the bridge put on the wire."""

    def __init__(self, target: int):
        self.target = target
        self.sent = bytearray()
        self._lock = threading.Lock()
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        pump(src, dst, self._record if record else None)

    def _record(self, data: bytes) -> None:
        with self._lock:
            self.sent += data

    def text(self) -> str:
        with self._lock:
            return self.sent.decode("latin-1")

    def close(self) -> None:
        self._srv.close()


@pytest.fixture(scope="module")
def http_everything(tmp_path_factory, real_ready):
    """server-everything serving streamable HTTP on a free port, behind a recording proxy."""
    port = _free_port()
    log = tmp_path_factory.mktemp("http-everything") / "server.log"
    entry = S.everything()
    with open(log, "w") as errlog:
        proc = subprocess.Popen(
            [entry["command"], *entry["args"], "streamableHttp"],
            env=dict(os.environ, PORT=str(port)),
            stdin=subprocess.DEVNULL,
            stdout=errlog,
            stderr=subprocess.STDOUT,
        )
    proxy = None
    try:
        listening = False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                listening = True
                break
            except OSError:
                time.sleep(0.1)
        assert listening, f"server-everything did not listen on {port}:\n{log.read_text()}"
        proxy = _RecordingTcpProxy(port)
        yield proxy
    finally:
        if proxy is not None:
            proxy.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_remote_http_server_with_headers(tmp_path, bridge_factory, http_everything):
    mcps = tmp_path / "mcps"
    S.write_config(
        mcps,
        {
            "remote": {
                "type": "http",
                "url": f"http://127.0.0.1:{http_everything.port}/mcp",
                "headers": {"X-E2E-Token": "secret-123"},
            },
            "oldsse": {"type": "sse", "url": f"http://127.0.0.1:{http_everything.port}/sse"},
        },
    )
    b = bridge_factory(name="remote-http", env={"MCP_BRIDGE_CONFIG_DIR": str(mcps)})
    try:
        got = _json(
            b,
            """
import asyncio, json
from mcp import runtime
d = {s["name"]: [s["transport"], s["source"]] for s in {"servers": runtime.discovered_servers_sync(True), "errors": runtime.config_problems_sync()}["servers"]}
out = {"echo": await mcp_remote.echo(message="over http"),
       "sums": await asyncio.gather(*[mcp_remote.get_sum(a=i, b=1) for i in range(10)]),
       "discovered": d}
print(json.dumps(out))
""",
            servers=["remote"],
            timeout=REAL_TIMEOUT,
        )
        assert got["echo"] == "Echo: over http"
        assert got["sums"] == [f"The sum of {i} and 1 is {i + 1}." for i in range(10)]
        assert got["discovered"] == {
            "remote": ["http", str(mcps / "remote.json")],
            "oldsse": ["sse", str(mcps / "oldsse.json")],
        }
        wire = http_everything.text().lower()
        assert "post /mcp" in wire, wire[:2000]
        assert "x-e2e-token: secret-123" in wire, "the configured header was not sent:\n" + wire[:2000]
        # server-everything serves no legacy event stream at /sse: a clear error naming the server.
        r = b.run("print('must not run')", servers=["oldsse"])
        assert r.is_error and "'oldsse'" in r.text and "sse" in r.text.lower(), str(r)
        _ok(b, "print(await mcp_remote.echo(message='again'))", servers=["remote"])
    finally:
        b.close()


# --- who the bridge says it is -------------------------------------------------------------------

_WHO_SERVER = r'''
import json, sys
seen = {}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        seen = msg["params"]["clientInfo"]
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "who", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "caller", "description": "Who called.",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    else:
        result = {"content": [{"type": "text", "text": json.dumps(seen)}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


def test_a_server_is_told_the_bridges_name_and_version(helpers, cli_env, cli_cwd, tmp_path):
    """The `initialize` every server gets names the bridge (issue 31), not the MCP SDK under it."""
    import json
    import tomllib

    script = tmp_path / "who.py"
    script.write_text(_WHO_SERVER)
    S.write_config(cli_env["MCP_BRIDGE_CONFIG_DIR"], {"who": {"command": sys.executable, "args": [str(script)]}})
    code = "import json\nprint(json.dumps(await mcp_who.caller()))"
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--servers", "who", code], capture_output=True, text=True,
                       env=cli_env, cwd=cli_cwd, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    with open(S.REPO_ROOT / "Cargo.toml", "rb") as f:
        version = tomllib.load(f)["package"]["version"]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"name": "mcp-code-bridge", "version": version}, p.stdout
