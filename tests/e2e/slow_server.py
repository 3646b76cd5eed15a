"""A FastMCP server (the official MCP Python SDK) with one slow tool that records whether it was
cancelled, for the deadline tests (tests/e2e/test_deadlines.py). Run:
`python3 tests/e2e/slow_server.py LOG [stdio|http|sse PORT_FILE]`.

- `slow(seconds)`: writes `started` to LOG, sleeps, writes `finished`; when the client sends
  `notifications/cancelled` for the call, the SDK cancels the tool's task and it writes
  `cancelled` instead."""
from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

try:
    from mcp.server.fastmcp import FastMCP
except ImportError:  # newer SDKs name it MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[no-redef]

LOG = Path(sys.argv[1])
server = FastMCP("slow")


def note(word: str) -> None:
    with LOG.open("a") as f:
        f.write(word + "\n")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps `seconds`, noting whether it finished or was cancelled."""
    note("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        note("cancelled")
        raise
    note("finished")
    return "done"


def main() -> None:
    transport = sys.argv[2] if len(sys.argv) > 2 else "stdio"
    if transport == "stdio":
        server.run()
        return
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = server.streamable_http_app() if transport == "http" else server.sse_app()
    Path(sys.argv[3]).write_text(str(port))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
