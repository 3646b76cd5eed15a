"""Proxies, aliases and error mapping in-process (no host; see test_mcp_api.py for the real path)."""
import asyncio
import copy
import inspect
import unittest
from unittest import mock

from entrypoint import errors, proxies, runtime


class AliasTest(unittest.TestCase):
    def test_alias_rule(self):
        cases = {"github": "github", "my-server.v2": "my_server_v2", "2fa": "_2fa",
                 "9-lives.x": "_9_lives_x", "a b/c": "a_b_c", "_x": "_x", "ü-tool": "__tool",
                 "Create_Issue": "Create_Issue"}
        for name, want in cases.items():
            self.assertEqual(proxies.alias(name), want, name)
            self.assertTrue(want.isidentifier())


class ProxyTest(unittest.TestCase):
    def make(self, server="my-server.v2", tools=("create-issue", "list.repos", "2fa", "plain")):
        proxy = proxies.ServerProxy(server)
        proxy._mcp_update(list(tools))
        return proxy

    def test_tool_functions_are_async_and_named_by_alias(self):
        proxy = self.make()
        self.assertEqual(dir(proxy), ["_2fa", "create_issue", "list_repos", "plain"])
        fn = proxy.create_issue
        self.assertTrue(inspect.iscoroutinefunction(fn))
        self.assertEqual(fn.__name__, "create_issue")
        self.assertEqual(fn.__qualname__, "mcp_my_server_v2.create_issue")
        self.assertIn("'create-issue'", fn.__doc__)
        self.assertIs(getattr(proxy, "create-issue"), fn)  # the real name works too
        self.assertIs(proxy._2fa, getattr(proxy, "2fa"))

    def test_unknown_tool_attribute_error_names_server_and_tools(self):
        proxy = self.make()
        with self.assertRaises(AttributeError) as ctx:
            _ = proxy.delete_repo
        self.assertEqual(str(ctx.exception),
                         "MCP server 'my-server.v2' has no tool 'delete_repo'; its tools: "
                         "_2fa, create_issue, list_repos, plain (tools the operator's rules or "
                         "this run's allowed_tools refuse are not listed: runtime.call_tool names "
                         "the rule)")
        self.assertFalse(hasattr(proxy, "__len__"))
        self.assertIsNone(getattr(proxy, "_repr_html_", None))
        with self.assertRaises(AttributeError) as ctx:
            _ = proxy.create_isue
        self.assertIn("has no tool 'create_isue' (did you mean 'create_issue'?)", str(ctx.exception))

    def test_repr(self):
        self.assertEqual(repr(self.make(tools=["a"])), "<MCP server 'my-server.v2' "
                         "(mcp_my_server_v2): 1 tool: a>")
        many = repr(self.make("gh", ["t%02d" % i for i in range(20)]))
        self.assertTrue(many.startswith("<MCP server 'gh' (mcp_gh): 20 tools: t00, t01"), many)
        self.assertIn("t11, ... (8 more)>", many)
        self.assertEqual(repr(self.make("x", [])), "<MCP server 'x' (mcp_x): 0 tools: (none)>")

    def test_alias_clash_first_wins_and_real_names_stay_reachable(self):
        proxy = self.make(tools=["a-b", "a.b"])
        self.assertEqual(dir(proxy), ["a_b"])
        self.assertIs(proxy.a_b, getattr(proxy, "a-b"))
        self.assertIsNot(getattr(proxy, "a.b"), proxy.a_b)

    def test_update_keeps_functions_and_drops_removed_tools(self):
        proxy = self.make(tools=["x", "y"])
        x = proxy.x
        proxy._mcp_update(["x", "z"])
        self.assertIs(proxy.x, x)
        self.assertEqual(dir(proxy), ["x", "z"])
        with self.assertRaises(AttributeError):
            _ = proxy.y

    def test_permissive_proxy_without_tool_list(self):
        proxy = self.make(tools=())
        proxy._mcp_update(None)
        self.assertIn("not announced", repr(proxy))
        self.assertEqual(proxy.anything.__name__, "anything")
        with self.assertRaises(AttributeError):
            _ = proxy._private

    def test_bad_positional_arguments(self):
        fn = self.make().plain
        with self.assertRaises(TypeError):
            fn({"a": 1}, {"b": 2})
        with self.assertRaisesRegex(TypeError, r"mcp_my_server_v2\.plain\(\) takes .* not int"):
            asyncio.run(fn(5))

    def test_copy_and_pickle_probes_do_not_recurse(self):
        blank = proxies.ServerProxy.__new__(proxies.ServerProxy)
        with self.assertRaises(AttributeError):
            _ = blank.anything


class RegistryTest(unittest.TestCase):
    def test_load_reuses_proxies_and_skips_malformed_entries(self):
        reg = proxies.Registry()
        first = reg.load({"b": ["t"], "a-x": ["u", 3, "", {"name": "v"}], 7: ["x"], "c": "bad"})
        self.assertEqual(list(first), ["a-x", "b"])
        self.assertEqual(dir(first["a-x"]), ["u", "v"])
        second = reg.load({"b": ["t", "t2"]}, ["b", "old-host"])
        self.assertIs(second["b"], first["b"])
        self.assertEqual(dir(second["b"]), ["t", "t2"])
        self.assertIn("not announced", repr(second["old-host"]))
        self.assertEqual(list(reg.load(None)), [])

    def test_servers_left_out_of_tools_keep_their_tool_lists(self):
        reg = proxies.Registry()
        first = reg.load({"a": ["t"], "b": ["u"]}, ["a", "b"])
        with mock.patch.object(proxies.ServerProxy, "_mcp_update") as update:
            same = reg.load({}, ["a", "b"])  # nothing changed: nothing is rebuilt
            self.assertEqual(update.call_count, 0)
        self.assertEqual(same, first)
        self.assertIsNot(same, first)  # each exec gets its own mcp_servers
        self.assertEqual(dir(same["a"]), ["t"])
        changed = reg.load({"b": ["v"]}, ["a", "b", "c"])
        self.assertEqual((dir(changed["a"]), dir(changed["b"])), (["t"], ["v"]))
        self.assertIn("not announced", repr(changed["c"]))  # never sent a tool list
        # A new sandbox (a new registry) that is not sent a server's tools stays permissive.
        self.assertIn("not announced", repr(proxies.Registry().load({}, ["a"])["a"]))

    def test_true_for_servers_means_the_last_frames_list(self):
        reg = proxies.Registry()
        self.assertEqual(list(reg.load({"b": ["u"], "a": ["t"]}, ["b", "a"])), ["a", "b"])
        self.assertEqual(list(reg.load({}, True)), ["a", "b"])
        self.assertEqual(list(reg.load({"c": ["v"]}, True)), ["a", "b", "c"])
        self.assertEqual(list(reg.load({}, ["a"])), ["a"])
        self.assertEqual(list(reg.load({}, True)), ["a"])
        # A new sandbox was never sent a list: `true` names none.
        self.assertEqual(list(proxies.Registry().load({}, True)), [])

    def test_the_same_servers_again_skip_the_per_server_work_until_something_changes(self):
        reg = proxies.Registry()
        names = ["s%02d" % i for i in range(50)]
        first = reg.load({n: ["t"] for n in names}, list(names))
        # The same "servers" and no tools: not one name is looked at in Python.
        with mock.patch.object(proxies, "sorted", create=True,
                               side_effect=AssertionError("per-server work")):
            same = reg.load({}, list(names))
        self.assertEqual(same, first)
        self.assertIsNot(same, first)
        # A changed tool list, another order, or a server more or less is seen.
        self.assertEqual(dir(reg.load({"s03": ["u"]}, list(names))["s03"]), ["u"])
        self.assertEqual(dir(reg.load({}, list(names))["s03"]), ["u"])
        self.assertEqual(list(reg.load({}, names[::-1])), names)
        self.assertEqual(list(reg.load({}, names[:2])), names[:2])
        self.assertEqual(list(reg.load({}, names[:2] + ["new"])), ["new"] + names[:2])
        self.assertIn("not announced", repr(reg.load({}, names[:2] + ["new"])["new"]))
        given = list(names[:1])
        reg.load({}, given)
        given.append("s01")  # the caller's list changing later does not fool the next exec
        self.assertEqual(list(reg.load({}, list(names[:2]))), names[:2])

    def test_by_alias_first_sorted_name_wins(self):
        loaded = proxies.Registry().load({"my.server": [], "my-server": [], "z": []})
        aliased = proxies.by_alias(loaded)
        self.assertEqual(sorted(aliased), ["my_server", "z"])
        self.assertIs(aliased["my_server"], loaded["my-server"])

    def test_server_dict_missing_key_lists_loaded(self):
        loaded = proxies.Registry().load({"alpha": [], "beta": []})
        with self.assertRaises(KeyError) as ctx:
            loaded["gamma"]
        self.assertIn("'gamma' is not loaded in this run (loaded: alpha, beta)",
                      str(ctx.exception))
        self.assertIsInstance(loaded, dict)


class ErrorsTest(unittest.TestCase):
    def test_kinds_map_to_classes(self):
        for kind, cls in (("tool", errors.ToolError), ("not_loaded", errors.ServerNotLoadedError),
                          ("unknown_server", errors.UnknownServerError),
                          ("unknown_tool", errors.UnknownToolError),
                          ("server", errors.ServerError), ("bad_request", errors.BridgeCallError),
                          ("future_kind", errors.BridgeCallError), (None, errors.BridgeCallError)):
            exc = errors.from_reply({"ok": False, "error": "msg", "kind": kind}, ("s", "t"))
            self.assertIs(type(exc), cls, kind)
            self.assertEqual((str(exc), exc.kind, exc.server, exc.tool), ("msg", kind, "s", "t"))

    def test_reply_fields_win_and_bad_messages_are_described(self):
        exc = errors.from_reply({"error": {"x": 1}, "kind": 5, "server": "gh", "tool": 3},
                                ("s", "t"))
        self.assertIs(type(exc), errors.BridgeCallError)
        self.assertEqual((str(exc), exc.kind, exc.server, exc.tool),
                         ("host call failed: {'x': 1}", None, "gh", "t"))
        self.assertEqual(str(errors.from_reply({})), "host call failed")

    def test_user_constructed_and_copied_errors(self):
        exc = errors.ToolError("boom")
        self.assertEqual((exc.kind, exc.server, exc.tool), ("tool", None, None))
        self.assertEqual(errors.ToolError.__module__, "mcp")
        back = copy.copy(errors.ToolError("m", server="gh", tool="x"))
        self.assertEqual((str(back), back.kind, back.server, back.tool), ("m", "tool", "gh", "x"))

    def test_tool_arguments(self):
        self.assertEqual(runtime.tool_arguments("f", None), {})
        src = {"a": 1}
        self.assertIsNot(runtime.tool_arguments("f", src), src)
        with self.assertRaisesRegex(TypeError, r"^f\(\) takes .* not list$"):
            runtime.tool_arguments("f", [1])


if __name__ == "__main__":
    unittest.main()
