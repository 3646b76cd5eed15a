#!/usr/bin/env python3
"""Benchmarks for mcp-code-bridge, driven through the official MCP Python client over stdio.

Usage: python3 benches/bench.py [--bin target/release/mcp-code-bridge] [--runs 300] [--json out.json]

Measures (median and p95):
  cold_start_initialize_ms  process start -> `initialize` answered
  cold_start_first_result_ms process start -> first run_python result (image present)
  warm_roundtrip_ms         run_python("print(1)") round trip, warm sandbox
  client_floor_ms           the same client calling a trivial in-process-answered request
                            (resources/read), i.e. what the MCP client itself costs
  rss_idle_kb               bridge RSS after startup, before any call
  rss_after_kb              bridge RSS after the warm runs
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def pct(values, p):
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(p / 100 * (len(values) - 1))))
    return values[k]


def summary(values):
    return {"median": round(statistics.median(values), 3), "p95": round(pct(values, 95), 3), "n": len(values)}


def find_pid(marker):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if marker.encode() in f.read():
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        if b"mcp-code-bridge" in c.read():
                            return int(pid)
        except OSError:
            continue
    return None


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


async def session(binary, env):
    params = StdioServerParameters(command=binary, args=["run"], env=env)
    return stdio_client(params)


async def cold_start(binary, env):
    t0 = time.perf_counter()
    async with stdio_client(StdioServerParameters(command=binary, args=["run"], env=env)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            t_init = time.perf_counter()
            res = await s.call_tool("run_python", {"code": "print(1)"})
            t_first = time.perf_counter()
            assert not res.is_error, res
    return (t_init - t0) * 1000, (t_first - t0) * 1000


async def warm(binary, env, runs, marker):
    out = {}
    async with stdio_client(StdioServerParameters(command=binary, args=["run"], env=env)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            pid = find_pid(marker)
            out["rss_idle_kb"] = rss_kb(pid) if pid else None
            for _ in range(20):  # warm up: sandbox start, caches
                await s.call_tool("run_python", {"code": "print(1)"})
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                res = await s.call_tool("run_python", {"code": "print(1)"})
                times.append((time.perf_counter() - t) * 1000)
                assert res.content[0].text == "1\n", res
            out["warm_roundtrip_ms"] = summary(times)
            floor = []
            for _ in range(runs):
                t = time.perf_counter()
                await s.read_resource("resource://mcp-code-bridge/capabilities")
                floor.append((time.perf_counter() - t) * 1000)
            out["client_floor_ms"] = summary(floor)
            out["rss_after_kb"] = rss_kb(pid) if pid else None
    return out


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/mcp-code-bridge")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    marker = "BENCH_MARKER_%d" % os.getpid()
    env = dict(os.environ, MCP_BRIDGE_LOG_LEVEL="warn", BENCH_MARKER=marker)
    env[marker] = "1"
    results = {}
    inits, firsts = [], []
    for _ in range(a.cold_runs):
        i, f = await cold_start(a.bin, env)
        inits.append(i)
        firsts.append(f)
    results["cold_start_initialize_ms"] = summary(inits)
    results["cold_start_first_result_ms"] = summary(firsts)
    results.update(await warm(a.bin, env, a.runs, marker))
    print("%-30s %12s %12s" % ("metric", "median", "p95"))
    for k, v in results.items():
        if isinstance(v, dict):
            print("%-30s %12.3f %12.3f" % (k, v["median"], v["p95"]))
        else:
            print("%-30s %12s" % (k, v))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
