"""A fake bridge host for the entrypoint tests: answers every host method of ARCHITECTURE.md ("MCP
proxying over the frame protocol") with canned values, records the call frames it received, and
can be told to fail a method with a given reply (error message, "kind", ...). Use an instance as
the `on_call` of Sandbox.wait_result / Sandbox.run."""

CANNED = {
    "list_servers": ["alpha", "my-server.v2"],
    "discovered_servers": {
        "servers": [{"name": "alpha", "transport": "stdio", "source": "/cfg/a.json",
                     "disabled": False, "state": "loaded"}],
        "errors": [{"source": "/cfg/bad.json", "message": "invalid JSON"}]},
    "list_tools": [{"name": "echo", "description": "Echo the arguments."}],
    "query_tool_docs": [{"server": "alpha", "name": "echo", "description": "Echo."}],
    "stubs": "from typing import Any\n\n\nasync def echo(*, text: str) -> str:\n    ...\n",
    "search_tool_docs": {"results": [{"server": "alpha", "tool": "echo", "toolAlias": "echo",
                                      "name": "echo", "description": "Echo.", "score": 0.9}],
                         "not_indexed": [{"server": "beta", "reason": "could not be started"}]},
    "describe_server": {"name": "alpha", "transport": "stdio", "source": "/cfg/a.json",
                        "state": "loaded", "disabled": False, "server_info": {"name": "a"},
                        "instructions": None, "tools": [{"name": "echo", "description": "E."}]},
    "list_loaded_server_metadata": [{"name": "alpha", "alias": "alpha",
                                     "server_info": {"name": "a"}, "tool_count": 1}],
    "capability_summary": "helpers: mcp.runtime.*; servers: alpha (1 tool)",
}


def tool_result(params):
    """What the fake `call_tool` returns: the call echoed back."""
    return {"server": params.get("server"), "tool": params.get("tool"),
            "arguments": params.get("arguments")}


class FakeHost:
    """`failures` maps a method name to the extra fields of its error reply, e.g.
    {"call_tool": {"error": "boom", "kind": "tool"}}."""

    def __init__(self, failures=None):
        self.calls = []  # every call frame received, in arrival order
        self.failures = dict(failures or {})

    def reply_for(self, call):
        method, params = call["method"], call["params"]
        reply = {"t": "reply", "id": call["id"]}
        if method in self.failures:
            reply.update({"ok": False, "value": None}, **self.failures[method])
        elif method == "ping":
            reply.update(ok=True, value=params)
        elif method == "call_tool":
            reply.update(ok=True, value=tool_result(params))
        elif method in CANNED:
            reply.update(ok=True, value=CANNED[method])
        else:
            reply.update(ok=False, value=None, error="unknown host method %r" % method,
                         kind="bad_request")
        return reply

    def __call__(self, sandbox, call):
        self.calls.append(call)
        sandbox.send(self.reply_for(call))

    def received(self):
        """[(method, params)] of the calls received so far."""
        return [(c["method"], c["params"]) for c in self.calls]
