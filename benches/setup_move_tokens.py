"""Issue 33: what `setup --import-servers --move` saves the model, in tool-definition tokens.

A Claude Code user file (`~/.claude.json`, in a temporary HOME) with ten real servers: from npm
server-everything, server-memory, server-filesystem, server-sequential-thinking; from PyPI
mcp-server-time, mcp-server-fetch, mcp-server-git, mcp-server-sqlite; the FastMCP calculator of
tests/e2e/fastmcp_calc.py; and the bridge's stub. Before: the ten servers' `tools/list` results as
the client receives them (each tool's JSON, what it puts in the model's context). Then the real
`mcp-code-bridge setup --import-servers --move --yes` on that HOME; after: the bridge's own
`tools/list` (run_python) and its `instructions` from `initialize`, the only server left in the
client's file. Tokens: OpenAI's o200k_base BPE (tiktoken, with the BPE file that ships inside
tiktoken-rs, as the Rust benchmark uses it; Claude's tokenizer is not public: read the ratio).

Run (nothing of the repository changes; everything goes in a temporary folder):

    python3 -m venv /tmp/bench33/venv
    /tmp/bench33/venv/bin/pip install mcp-server-fetch==2026.10.24 mcp-server-git==2026.10.19 tiktoken
    python3 -m venv /tmp/bench33/sq
    /tmp/bench33/sq/bin/pip install mcp-server-sqlite==2025.4.25 'mcp<2'
    npm install --prefix /tmp/bench33/npm @modelcontextprotocol/server-sequential-thinking@2026.8.31
    bash tests/e2e/install-servers.sh && cargo build --bins --features test-stub
    /tmp/bench33/venv/bin/python benches/setup_move_tokens.py

BENCH_VENV, BENCH_SQLITE_VENV and BENCH_NPM point elsewhere; MCB_TEST_SERVERS as in tests/e2e/servers.py.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import servers as e2e  # noqa: E402

VENV = Path(os.environ.get("BENCH_VENV", "/tmp/bench33/venv"))
NPM = Path(os.environ.get("BENCH_NPM", "/tmp/bench33/npm"))
# mcp-server-sqlite 2025.4.25 needs the 1.x SDK: a venv of its own.
SQLITE_VENV = Path(os.environ.get("BENCH_SQLITE_VENV", "/tmp/bench33/sq"))
BRIDGE = REPO / "target" / "debug" / "mcp-code-bridge"
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def encoder():
    """o200k_base from the file inside tiktoken-rs (no download)."""
    cache = Path(tempfile.mkdtemp(prefix="tiktoken-"))
    shipped = sorted(
        glob.glob(str(Path.home() / ".cargo/registry/src/*/tiktoken-rs-*/assets/o200k_base.tiktoken"))
    )
    if not shipped:
        sys.exit("no o200k_base.tiktoken in ~/.cargo/registry (cargo fetch builds tiktoken-rs)")
    shutil.copy(shipped[-1], cache / hashlib.sha1(O200K_URL.encode()).hexdigest())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


def ten_servers(tmp: Path) -> dict[str, dict]:
    """The ten entries, as a user would have them in Claude Code."""
    node = shutil.which("node") or "node"
    py = str(VENV / "bin" / "python")
    # mcp-server-time and the FastMCP calculator run on the python3 the e2e suite installs into.
    system_py = shutil.which("python3") or "python3"
    repo = tmp / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    servers = {
        "everything": e2e.everything(),
        "memory": e2e.memory(tmp / "memory.jsonl"),
        "filesystem": e2e.filesystem(tmp),
        "sequential-thinking": {
            "command": node,
            "args": [str(NPM / "node_modules/@modelcontextprotocol/server-sequential-thinking/dist/index.js")],
        },
        "time": {"command": system_py, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
        "fetch": {"command": py, "args": ["-m", "mcp_server_fetch"]},
        "git": {"command": py, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
        "sqlite": {
            "command": str(SQLITE_VENV / "bin" / "mcp-server-sqlite"),
            "args": ["--db-path", str(tmp / "app.db")],
        },
        "calc": {"command": system_py, "args": [str(REPO / "tests/e2e/fastmcp_calc.py")]},
        "stub": {"command": str(e2e.stub_bin()), "args": []},
    }
    for entry in servers.values():
        entry["type"] = "stdio"
    return servers


async def listed(command: str, args: list[str], env: dict[str, str] | None) -> tuple[list[dict], str]:
    """(the tools as the client receives them, the server's instructions)."""
    params = StdioServerParameters(command=command, args=args, env=env)
    with open(os.environ.get("BENCH_ERRLOG", os.devnull), "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                tools = await session.list_tools()
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools]
    return dumped, init.instructions or ""


def main() -> None:
    enc = encoder()
    count = lambda text: len(enc.encode(text))  # noqa: E731
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        home = tmp / "home"
        home.mkdir()
        servers = ten_servers(tmp)
        (home / ".claude.json").write_text(
            json.dumps({"numStartups": 3, "mcpServers": servers, "projects": {}}, indent=2) + "\n"
        )
        print("| server | tools | o200k tokens of its tools/list |")
        print("|---|---:|---:|")
        before = 0
        for name, entry in servers.items():
            env = dict(os.environ, **entry.get("env", {}))
            tools, _ = asyncio.run(listed(entry["command"], entry["args"], env))
            n = count(json.dumps(tools))
            before += n
            print(f"| {name} | {len(tools)} | {n} |")
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
            "XDG_CACHE_HOME": str(tmp / "xdg-cache"),
            "XDG_STATE_HOME": str(tmp / "xdg-state"),
            "MCP_BRIDGE_STATE_DIR": str(tmp / "state"),
        }
        moved = subprocess.run(
            [str(BRIDGE), "setup", "--client", "claude-code", "--import-servers", "--move", "--yes"],
            env=env, capture_output=True, text=True, check=False,
        )
        if moved.returncode != 0:
            sys.exit(f"setup --move failed:\n{moved.stdout}{moved.stderr}")
        left = json.loads((home / ".claude.json").read_text())["mcpServers"]
        assert list(left) == ["code"], f"left in the client: {list(left)}"
        tools, instructions = asyncio.run(listed(str(BRIDGE), ["run"], env))
        after_tools = count(json.dumps(tools))
        after_instr = count(instructions)
        after = after_tools + after_instr
        print(f"\nbefore: {before} tokens (ten servers' tools/list)")
        print(f"after: {after} tokens (the bridge's tools/list {after_tools} + instructions {after_instr}),"
              f" {len(tools)} tool(s); left in ~/.claude.json: {', '.join(left)}")
        print(f"saved: {before - after} tokens ({100 * (before - after) / before:.1f}%), ratio {before / after:.1f}x")


if __name__ == "__main__":
    main()
