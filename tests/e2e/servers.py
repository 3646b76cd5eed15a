"""MCP server config entries for the end-to-end tests (no tests here).

Each function returns one ready-to-use entry of an `{"mcpServers": {...}}` config (a dict with
`command`, `args`, optionally `env` / `disabled`); `write_config(dir, {name: entry, ...})` writes
one `dir/<name>.json` per server, the layout the bridge reads from its config dir (~/MCPs, or
MCP_BRIDGE_CONFIG_DIR).

Servers
-------
stub        tests/support/stub_mcp.rs (cargo build --bins --features test-stub): echo, add, slow, crash, big,
            fail, whoami, plus tool_0..tool_{N-1} with --extra-tools N. Binary from MCP_STUB_BIN,
            else <repo>/target/debug/stub-mcp.
everything  @modelcontextprotocol/server-everything (node), tools like echo(message), get-sum(a, b)
memory      @modelcontextprotocol/server-memory (node), knowledge graph stored in MEMORY_FILE_PATH
filesystem  @modelcontextprotocol/server-filesystem (node), allowed directories as arguments
time        mcp-server-time (PyPI), run as `<python> -m mcp_server_time --local-timezone UTC`
calc        tests/e2e/fastmcp_calc.py: a FastMCP server (official Python SDK): add, shout, stats

The real servers are installed by tests/e2e/install-servers.sh into `servers_dir()`
($MCB_TEST_SERVERS, else ~/.cache/mcp-code-bridge/test-servers); `real_servers_installed()` tells
whether they are there and `install_real_servers()` runs the script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / "tests" / "e2e" / "install-servers.sh"

NPM_SERVERS = ("server-everything", "server-memory", "server-filesystem")

# Tool names observed on the pinned versions (install-servers.sh), for assertions.
EVERYTHING_TOOLS = {
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
}  # plus tools registered after `initialized` depending on client capabilities
MEMORY_TOOLS = {
    "create_entities", "create_relations", "add_observations", "delete_entities",
    "delete_observations", "delete_relations", "read_graph", "search_nodes", "open_nodes",
}
FILESYSTEM_TOOLS = {
    "read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file",
    "edit_file", "create_directory", "list_directory", "list_directory_with_sizes",
    "directory_tree", "move_file", "search_files", "get_file_info", "list_allowed_directories",
}
TIME_TOOLS = {"get_current_time", "convert_time"}
STUB_TOOLS = {"echo", "add", "slow", "crash", "big", "fail", "whoami"}


# --- stub -------------------------------------------------------------------------------------


def stub_bin() -> Path:
    """The stub-mcp binary: $MCP_STUB_BIN, else <repo>/target/debug/stub-mcp (may not exist)."""
    env = os.environ.get("MCP_STUB_BIN")
    return Path(env) if env else REPO_ROOT / "target" / "debug" / "stub-mcp"


def stub(
    name: str = "stub",
    *,
    extra_tools: int = 0,
    garbage_stdout: bool = False,
    start_file: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    disabled: bool = False,
    command: str | os.PathLike[str] | None = None,
    policy_tools: bool = False,
    call_file: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """A stub-mcp entry; `name` is its server_info name (use the config key).

    start_file: STUB_START_FILE, one line appended per process start (whoami reports the count).
    policy_tools: add drop_table (destructiveHint), peek (readOnlyHint + destructiveHint) and
    write_note (no hints); call_file: STUB_CALL_FILE, one line per call of those that really ran.
    """
    args = ["--name", name]
    if policy_tools:
        args.append("--policy-tools")
    if extra_tools:
        args += ["--extra-tools", str(extra_tools)]
    if garbage_stdout:
        args.append("--garbage-stdout")
    entry: dict[str, Any] = {"command": str(command or stub_bin()), "args": args}
    full_env = dict(env or {})
    if start_file is not None:
        full_env["STUB_START_FILE"] = str(Path(start_file).resolve())
    if call_file is not None:
        full_env["STUB_CALL_FILE"] = str(Path(call_file).resolve())
    if full_env:
        entry["env"] = full_env
    if disabled:
        entry["disabled"] = True
    return entry


def many_stubs(count: int, tools_each: int, prefix: str = "s") -> dict[str, dict[str, Any]]:
    """`count` stub servers named <prefix>0.. each with `tools_each` generated tools."""
    return {f"{prefix}{i}": stub(f"{prefix}{i}", extra_tools=tools_each) for i in range(count)}


# --- real servers -------------------------------------------------------------------------------


def servers_dir(install_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where install-servers.sh puts the npm servers."""
    if install_dir is not None:
        return Path(install_dir)
    env = os.environ.get("MCB_TEST_SERVERS")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "mcp-code-bridge" / "test-servers"


def _npm_entry(install_dir: str | os.PathLike[str] | None, package: str) -> Path:
    return servers_dir(install_dir) / "node_modules" / "@modelcontextprotocol" / package / "dist" / "index.js"


def _node() -> str:
    return shutil.which("node") or "node"


def _python() -> str:
    # The interpreter running the tests: install-servers.sh pip-installs mcp-server-time into the
    # python3 on PATH, which is this one under `python3 -m pytest`.
    return sys.executable or "python3"


def real_servers_installed(install_dir: str | os.PathLike[str] | None = None) -> bool:
    """True when node, the three npm servers and mcp_server_time are all usable."""
    if shutil.which("node") is None:
        return False
    if not all(_npm_entry(install_dir, p).is_file() for p in NPM_SERVERS):
        return False
    probe = subprocess.run(
        [_python(), "-c", "import mcp_server_time"], capture_output=True, check=False
    )
    return probe.returncode == 0


def install_real_servers(install_dir: str | os.PathLike[str] | None = None) -> Path:
    """Runs install-servers.sh (idempotent, ~20 s the first time); returns the install dir."""
    target = servers_dir(install_dir)
    subprocess.run(
        ["bash", str(INSTALL_SCRIPT), str(target)],
        check=True,
        stdout=subprocess.DEVNULL,
        env=dict(os.environ, PYTHON=_python()),
    )
    return target


def everything(install_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """server-everything on stdio: echo(message) -> text "Echo: <message>", get-sum(a, b) -> text
    "The sum of 2 and 3 is 5.", get-structured-content(location) -> structuredContent."""
    return {"command": _node(), "args": [str(_npm_entry(install_dir, "server-everything"))]}


def memory(memory_file: str | os.PathLike[str], install_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """server-memory storing its graph (JSON lines) in `memory_file` (made absolute: a relative
    MEMORY_FILE_PATH would resolve against the package's own directory, shared by all tests)."""
    return {
        "command": _node(),
        "args": [str(_npm_entry(install_dir, "server-memory"))],
        "env": {"MEMORY_FILE_PATH": str(Path(memory_file).resolve())},
    }


def filesystem(
    *allowed_dirs: str | os.PathLike[str], install_dir: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """server-filesystem limited to `allowed_dirs` (at least one: our client offers no roots)."""
    if not allowed_dirs:
        raise ValueError("filesystem() needs at least one allowed directory")
    return {
        "command": _node(),
        "args": [str(_npm_entry(install_dir, "server-filesystem"))]
        + [str(Path(d).resolve()) for d in allowed_dirs],
    }


def time_server(local_timezone: str | None = "UTC") -> dict[str, Any]:
    """mcp-server-time; `local_timezone` None lets it detect the machine's zone."""
    args = ["-m", "mcp_server_time"]
    if local_timezone:
        args += ["--local-timezone", local_timezone]
    return {"command": _python(), "args": args}


def real_servers(
    tmp_dir: str | os.PathLike[str], install_dir: str | os.PathLike[str] | None = None
) -> dict[str, dict[str, Any]]:
    """All four real servers: memory's file and filesystem's allowed dir (`<tmp_dir>/files`,
    created) live under `tmp_dir`."""
    tmp = Path(tmp_dir)
    files = tmp / "files"
    files.mkdir(parents=True, exist_ok=True)
    return {
        "everything": everything(install_dir),
        "memory": memory(tmp / "memory.jsonl", install_dir),
        "filesystem": filesystem(files, install_dir=install_dir),
        "time": time_server(),
    }


# --- config files -------------------------------------------------------------------------------


def config(servers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`{"mcpServers": servers}`."""
    return {"mcpServers": dict(servers)}


def write_config(dir: str | os.PathLike[str], servers: dict[str, dict[str, Any]]) -> list[Path]:
    """Writes `dir/<name>.json` = {"mcpServers": {name: entry}} for each server; returns the paths.

    Characters unsafe in a file name are replaced by `_` in the file name only (the server keeps
    its name).
    """
    d = Path(dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, entry in servers.items():
        safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name).lstrip(".") or "_"
        path = d / f"{safe}.json"
        path.write_text(json.dumps(config({name: entry}), indent=2) + "\n")
        paths.append(path)
    return paths


def calc() -> dict[str, Any]:
    """The FastMCP calculator of tests/e2e/fastmcp_calc.py (needs the `mcp` package)."""
    return {"command": _python(), "args": [str(REPO_ROOT / "tests" / "e2e" / "fastmcp_calc.py")]}
