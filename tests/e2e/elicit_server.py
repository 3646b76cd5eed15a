"""A real FastMCP server (the official MCP Python SDK) whose tools ask the user questions through
MCP elicitation, for tests/e2e/test_elicit_relay.py. Run: python3 tests/e2e/elicit_server.py
(stdio). Each tool returns what came back, so the test sees the answer reach the server.

- `ask_name()`: a form (name, required; age, default 30) through `ctx.elicit`.
- `ask_link()`: a URL-mode question.
- `hostile(kind)`: `huge` (a 1 MiB message), `bad_schema` (a nested object field), `bad_link`
  (a javascript: URL), `endless` (questions until one is not accepted, at most 100).
- `slow_ask(tag)`: a form whose message names `tag` (the answer's action appended to
  $ELICIT_LOG when set), for the two-callers and the cancelled-run tests.
"""

from __future__ import annotations

import os
import sys

from pydantic import BaseModel, Field

try:
    from mcp.server.fastmcp import Context, FastMCP
except ImportError:  # newer SDKs name it MCPServer
    from mcp.server.mcpserver import Context  # type: ignore[no-redef]
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[no-redef]

server = FastMCP("asker")


class Person(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(default=30, description="Your age")


def _session(ctx: Context):
    return ctx.request_context.session


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Asks the user for a name and age."""
    r = await ctx.elicit("What is your name?", Person)
    if r.action == "accept":
        return f"accept name={r.data.name} age={r.data.age}"
    return r.action


@server.tool()
async def ask_link(ctx: Context) -> str:
    """Asks the user to open a link."""
    r = await ctx.elicit_url("Please sign the form", "https://example.com/sign?id=7", "el-7")
    return r.action


@server.tool()
async def ask_link_done(ctx: Context) -> str:
    """Asks the user to open a link, then says it is done: first for an id it never asked
    under (to be dropped), then twice for its own (said once)."""
    r = await ctx.elicit_url("Please sign the form", "https://example.com/sign?id=8", "el-8")
    if r.action == "accept":
        await ctx.session.send_elicit_complete("el-forged")
        await ctx.session.send_elicit_complete("el-8")
        await ctx.session.send_elicit_complete("el-8")
    return r.action


@server.tool()
async def slow_ask(tag: str, ctx: Context) -> str:
    """Asks a form whose message names `tag`."""
    r = await ctx.elicit(f"question for {tag}", Person)
    if os.environ.get("ELICIT_LOG"):
        with open(os.environ["ELICIT_LOG"], "a") as f:
            f.write(f"{tag}:{r.action}\n")
    return f"{tag}:{r.action}"


@server.tool()
async def hostile(kind: str, ctx: Context) -> str:
    """Sends a hostile question and reports what came back (or the error)."""
    s = _session(ctx)
    rid = ctx.request_id
    plain = {"type": "object", "properties": {"x": {"type": "string", "default": "d"}}}
    try:
        if kind == "huge":
            r = await s.elicit_form("A" * (1 << 20), plain, rid)
        elif kind == "bad_schema":
            bad = {"type": "object", "properties": {"x": {"type": "object", "properties": {}}}}
            r = await s.elicit_form("nested", bad, rid)
        elif kind == "bad_link":
            r = await s.elicit_url("click", "javascript:alert(1)", "el-1", rid)
        elif kind == "endless":
            n = 0
            for _ in range(100):
                r = await s.elicit_form(f"question {n}", plain, rid)
                if r.action != "accept":
                    return f"endless: {n} accepted, then {r.action}"
                n += 1
            return f"endless: {n} accepted"
        else:
            return "unknown kind"
    except Exception as e:  # noqa: BLE001 - reported to the caller
        return f"error: {type(e).__name__}: {str(e)[:200]}"
    return f"{kind}: {r.action}"


@server.tool()
async def seen_meta(ctx: Context) -> str:
    """The `_meta` of this tools/call request as the server got it, as JSON."""
    import json

    meta = ctx.request_context.meta
    if meta is None:
        return "{}"
    dumped = meta.model_dump(exclude_none=True, by_alias=True) if hasattr(meta, "model_dump") else dict(meta)
    return json.dumps(dumped)


if __name__ == "__main__":
    print("elicit_server starting", file=sys.stderr)
    server.run()
