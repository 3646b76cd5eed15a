"""Driver for the policy tests: a real `mcp-code-bridge run` behind the official Python client
(`mcp.client.client.Client`) in either protocol revision, with or without an elicitation callback
(no tests here).

`Approver` is an elicitation callback that records every question and answers as told.
`approval_session(tmp, servers, mode, approver, env)` is an async context manager yielding the
connected `Client`. `run(client, code, **args)` calls run_python and returns (text, is_error).
`drive_once(client, args, ...)` sends one tools/call round by hand (`allow_input_required=True`).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bridge_driver import BRIDGE_BIN, base_env
from mcp import StdioServerParameters, types
from mcp.client.client import Client

import servers as S

# A destructive call that says whether it ran or was refused (the db stub's drop_table).
DROP = """
try:
    r = await mcp_db.drop_table(name="users")
    print("RAN", r)
except Exception as e:
    print("REFUSED", type(e).__name__, e)
"""


CALL_WAIT = 120.0


class Answerer:
    """An elicitation callback answering `action` (with `content` for a form), recording each."""

    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None):
        self.action, self.content = action, content
        self.questions: list[Any] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)
        return types.ElicitResult(action="accept", content=self.content)


class Approver(Answerer):
    """An elicitation callback answering approval questions: `action`, and when it accepts,
    `approve` and `for_run`."""

    def __init__(self, action: str = "accept", approve: bool = True, for_run: bool = False):
        super().__init__(action, {"approve": approve, "for_run": for_run})


def workdir(tmp: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """A fresh state/config/cwd folder under `tmp` with `servers` written as config."""
    d = Path(tempfile.mkdtemp(prefix="policy-", dir=tmp))
    for sub in ("state", "mcps", "cwd"):
        (d / sub).mkdir()
    S.write_config(d / "mcps", servers)
    return d


@contextlib.asynccontextmanager
async def approval_session(
    d: Path, mode: str, approver: Approver | None, env: dict[str, str] | None = None,
    message_handler: Any = None,
) -> AsyncIterator[Client]:
    """The official client connected to a bridge over `d` (see `workdir`); `message_handler`
    sees the bridge's notifications."""
    full_env = base_env(d)
    full_env.update(env or {})
    params = StdioServerParameters(command=BRIDGE_BIN, args=["run"], env=full_env, cwd=str(d / "cwd"))
    client = Client(params, mode=mode, elicitation_callback=approver, read_timeout_seconds=CALL_WAIT,
                    message_handler=message_handler)
    async with client:
        yield client


def text_of(result: Any) -> tuple[str, bool]:
    """A result's text blocks joined, and its isError."""
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    return "\n".join(texts), bool(result.is_error)


async def run(client: Client, code: str, **args: Any) -> tuple[str, bool]:
    """run_python(code, servers=["db"], **args) through the client's automatic rounds."""
    arguments = {"code": code, "servers": ["db"], **args}
    return text_of(await client.call_tool("run_python", arguments))


async def drive_once(
    client: Client,
    arguments: dict[str, Any],
    input_responses: dict[str, Any] | None = None,
    request_state: str | None = None,
) -> Any:
    """One tools/call round, by hand: a CallToolResult or an InputRequiredResult."""
    return await client.session.call_tool(
        "run_python",
        arguments,
        input_responses=input_responses,
        request_state=request_state,
        allow_input_required=True,
    )


def ran(call_file: Path, tool: str = "drop_table") -> int:
    """How many calls of `tool` really ran (the stub's call file)."""
    if not call_file.exists():
        return 0
    return sum(1 for line in call_file.read_text().splitlines() if line.split(" ", 1)[0] == tool)
