"""Freeze the tools/list of real MCP servers into benches/search_eval/catalogs/*.json.

Run from a directory where the npm packages are installed (``npm install <pkgs>``, giving
``node_modules/``) with the PyPI servers installed in the running Python environment:

    python3 benches/search_eval/capture.py --node-modules /tmp/mcpcat/node_modules

Each server is started with dummy credentials over stdio with the official MCP Python client,
asked for its tools once, and stopped. The evaluation itself reads only the frozen JSON files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from importlib import metadata
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

OUT = Path(__file__).resolve().parent / "catalogs"
TIMEOUT_S = 60

DUMMY_ENV = {
    "GITHUB_PERSONAL_ACCESS_TOKEN": "dummy",
    "GITLAB_PERSONAL_ACCESS_TOKEN": "dummy",
    "SLACK_BOT_TOKEN": "xoxb-dummy",
    "SLACK_TEAM_ID": "T000",
    "BRAVE_API_KEY": "dummy",
    "GOOGLE_MAPS_API_KEY": "dummy",
    "EVERART_API_KEY": "dummy",
    "AWS_ACCESS_KEY_ID": "dummy",
    "AWS_SECRET_ACCESS_KEY": "dummy",
    "AWS_REGION": "us-east-1",
    "FIRECRAWL_API_KEY": "fc-dummy",
    "TAVILY_API_KEY": "tvly-dummy",
    "EXA_API_KEY": "dummy",
    "CIRCLECI_TOKEN": "dummy",
    "SUPABASE_ACCESS_TOKEN": "sbp_dummy",
    "NOTION_TOKEN": "ntn_dummy",
    "SENTRY_ACCESS_TOKEN": "dummy",
    "HEROKU_API_KEY": "dummy",
    "STRIPE_SECRET_KEY": "sk_test_dummy",
    "REDIS_URL": "redis://127.0.0.1:1",
}

# (catalog name, npm package, extra args)
NPM = [
    ("everything", "@modelcontextprotocol/server-everything", ["stdio"]),
    ("memory", "@modelcontextprotocol/server-memory", []),
    ("filesystem", "@modelcontextprotocol/server-filesystem", ["/tmp"]),
    ("sequential-thinking", "@modelcontextprotocol/server-sequential-thinking", []),
    ("github", "@modelcontextprotocol/server-github", []),
    ("slack", "@modelcontextprotocol/server-slack", []),
    ("brave-search", "@modelcontextprotocol/server-brave-search", []),
    ("gitlab", "@modelcontextprotocol/server-gitlab", []),
    ("google-maps", "@modelcontextprotocol/server-google-maps", []),
    ("postgres", "@modelcontextprotocol/server-postgres", ["postgresql://127.0.0.1:1/db"]),
    ("redis", "@modelcontextprotocol/server-redis", ["redis://127.0.0.1:1"]),
    ("gdrive", "@modelcontextprotocol/server-gdrive", []),
    ("everart", "@modelcontextprotocol/server-everart", []),
    ("aws-kb-retrieval", "@modelcontextprotocol/server-aws-kb-retrieval", []),
    ("puppeteer", "@modelcontextprotocol/server-puppeteer", []),
    ("playwright", "@playwright/mcp", []),
    ("firecrawl", "firecrawl-mcp", []),
    ("notion", "@notionhq/notion-mcp-server", []),
    ("circleci", "@circleci/mcp-server-circleci", []),
    ("context7", "@upstash/context7-mcp", []),
    ("tavily", "tavily-mcp", []),
    ("exa", "exa-mcp-server", []),
    ("supabase", "@supabase/mcp-server-supabase", ["--access-token", "sbp_dummy"]),
    ("kubernetes", "mcp-server-kubernetes", []),
    ("sentry", "@sentry/mcp-server", ["--access-token", "dummy"]),
    ("stripe", "@stripe/mcp", ["--tools=all", "--api-key=sk_test_dummy"]),
    ("heroku", "@heroku/mcp-server", []),
]

# (catalog name, PyPI distribution, module or `-c` code when it has no __main__, extra args)
PYPI = [
    ("time", "mcp-server-time", "mcp_server_time", []),
    ("fetch", "mcp-server-fetch", "mcp_server_fetch", []),
    ("git", "mcp-server-git", "mcp_server_git", []),
    ("sqlite", "mcp-server-sqlite", "import mcp_server_sqlite as m; m.main()", ["--db-path", "/tmp/search-eval.db"]),
]


def npm_command(node_modules: Path, package: str) -> tuple[list[str], str]:
    """The node command line starting `package`'s bin, and the installed version."""
    meta = json.loads((node_modules / package / "package.json").read_text())
    binv = meta.get("bin")
    if isinstance(binv, dict):
        binv = next(iter(binv.values()))
    if not binv:
        raise RuntimeError(f"{package} has no bin")
    return ["node", str(node_modules / package / binv)], meta["version"]


def schema_of(tool: object) -> dict:
    """The tool's input schema, whichever spelling this SDK version uses."""
    return getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}


async def list_tools(command: list[str], env: dict[str, str]) -> list[dict]:
    """Starts a server over stdio and returns its tools as plain JSON objects."""
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = []
                cursor = None
                while True:
                    page = await (session.list_tools(cursor=cursor) if cursor else session.list_tools())
                    tools.extend(page.tools)
                    cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
                    if not cursor:
                        break
    return [
        {"name": t.name, "description": t.description or "", "inputSchema": schema_of(t)}
        for t in tools
    ]


async def capture(name: str, command: list[str], source: dict, only: set[str]) -> None:
    """Captures one server into catalogs/<name>.json; reports failures and goes on."""
    if only and name not in only:
        return
    env = {**os.environ, **DUMMY_ENV}
    try:
        tools = await asyncio.wait_for(list_tools(command, env), TIMEOUT_S)
    except Exception as err:  # noqa: BLE001 - any failure of a foreign server is reported
        print(f"{name}: FAILED {type(err).__name__}: {err}", file=sys.stderr)
        return
    doc = {
        "server": name,
        "source": {**source, "captured_with": "tools/list over stdio, official MCP Python client"},
        "tools": tools,
    }
    (OUT / f"{name}.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{name}: {len(tools)} tools")


async def main() -> None:
    """Captures every server listed above (or those named on the command line)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--node-modules", type=Path, required=True)
    ap.add_argument("only", nargs="*")
    args = ap.parse_args()
    only = set(args.only)
    OUT.mkdir(exist_ok=True)
    for name, package, extra in NPM:
        try:
            cmd, version = npm_command(args.node_modules, package)
        except (OSError, RuntimeError) as err:
            print(f"{name}: not installed ({err})", file=sys.stderr)
            continue
        source = {"registry": "npm", "package": package, "version": version}
        await capture(name, cmd + extra, source, only)
    for name, dist, module, extra in PYPI:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            print(f"{name}: not installed", file=sys.stderr)
            continue
        source = {"registry": "PyPI", "package": dist, "version": version}
        run = ["-c", module] if " " in module else ["-m", module]
        await capture(name, [sys.executable, *run, *extra], source, only)


if __name__ == "__main__":
    asyncio.run(main())
