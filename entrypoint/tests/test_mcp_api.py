"""MCP proxies, `mcp.runtime` helpers and error kinds end to end: the real bootstrap, exec frames
with "tools", and the fake host of fake_host.py answering the calls."""
import json
import random
import unittest

from entrypoint.tests import Sandbox
from entrypoint.tests.fake_host import CANNED, FakeHost

TOOLS = {"my-server.v2": ["create-issue", "list.repos", "2fa"], "alpha": ["echo"]}
KINDS = (("tool", "ToolError"), ("not_loaded", "ServerNotLoadedError"),
         ("unknown_server", "UnknownServerError"), ("unknown_tool", "UnknownToolError"),
         ("tool_disabled", "ToolDisabledError"), ("not_allowed", "ServerNotAllowedError"),
         ("server", "ServerError"), ("policy_denied", "PolicyDeniedError"),
         ("not_approved", "NotApprovedError"), ("limit_exceeded", "LimitExceededError"),
         ("auth_required", "AuthRequiredError"), ("tool_changed", "ToolChangedError"),
         ("bad_request", "BridgeCallError"), (None, "BridgeCallError"))


class McpCase(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()
        self.sb.boot()

    def tearDown(self):
        self.assertEqual(self.sb.close(), 0, self.sb.stderr)

    def run_ok(self, code, tools=None, host=None):
        host = host or FakeHost()
        result = self.sb.run(code, on_call=host, tools=tools)
        self.assertTrue(result["ok"], result["error"])
        return result["stdout"], host

    def run_err(self, code, tools=None, host=None):
        result = self.sb.run(code, on_call=host or FakeHost(), tools=tools)
        self.assertFalse(result["ok"], result)
        self.assertNotIn("_mcp_bridge", result["error"])
        return result


class ProxyTest(McpCase):
    def test_proxies_built_from_tools(self):
        out, host = self.run_ok(
            "print(sorted(k for k in globals() if k.startswith('mcp_')))\n"
            "print(dir(mcp_my_server_v2), sorted(mcp_servers))\n"
            "print(mcp_servers['my-server.v2'] is mcp_my_server_v2, repr(mcp_alpha))\n"
            "print(await mcp_my_server_v2._2fa(code=1))\n"
            "print(await mcp_my_server_v2.create_issue({'title': 't'}))", TOOLS)
        self.assertEqual(out.splitlines(), [
            "['mcp_alpha', 'mcp_my_server_v2', 'mcp_servers']",
            "['_2fa', 'create_issue', 'list_repos'] ['alpha', 'my-server.v2']",
            "True <MCP server 'alpha' (mcp_alpha): 1 tool: echo>",
            "{'server': 'my-server.v2', 'tool': '2fa', 'arguments': {'code': 1}}",
            "{'server': 'my-server.v2', 'tool': 'create-issue', 'arguments': {'title': 't'}}"])
        self.assertEqual(host.received(), [
            ("call_tool", {"server": "my-server.v2", "tool": "2fa", "arguments": {"code": 1}}),
            ("call_tool", {"server": "my-server.v2", "tool": "create-issue",
                           "arguments": {"title": "t"}})])

    def test_star_import_of_server_modules(self):
        out, host = self.run_ok(
            "from mcp.servers.my_server_v2 import *\nfrom mcp.servers.alpha import echo\n"
            "import mcp.servers.my_server_v2 as m\nimport inspect\n"
            "print(m.__all__, inspect.iscoroutinefunction(create_issue), create_issue.__name__)\n"
            "print((await list_repos(org='x'))['tool'], (await _2fa())['tool'])\n"
            "print((await echo({'a': 1}))['arguments'])", TOOLS)
        self.assertEqual(out.splitlines(), ["['_2fa', 'create_issue', 'list_repos'] True "
                                            "create_issue", "list.repos 2fa", "{'a': 1}"])
        self.assertEqual(len(host.calls), 3)
        result = self.run_err("import mcp.servers.nope", {"alpha": []})
        self.assertIn("ModuleNotFoundError: No module named 'mcp.servers.nope': no loaded MCP "
                      "server has the alias 'nope' (loaded: alpha -> mcp.servers.alpha)",
                      result["error"])
        result = self.run_err("from mcp.servers.alpha import nope", {"alpha": ["echo"]})
        self.assertIn("ImportError: cannot import name 'nope'", result["error"])

    def test_mcp_servers_follows_each_exec(self):
        self.run_ok("first = mcp_servers\nb = mcp_b", {"a": ["x"], "b": ["y"]})
        out, _ = self.run_ok(
            "print(sorted(mcp_servers), sorted(first), mcp_b is b, dir(mcp_b), dir(mcp_c_d))\n"
            "import mcp.servers.b\nprint(mcp.servers.b.__all__, 'mcp_a' in globals())",
            {"b": ["y", "z"], "c.d": []})
        self.assertEqual(out.splitlines(), [
            "['b', 'c.d'] ['a', 'b'] True ['y', 'z'] []", "['y', 'z'] True"])
        out, _ = self.run_ok("print(mcp_servers, mcp_b)\ntry:\n    mcp_servers['b']\n"
                             "except KeyError as e:\n    print(e)")
        self.assertEqual(out.splitlines(), [
            "{} <MCP server 'b' (mcp_b): 2 tools: y, z>",
            "\"MCP server 'b' is not loaded in this run (loaded: none); name it in "
            "run_python's `servers`\""])

    def run_servers(self, code, servers, tools):
        """Run `code` with an exec frame naming `servers` and carrying `tools` as given."""
        result = self.sb.wait_result(self.sb.start_exec(code, servers=servers, tools=tools),
                                     FakeHost())
        self.assertTrue(result["ok"], result["error"])
        return result["stdout"]

    def test_an_exec_rebuilds_only_the_servers_whose_tools_changed(self):
        # The host sends a server's tool entries once per sandbox (and again when they change):
        # later exec frames name the server in "servers" only. With 50 servers an exec must
        # then cost what one with a single server does: nothing is rebuilt, and no server
        # module is made or checked until sandbox code reaches it.
        names = ["s%02d" % i for i in range(50)]
        self.run_ok("import sys\napi = sys.modules['_mcp_bridge.sandbox_api']\nbuilt = []\n"
                    "real = api.server_module\n"
                    "def counting(alias, proxy):\n    built.append(alias)\n"
                    "    return real(alias, proxy)\n"
                    "api.server_module = counting\n"
                    "def published():\n"
                    "    return sorted(n for n in sys.modules if n.startswith('mcp.servers.'))",
                    {n: ["t1", "t2"] for n in names})
        out = self.run_servers("print(len(built), dir(mcp_s07), sorted(mcp_servers) == %r)\n"
                               "print(await mcp_s07.t2(x=1))\nprint(published())" % names,
                               names, {})
        self.assertEqual(out.splitlines(), [
            "0 ['t1', 't2'] True", "{'server': 's07', 'tool': 't2', 'arguments': {'x': 1}}",
            "[]"])
        out = self.run_servers("import mcp.servers.s03 as m3\nfrom mcp.servers import s04 as m4\n"
                               "print(built, published(), m3.__all__)", names, {})
        self.assertEqual(out.splitlines(), [
            "['s03', 's04'] ['mcp.servers.s03', 'mcp.servers.s04'] ['t1', 't2']"])
        # A changed tool list rebuilds that server's module (the one sandbox code holds too),
        # and only that one.
        out = self.run_servers("print(built, dir(mcp_s03), dir(mcp_s04), m3.__all__, m4.__all__)"
                               "\nimport mcp.servers.s03 as again\nprint(again is m3)",
                               names, {"s03": ["t9"]})
        self.assertEqual(out.splitlines(), [
            "['s03', 's04', 's03'] ['t9'] ['t1', 't2'] ['t9'] ['t1', 't2']", "True"])
        # What sandbox code changes is put back by the next exec, as before.
        self.run_servers("import mcp.servers.s05 as m, mcp.servers.s08, mcp.servers, sys\n"
                         "del m.t1\n"
                         "mcp_s06 = None\nmcp.servers.s07 = 'mine'\ndel mcp.servers.s03\n"
                         "del sys.modules['mcp.servers.s08']", names, {})
        out = self.run_servers("import mcp.servers.s05 as m, mcp.servers.s08 as n, mcp.servers\n"
                               "print(m.__all__, hasattr(m, 't1'), mcp_s06, n.__all__)\n"
                               "print(mcp.servers.s07.__all__, mcp.servers.s03 is m3)",
                               names, {})
        self.assertEqual(out.splitlines(), [
            "['t1', 't2'] True <MCP server 's06' (mcp_s06): 2 tools: t1, t2> ['t1', 't2']",
            "['t1', 't2'] True"])
        # A server the exec does not name: its module leaves sys.modules (nothing to check)
        # and comes back when imported.
        out = self.run_servers("print(published())\nimport mcp.servers.s05 as m\n"
                               "print(m.__all__, published())", names[:1], {})
        self.assertEqual(out.splitlines(), ["[]", "['t1', 't2'] ['mcp.servers.s05']"])

    def test_keyword_and_dict_arguments(self):
        out, host = self.run_ok(
            "import json\ne = mcp_alpha.echo\n"
            "for r in [await e({'a': 1, 'b': 1}, b=2, arguments=3), await e(), await e(None, x=1),"
            " await e(**{'from': 'kw'})]:\n    print(json.dumps(r['arguments'], sort_keys=True))\n"
            "for bad in [lambda: e(1, 2), lambda: e([1]), lambda: e('s', k=1)]:\n"
            "    try:\n        await bad()\n"
            "    except TypeError as exc:\n        print('TypeError', exc)",
            {"alpha": ["echo"]})
        lines = out.splitlines()
        self.assertEqual(lines[:4], ['{"a": 1, "arguments": 3, "b": 2}', "{}", '{"x": 1}',
                                     '{"from": "kw"}'])
        self.assertTrue(lines[4].startswith("TypeError ") and "positional" in lines[4], lines)
        self.assertEqual(lines[5], "TypeError mcp_alpha.echo() takes the tool's arguments as "
                                   "keyword arguments or one dict, not list")
        self.assertTrue(lines[6].endswith("not str"), lines)
        self.assertEqual(len(host.calls), 4)  # bad calls never reach the host

    def test_unknown_tool_attribute_error(self):
        result = self.run_err("await mcp_my_server_v2.delete_repo()", TOOLS)
        self.assertIn("line 1, in <module>", result["error"])
        self.assertTrue(result["error"].endswith(
            "AttributeError: MCP server 'my-server.v2' has no tool 'delete_repo'; its tools: "
            "_2fa, create_issue, list_repos (tools the operator's rules or this run's allowed_tools "
            "refuse are not listed: runtime.call_tool names the rule)\n"), result["error"])

    def test_sync_tool_call_from_plain_and_async_code(self):
        out, host = self.run_ok(
            "from mcp import runtime\nprint(runtime.call_tool_sync('alpha', 'echo', {'k': 1}))\n"
            "async def inner():\n    return runtime.call_tool_sync('alpha', 'echo')\n"
            "print((await inner())['arguments'])", {"alpha": ["echo"]})
        self.assertEqual(out, "{'server': 'alpha', 'tool': 'echo', 'arguments': {'k': 1}}\n{}\n")
        self.assertEqual(len(host.calls), 2)

    def test_50_gathered_tool_calls_answered_out_of_order(self):
        exec_id = self.sb.start_exec(
            "import asyncio\n"
            "r = await asyncio.gather(*[mcp_alpha.echo(i=i) for i in range(50)])\n"
            "print(r == [10 * i for i in range(50)])", tools={"alpha": ["echo"]})
        calls = [self.sb.recv() for _ in range(50)]  # all 50 are in flight before any reply
        self.assertEqual({c["method"] for c in calls}, {"call_tool"})
        self.assertEqual(sorted(c["params"]["arguments"]["i"] for c in calls), list(range(50)))
        random.Random(3).shuffle(calls)
        for call in calls:
            self.sb.send({"t": "reply", "id": call["id"], "ok": True,
                          "value": 10 * call["params"]["arguments"]["i"]})
        result = self.sb.wait_result(exec_id)
        self.assertTrue(result["ok"], result["error"])
        self.assertEqual(result["stdout"], "True\n")
        self.assertIn(exec_id, self.sb.started)


class ErrorKindTest(McpCase):
    CATCH = ("from mcp import runtime\nimport mcp\n"
             "for f in [lambda: mcp_alpha.echo(), lambda: runtime.call_tool('alpha', 'echo'),\n"
             "          lambda: runtime.call_tool_sync('alpha', 'echo')]:\n"
             "    try:\n        c = f()\n        await c if hasattr(c, '__await__') else c\n"
             "    except runtime.BridgeCallError as e:\n"
             "        n = type(e).__name__\n"
             "        print(n, e.kind, e.server, e.tool, str(e), getattr(mcp, n) is type(e),\n"
             "              getattr(runtime, n) is type(e), isinstance(e, mcp.BridgeCallError))")

    def test_each_kind_raises_its_class(self):
        for kind, name in KINDS:
            failure = {"error": "failed: %s" % kind}
            if kind is not None:
                failure["kind"] = kind
            out, host = self.run_ok(self.CATCH, {"alpha": ["echo"]},
                                    FakeHost({"call_tool": failure}))
            want = "%s %s alpha echo failed: %s True True True" % (name, kind, kind)
            self.assertEqual(out.splitlines(), [want] * 3, kind)
            self.assertEqual(len(host.calls), 3)

    def test_uncaught_tool_error_and_attributes_from_params(self):
        host = FakeHost({"call_tool": {"error": "Issue not found", "kind": "tool"},
                         "list_tools": {"error": "gamma is not loaded", "kind": "not_loaded"},
                         "describe_server": {"error": "x", "kind": "unknown_server",
                                             "server": "from-reply"}})
        out, _ = self.run_ok(
            "from mcp import runtime\nimport pickle\n"
            "for f in [lambda: runtime.list_tools_sync('gamma'),\n"
            "          lambda: runtime.describe_server_sync('delta')]:\n    try:\n        f()\n"
            "    except runtime.BridgeCallError as e:\n"
            "        e2 = pickle.loads(pickle.dumps(e))\n"
            "        print(type(e2).__name__, e2.kind, e2.server, e2.tool)", host=host)
        self.assertEqual(out, "ServerNotLoadedError not_loaded gamma None\n"
                              "UnknownServerError unknown_server from-reply None\n")
        result = self.run_err("await mcp_alpha.echo(x=1)", {"alpha": ["echo"]}, host)
        self.assertTrue(result["error"].endswith("mcp.ToolError: Issue not found\n"),
                        result["error"])
        self.assertIn("await mcp_alpha.echo(x=1)", result["error"])


class RuntimeHelperTest(McpCase):
    CALLS = [("discovered_servers()", "discovered_servers", {}),
             ("list_servers()", "list_servers", {}),
             ("list_tools('alpha')", "list_tools", {"server": "alpha"}),
             ("query_tool_docs('alpha')", "query_tool_docs",
              {"server": "alpha", "tool": None, "detail": "summary"}),
             ("query_tool_docs('alpha', 'echo', detail='full')", "query_tool_docs",
              {"server": "alpha", "tool": "echo", "detail": "full"}),
             ("stubs('alpha')", "stubs", {"server": "alpha"}),
             ("search_tool_docs('issue')", "search_tool_docs",
              {"query": "issue", "limit": 5, "detail": "summary"}),
             ("search_tool_docs('x', 2, 'full')", "search_tool_docs",
              {"query": "x", "limit": 2, "detail": "full"}),
             ("describe_server('alpha')", "describe_server", {"name": "alpha"}),
             ("list_loaded_server_metadata()", "list_loaded_server_metadata", {}),
             ("capability_summary()", "capability_summary", {}),
             ("call_tool('alpha', 'echo')", "call_tool",
              {"server": "alpha", "tool": "echo", "arguments": {}}),
             ("call_tool('alpha', 'echo', {'q': 1})", "call_tool",
              {"server": "alpha", "tool": "echo", "arguments": {"q": 1}}),
             ("ping(5)", "ping", {"value": 5})]

    def test_every_helper_async_and_sync(self):
        lines = ["from mcp import runtime", "import json", "out = []"]
        for expr, _, _ in self.CALLS:
            name, _, rest = expr.partition("(")
            lines.append("out.append(await runtime.%s)" % expr)
            lines.append("out.append(runtime.%s_sync(%s)" % (name, rest))
        lines.append("print(json.dumps(out))")
        out, host = self.run_ok("\n".join(lines), {"alpha": ["echo"]})
        want_calls, want_values = [], []
        for _, method, params in self.CALLS:
            want_calls += [(method, params)] * 2
            value = (CANNED.get(method) if method not in ("call_tool", "ping")
                     else 5 if method == "ping" else dict(params))
            if method == "discovered_servers":  # the Python bridge's shape: names
                value = [s["name"] for s in value["servers"]]
            if method == "search_tool_docs":  # the hits; not_indexed goes to stderr
                value = value["results"]
            want_values += [value] * 2
        self.assertEqual(host.received(), want_calls)
        self.assertEqual(json.loads(out), want_values)

    def test_exports_and_signatures(self):
        out, _ = self.run_ok(
            "import inspect, mcp, mcp.runtime as rt\n"
            "for n in ['query_tool_docs', 'search_tool_docs', 'call_tool', 'list_tools']:\n"
            "    print(n, inspect.signature(getattr(rt, n)), inspect.iscoroutinefunction("
            "getattr(rt, n)), inspect.signature(getattr(rt, n + '_sync')))\n"
            "print(len(rt.__all__), all(hasattr(rt, n) for n in rt.__all__),"
            " sorted(n for n in mcp.__all__))")
        self.assertEqual(out.splitlines(), [
            "query_tool_docs (server, tool=None, detail='summary') False "
            "(server, tool=None, detail='summary')",
            "search_tool_docs (query, limit=5, detail='summary') False "
            "(query, limit=5, detail='summary')",
            "call_tool (server, tool, args=None) False (server, tool, args=None)",
            "list_tools (server) False (server)",
            "47 True ['AuthRequiredError', 'BridgeCallError', 'InvalidArgumentsError', 'LimitExceededError', "
            "'MCPError', "
            "'NotApprovedError', 'PolicyDeniedError', 'ServerError', "
            "'ServerNotAllowedError', 'ServerNotLoadedError', 'ToolChangedError', 'ToolDisabledError', "
            "'ToolError', 'UnknownServerError', 'UnknownToolError', 'runtime', 'servers']"])



class BothCallStylesTest(McpCase):
    """Every helper works as a plain call and awaited, in plain and in async code (GUIDE.md, "Sandbox API")."""

    def test_plain_and_awaited_give_the_same_value(self):
        out, host = self.run_ok(
            "from mcp import runtime\n"
            "a = runtime.list_servers()\nb = await runtime.list_servers()\n"
            "c = await runtime.list_servers_sync()\nd = runtime.discovered_servers()\n"
            "e = await runtime.discovered_servers()\nf = await a\n"
            "print(a, b == a, c == a, f is a, type(a).__name__, isinstance(a, tuple))\n"
            "print(d, e == d, runtime.capability_summary().startswith('helpers'))\n"
            "async def inner():\n"
            "    x = runtime.describe_server('alpha')\n"
            "    y = await runtime.describe_server('alpha')\n"
            "    return x == y, x.name, y['tools'][0].name\n"
            "print(await inner())\n"
            "print(runtime.ping(None), await runtime.ping(True), await runtime.call_tool('alpha', 'echo'))")
        self.assertEqual(out.splitlines(), [
            "('alpha', 'my-server.v2') True True True AwaitableTuple True",
            "('alpha',) True True",
            "(True, 'alpha', 'echo')",
            "None True {'server': 'alpha', 'tool': 'echo', 'arguments': {}}"])
        self.assertEqual(len(host.received()), 11)

    def test_awaited_at_the_call_site_runs_concurrently(self):
        # `await helper()` takes the async path: other tasks run while the host answers.
        exec_id = self.sb.start_exec(
            "import asyncio\nfrom mcp import runtime\n"
            "async def one(i):\n    return await runtime.search_tool_docs(str(i))\n"
            "r = await asyncio.gather(*[one(i) for i in range(5)])\nprint(len(r))")
        calls = [self.sb.recv() for _ in range(5)]  # all five in flight before any reply
        self.assertEqual({c["params"]["query"] for c in calls}, {"0", "1", "2", "3", "4"})
        for call in calls:
            self.sb.send({"t": "reply", "id": call["id"], "ok": True, "value": []})
        self.assertEqual(self.sb.wait_result(exec_id)["stdout"], "5\n")

    def test_search_names_servers_it_could_not_search_on_stderr(self):
        result = self.sb.run("from mcp import runtime\nprint(runtime.search_tool_docs('x')[0].tool)",
                             on_call=FakeHost())
        self.assertEqual(result["stdout"], "echo\n")
        self.assertIn("could not search beta (could not be started)", result["stderr"])

    def test_config_problems_and_detailed_discovery(self):
        out, _ = self.run_ok(
            "from mcp import runtime\n"
            "print(runtime.config_problems()[0].message, runtime.discovered_servers(True)[0].source)")
        self.assertEqual(out, "invalid JSON /cfg/a.json\n")


class ResultValuesTest(McpCase):
    def test_dict_results_allow_attribute_access_at_every_depth(self):
        out, _ = self.run_ok(
            "r = await mcp_alpha.echo(issue={'title': 'T', 'labels': [{'name': 'bug'}]})\n"
            "print(r.arguments.issue.title, r.arguments.issue.labels[0].name)\n"
            "r.arguments.issue.title = 'U'\nprint(r['arguments']['issue']['title'])\n"
            "import json, pickle\nprint(json.dumps(r.arguments), pickle.loads(pickle.dumps(r)) == r)\n"
            "try:\n    r.nope\nexcept AttributeError as e:\n    print('AttributeError', 'nope' in str(e))",
            {"alpha": ["echo"]})
        self.assertEqual(out.splitlines(), [
            "T bug", "U",
            '{"issue": {"title": "U", "labels": [{"name": "bug"}]}} True',
            "AttributeError True"])


class SignatureTest(McpCase):
    ENTRY = {"name": "create-issue", "doc": "Create an issue.\nMore.",
             "params": [["repo", "str", True], ["labels", "list[str]", False],
                        ["draft", "bool", False, False]], "returns": "dict"}

    def test_help_and_signature_show_the_real_parameters(self):
        probe = ("import inspect, pydoc\n"
                 "print(inspect.signature(mcp_gh.create_issue))\n"
                 "print(inspect.getdoc(mcp_gh.create_issue).splitlines()[0])\n"
                 "print('async create_issue(*, repo: str' in "
                 "pydoc.render_doc(mcp_gh.create_issue, renderer=pydoc.plaintext))")
        want = ["(*, repo: str, labels: list[str] = None, draft: bool = False) -> dict",
                "Create an issue.", "True"]
        out, _ = self.run_ok(probe, {"gh": [self.ENTRY]})
        self.assertEqual(out.splitlines(), want)
        # `true` = unchanged since the last exec: the proxy keeps its tools and signatures.
        out, _ = self.run_ok(probe + "\nprint(await mcp_gh.create_issue(repo='r'))",
                             {"gh": True})
        self.assertEqual(out.splitlines()[:3], want)
        self.assertIn("'tool': 'create-issue'", out.splitlines()[3])

    def test_unusable_parameter_names_fall_back_to_the_generic_help(self):
        entry = {"name": "t", "doc": "", "params": [["page-size", "int", True]]}
        out, _ = self.run_ok("import inspect\nprint(inspect.signature(mcp_gh.t))\n"
                             "print('query_tool_docs' in mcp_gh.t.__doc__)", {"gh": [entry]})
        self.assertEqual(out.splitlines(), ["(arguments=None, /, **kwargs)", "True"])


class NotebookTest(McpCase):
    def test_final_expression_is_shown_unless_silenced(self):
        out, _ = self.run_ok("x = 40\nx + 2")
        self.assertEqual(out, "42\n")
        out, _ = self.run_ok("x + 2;")
        self.assertEqual(out, "")
        out, _ = self.run_ok("print('a')\nNone")
        self.assertEqual(out, "a\n")
        out, _ = self.run_ok("import asyncio\nawait asyncio.sleep(0, result={'k': [1]})")
        self.assertEqual(out, "{'k': [1]}\n")
        out, _ = self.run_ok("for i in range(2):\n    i")  # a loop body is not the cell's end
        self.assertEqual(out, "")

    def test_an_unawaited_coroutine_is_not_shown_but_explained(self):
        result = self.sb.run("mcp_alpha.echo(x=1)", on_call=FakeHost(), tools={"alpha": ["echo"]})
        self.assertTrue(result["ok"], result)
        self.assertEqual(result["stdout"], "")
        self.assertIn("write `await", result["stderr"])
        self.assertNotIn("never awaited", result["stderr"])

    def test_unloaded_server_name_error_says_to_load_it(self):
        result = self.run_err("await mcp_time.get_current_time()")
        self.assertIn("NameError: name 'mcp_time' is not defined", result["error"])
        self.assertIn("servers=['time']", result["error"])


if __name__ == "__main__":
    unittest.main()
