"""A real FastMCP server (the official MCP Python SDK) over the legacy HTTP+SSE transport, or over
streamable HTTP with `http` as the first argument (to compare the two). It listens on a free
loopback port and prints `PORT <n>` as its first stdout line once listening.

Tools: `add`, `fail` (a tool error), `big(n)` (a result of n characters), `slow(mark)` (notes its
cancellation), `die` (the process exits mid-call, its event stream cut).
Run: python3 tests/e2e/fastmcp_sse.py [sse|http]. With SSE_STUB_HEADER_LOG=FILE, each request's
method, path and X-E2E-Token header are appended to FILE.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

try:
    from mcp.server.fastmcp import FastMCP
except ImportError:  # newer SDKs name it MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[no-redef]

import uvicorn

server = FastMCP("sse-calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(why: str) -> str:
    """Always fails with `why`."""
    raise ValueError(why)


@server.tool()
def big(n: int) -> str:
    """A string of `n` characters."""
    return "x" * n


@server.tool()
async def slow(mark: str) -> str:
    """Sleeps 60 s; when the call is cancelled (notifications/cancelled), writes `cancelled` to
    the file `mark`."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        with open(mark, "w") as f:
            f.write("cancelled")
        raise
    return "slept"


@server.tool()
async def die() -> str:
    """Exits the server process in the middle of the call."""
    await asyncio.sleep(0.2)
    os._exit(3)


def header_log(app, path: str):
    """`app`, noting each request's method, path and X-E2E-Token in the file `path`."""

    async def logged(scope, receive, send):
        if scope["type"] == "http":
            token = dict(scope["headers"]).get(b"x-e2e-token", b"-").decode()
            with open(path, "a") as f:
                f.write(f"{scope['method']} {scope['path']} {token}\n")
        await app(scope, receive, send)

    return logged


async def main(mode: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = server.sse_app() if mode == "sse" else server.streamable_http_app()
    if os.environ.get("SSE_STUB_HEADER_LOG"):
        app = header_log(app, os.environ["SSE_STUB_HEADER_LOG"])
    config = uvicorn.Config(app, log_level="warning")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sse"))
