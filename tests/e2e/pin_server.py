"""A FastMCP server (the official MCP Python SDK) whose tool definitions come from files, for the
pinned-definitions tests (test_pins.py): `greet`'s description is the text of $PIN_DIR/greet.txt,
`add` never changes, and `extra` is listed only while $PIN_DIR/extra exists.
Run: PIN_DIR=... python3 tests/e2e/pin_server.py (stdio)."""

from __future__ import annotations

import os
from pathlib import Path

try:
    from mcp.server.fastmcp import FastMCP
except ImportError:  # newer SDKs name it MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[no-redef]

PIN_DIR = Path(os.environ["PIN_DIR"])
server = FastMCP("pinned")


@server.tool(description=(PIN_DIR / "greet.txt").read_text())
def greet(name: str) -> str:
    return f"hello {name}"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if (PIN_DIR / "extra").exists():
    @server.tool()
    def extra() -> str:
        """A tool that appeared after the server was pinned."""
        return "extra ran"


if __name__ == "__main__":
    server.run()
