"""A real FastMCP server (the official MCP Python SDK) for the end-to-end tests: tools whose
plain return values FastMCP wraps as {"result": value} in structuredContent, and one that
returns a dict (not wrapped). Run: python3 tests/e2e/fastmcp_calc.py (stdio)."""

from __future__ import annotations

try:
    from mcp.server.fastmcp import FastMCP
except ImportError:  # newer SDKs name it MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[no-redef]

server = FastMCP("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str, times: int = 1) -> str:
    """Upper-case `text`, repeated `times` times."""
    return text.upper() * times


@server.tool()
def stats(values: list[float]) -> dict[str, float]:
    """Minimum, maximum and mean of `values`."""
    return {"min": min(values), "max": max(values), "mean": sum(values) / len(values)}


if __name__ == "__main__":
    server.run()
