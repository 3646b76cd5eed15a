"""Skills in the sandbox: runtime.save_skill keeps a cell's function with the imports it uses
(and refuses one reading a name that cannot be kept), runtime.list_skills, and `skills.<name>` /
`from skills import <name>` building an approved skill over the run's proxies; the fake host
keeps the texts."""
import unittest

from entrypoint.tests import Sandbox
from entrypoint.tests.fake_host import FakeHost

TOOLS = {"alpha": ["echo"]}


class SkillHost(FakeHost):
    """A fake host that keeps saved skills; those in `approved` load."""

    def __init__(self, failures=None):
        super().__init__(failures)
        self.kept = {}
        self.approved = set()

    def reply_for(self, call):
        method, params = call["method"], call["params"]
        reply = {"t": "reply", "id": call["id"], "ok": True}
        if method in self.failures:
            return super().reply_for(call)
        if method == "save_skill":
            self.kept[params["name"]] = params
            reply["value"] = {"name": params["name"], "digest": "d" * 64, "state": "pending"}
        elif method == "list_skills":
            reply["value"] = [{"name": n, "digest": "d" * 64, "description": p["description"],
                               "state": "approved" if n in self.approved else "pending"}
                              for n, p in sorted(self.kept.items())]
        elif method == "load_skill" and params["name"] in self.approved:
            reply["value"] = {"name": params["name"], "source": self.kept[params["name"]]["source"]}
        elif method == "load_skill":
            reply.update(ok=False, value=None, kind="not_approved",
                         error="the skill '%s' has not been approved in this text; run "
                               "`mcp-code-bridge skills --approve %s`" % ((params["name"],) * 2))
        else:
            return super().reply_for(call)
        return reply


class SkillTest(unittest.TestCase):
    def setUp(self):
        self.sb = Sandbox()
        self.sb.boot()
        self.host = SkillHost()

    def tearDown(self):
        self.assertEqual(self.sb.close(), 0, self.sb.stderr)

    def run_cell(self, code, ok=True):
        result = self.sb.run(code, on_call=self.host, tools=TOOLS)
        self.assertEqual(result["ok"], ok, result)
        return result

    def test_saved_with_its_imports_then_built_over_the_runs_proxies(self):
        self.run_cell(
            "import json, os\n"
            "from math import sqrt as root\n"
            "from mcp import runtime\n"
            "async def echo_twice(text, n=2):\n"
            "    '''Echo text through alpha.\n\n    More.'''\n"
            "    got = await mcp_alpha.echo(text=text)\n"
            "    return json.dumps([got['arguments']['text']] * n), root(n * n)\n"
            "print(runtime.save_skill(echo_twice)['state'])\n")
        kept = self.host.kept["echo_twice"]
        self.assertEqual(kept["source"].split("\n\n\n")[0], "import json\nfrom math import sqrt as root")
        self.assertIn("async def echo_twice(text, n=2):", kept["source"])
        self.assertNotIn("import os", kept["source"])
        self.assertTrue(kept["is_async"])
        self.assertEqual(kept["description"], "Echo text through alpha.")
        # Unapproved: a clear error naming the command.
        result = self.run_cell("import skills\nawait skills.echo_twice('hi')", ok=False)
        self.assertIn("NotApprovedError", result["error"])
        self.assertIn("mcp-code-bridge skills --approve echo_twice", result["error"])
        self.host.approved.add("echo_twice")
        # A later cell, the namespace emptied: built from the kept text alone.
        out = self.run_cell(
            "del echo_twice, json, root\nfrom mcp import runtime\n"
            "from skills import echo_twice\n"
            "print(await echo_twice('hi', 3))\n"
            "import skills\nprint(dir(skills), [s['state'] for s in runtime.list_skills()])\n")
        self.assertEqual(out["stdout"].splitlines(), [
            "('[\"hi\", \"hi\", \"hi\"]', 3.0)", "['echo_twice'] ['approved']"])

    def test_a_plain_function_stays_plain_and_a_missing_server_says_how_to_load_it(self):
        self.run_cell("from mcp import runtime\n"
                      "def add(a, b):\n    return a + b\n"
                      "def ask():\n    return mcp_beta\n"
                      "runtime.save_skill(add, name='plus')\nruntime.save_skill(ask)\n")
        self.assertFalse(self.host.kept["plus"]["is_async"])
        self.assertTrue(self.host.kept["plus"]["source"].endswith("\n\nplus = add\n"))
        self.host.approved.update({"plus", "ask"})
        out = self.run_cell("import skills\nprint(skills.plus(2, 3))\n")
        self.assertEqual(out["stdout"], "5\n")
        result = self.run_cell("import skills\nskills.ask()\n", ok=False)
        self.assertIn("servers=['beta']", result["error"])

    def test_a_name_that_cannot_be_kept_is_refused_at_save_time_naming_it(self):
        result = self.run_cell(
            "from mcp import runtime\n"
            "rate = 3\n"
            "def helper(x):\n    return x\n"
            "def scaled(x):\n    return helper(x) * rate\n"
            "runtime.save_skill(scaled)\n", ok=False)
        self.assertIn("reads helper, rate, which are neither a builtin", result["error"])
        self.assertNotIn("scaled", self.host.kept)
        for bad, why in (("lambda x: x", "keeps a function defined with def"),
                         ("print", "keeps a function (def or async def)")):
            result = self.run_cell("from mcp import runtime\nruntime.save_skill(%s)\n" % bad,
                                   ok=False)
            self.assertIn(why, result["error"])
        result = self.run_cell("from mcp import runtime\ndef f():\n    pass\n"
                               "runtime.save_skill(f, name='_hidden')\n", ok=False)
        self.assertIn("not a plain ASCII Python identifier", result["error"])
        self.assertEqual(self.host.kept, {})
        result = self.run_cell("import skills\nskills.__wrapped__\n", ok=False)
        self.assertIn("AttributeError", result["error"])


if __name__ == "__main__":
    unittest.main()
