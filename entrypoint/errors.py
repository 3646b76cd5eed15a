"""The exceptions sandbox code sees when a host call fails (ARCHITECTURE.md, "MCP proxying over the
frame protocol"): `BridgeCallError` and one subclass per reply "kind". All are shown as `mcp.<Name>`
in tracebacks and exported from both `mcp` and `mcp.runtime`. Pure data: no I/O."""


class BridgeCallError(RuntimeError):
    """A host call failed. `str(e)` is the host's message; `kind` is the reply's error kind (None
    when it gave none); `server` and `tool` name what the call was about (None when unknown).
    A RuntimeError, like the Python bridge's `MCPError` (an alias of this class), so code written
    for that bridge catches it."""

    __module__ = "mcp"  # what sandbox code sees in tracebacks: mcp.BridgeCallError
    KIND = None

    def __init__(self, message="", kind=None, server=None, tool=None):
        super().__init__(message)
        self.kind = self.KIND if kind is None else kind
        self.server, self.tool = server, tool


class ToolError(BridgeCallError):
    """The server ran the tool and the tool reported an error; the message is the server's."""

    __module__ = "mcp"
    KIND = "tool"


class ServerNotLoadedError(BridgeCallError):
    """The server is configured but was not named in this run's `servers`."""

    __module__ = "mcp"
    KIND = "not_loaded"


class UnknownServerError(BridgeCallError):
    """No MCP server of that name is configured."""

    __module__ = "mcp"
    KIND = "unknown_server"


class UnknownToolError(BridgeCallError):
    """The server has no tool of that name."""

    __module__ = "mcp"
    KIND = "unknown_tool"


class ToolDisabledError(UnknownToolError):
    """The tool is refused by the operator's rules in the server's config entry ("allowedTools"
    or "disabledTools"); the message names the rule and the file."""

    __module__ = "mcp"
    KIND = "tool_disabled"


class ServerNotAllowedError(BridgeCallError, PermissionError):
    """The server is defined by a project's config file and the user has not approved it; the
    message says how to approve it. Nothing of it was started."""

    __module__ = "mcp"
    KIND = "not_allowed"


class ServerError(BridgeCallError):
    """The MCP server failed: it could not start, crashed or timed out."""

    __module__ = "mcp"
    KIND = "server"


class InvalidArgumentsError(BridgeCallError, TypeError):
    """The arguments do not fit the tool's input schema (checked before the call); the message
    shows the tool's signature and what was wrong. Also a TypeError, as for a Python function."""

    __module__ = "mcp"
    KIND = "invalid_arguments"


class PolicyDeniedError(BridgeCallError, PermissionError):
    """The call is outside this run's `allowed_tools` argument of run_python (which only narrows
    what the config allows); the message names the narrowing."""

    __module__ = "mcp"
    KIND = "policy_denied"


class NotApprovedError(BridgeCallError, PermissionError):
    """The call needs the user's approval (a destructive tool, or the operator's "requireApproval"
    rule) and it was declined, timed out, or nobody could be asked; the message says which, and
    how the operator can allow such calls. Nothing was called."""

    __module__ = "mcp"
    KIND = "not_approved"


class LimitExceededError(BridgeCallError):
    """A rate limit or a run budget (tool calls, result bytes) was reached; the message names the
    limit. The run goes on: catch it and carry on with what you have."""

    __module__ = "mcp"
    KIND = "limit_exceeded"


class AuthRequiredError(BridgeCallError, PermissionError):
    """The remote MCP server needs the user to sign in, and nobody could be asked in this run;
    the message names the command that signs in (`mcp-code-bridge login NAME`). The run's other
    servers work; call again once signed in."""

    __module__ = "mcp"
    KIND = "auth_required"


class ToolChangedError(BridgeCallError, PermissionError):
    """The MCP server changed this tool's definition (or listed it after its tools were pinned);
    calls to it are refused until the user reviews the change and runs the command the message
    names (`mcp-code-bridge servers --approve-changes NAME`). The server's other tools work."""

    __module__ = "mcp"
    KIND = "tool_changed"


MCPError = BridgeCallError  # the Python bridge's name for a failed MCP call


EXCEPTIONS = (BridgeCallError, ToolError, ServerNotLoadedError, UnknownServerError,
              UnknownToolError, ToolDisabledError, ServerNotAllowedError, ServerError,
              InvalidArgumentsError, PolicyDeniedError, NotApprovedError, LimitExceededError,
              AuthRequiredError, ToolChangedError)
# Kinds with no class of their own: raised as a plain BridgeCallError carrying the kind. With the
# KIND of each class in EXCEPTIONS, the kinds the host sends: the Rust test in
# src/bridge/error_kind.rs holds this list equal to ErrorKind::ALL.
PLAIN_KINDS = ("bad_request",)
_BY_KIND = {cls.KIND: cls for cls in EXCEPTIONS if cls.KIND}


def _text(value):
    return value if isinstance(value, str) else None


def from_reply(frame, where=(None, None)):
    """The exception for a failed reply frame {"ok": false, "error", "kind"?, "server"?, "tool"?}.

    `where` is the (server, tool) the call was about, known from its params; "server"/"tool" in the
    reply win over it. An unknown or missing kind gives a plain BridgeCallError (with that kind)."""
    message = frame.get("error")
    if not isinstance(message, str):
        message = "host call failed" + ("" if message is None else ": %r" % (message,))
    kind = _text(frame.get("kind"))
    server, tool = where if isinstance(where, tuple) and len(where) == 2 else (None, None)
    server = _text(frame.get("server")) or server
    tool = _text(frame.get("tool")) or tool
    return _BY_KIND.get(kind, BridgeCallError)(message, kind, server, tool)
