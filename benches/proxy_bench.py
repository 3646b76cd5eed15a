#!/usr/bin/env python3
"""Proxied tool-call benchmark: sandbox code → bridge → stub MCP server → back, compared in the
same run with a direct MCP client (official Python SDK) calling the same stub over stdio, and
search_tool_docs over 1,000 tools (50 stub servers x 20 tools).

Usage: python3 benches/proxy_bench.py [--bin target/release/mcp-code-bridge] [--stub target/release/stub-mcp]
"""
import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SANDBOX_CODE = """
import time, asyncio
from mcp import runtime
for _ in range(50): await mcp_stub.echo(text='w')
t = time.perf_counter()
for _ in range({n}): await mcp_stub.echo(text='x')
seq = time.perf_counter() - t
t = time.perf_counter()
await asyncio.gather(*[mcp_stub.echo(text='x') for _ in range(100)])
par = time.perf_counter() - t
t = time.perf_counter()
for _ in range({n}): await runtime.ping(1)
ping = time.perf_counter() - t
runtime.search_tool_docs_sync('calender evnts')
ts = []
for _ in range(50):
    t = time.perf_counter(); runtime.search_tool_docs_sync('calender evnts'); ts.append(time.perf_counter() - t)
ts.sort()
print({{'seq_calls_per_s': round({n}/seq), 'seq_us_per_call': round(seq/{n}*1e6), 'gather100_ms': round(par*1e3, 2),
        'ping_us': round(ping/{n}*1e6), 'search_1000_tools_ms_median_roundtrip': round(ts[25]*1e3, 2)}})
"""


async def direct(stub, n):
    async with stdio_client(StdioServerParameters(command=stub, args=[])) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            for _ in range(50):
                await s.call_tool("echo", {"text": "w"})
            t = time.perf_counter()
            for _ in range(n):
                await s.call_tool("echo", {"text": "x"})
            return (time.perf_counter() - t) / n * 1e6


async def bridged(binary, stub, n):
    d = tempfile.mkdtemp()
    servers = {"stub": {"command": stub}}
    for i in range(50):
        servers["s%02d" % i] = {"command": stub, "args": ["--extra-tools", "20", "--name", "s%02d" % i]}
    with open(os.path.join(d, "servers.json"), "w") as f:
        json.dump({"mcpServers": servers}, f)
    env = dict(os.environ, MCP_BRIDGE_CONFIG_DIR=d, MCP_BRIDGE_STATE_DIR=os.path.join(d, "state"),
               MCP_BRIDGE_LOG_LEVEL="warn")
    async with stdio_client(StdioServerParameters(command=binary, args=["run"], env=env)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await asyncio.sleep(8)  # let the background indexer list the 50 servers' tools
            res = await s.call_tool("run_python", {"code": SANDBOX_CODE.format(n=n), "servers": ["stub"], "timeout": 120})
            return res.content[0].text


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/mcp-code-bridge")
    ap.add_argument("--stub", default="target/release/stub-mcp")
    ap.add_argument("--n", type=int, default=2000)
    a = ap.parse_args()
    d_us = await direct(a.stub, a.n)
    print("direct MCP client (python SDK) -> stub echo: %.0f us/call" % d_us)
    print("bridge:", (await bridged(a.bin, a.stub, a.n)).strip())


if __name__ == "__main__":
    asyncio.run(main())
