"""The check of a cell's tool calls before it runs (precheck.py), in-process with real proxies
described by tool entries as the host sends them."""
import unittest

from entrypoint import cell, errors, precheck, proxies


def namespace():
    proxy = proxies.ServerProxy("gh")
    entry = {"name": "create-issue", "doc": "Create an issue.",
             "params": [["repo", "str", True], ["title", "str", True],
                        ["state", "Literal['open', 'closed'] | None", False],
                        ["count", "int", False, 1]],
             "returns": "CreateIssueResult"}
    proxy._mcp_update(["create-issue"], {"create-issue": entry})
    open_ = proxies.ServerProxy("any")
    open_._mcp_update(None)
    return {"mcp_gh": proxy, "mcp_any": open_}


def problems(code):
    try:
        precheck.check(code, namespace(), cell.FLAGS)
    except errors.InvalidArgumentsError as e:
        return str(e)
    return None


class PrecheckTest(unittest.TestCase):
    def test_right_calls_pass(self):
        for code in ["await mcp_gh.create_issue(repo='o/r', title='t')",
                     "await mcp_gh.create_issue(repo='o/r', title='t', state='open', count=2)",
                     "await mcp_gh.create_issue({'repo': 'o/r', 'title': 't'})",
                     "await mcp_gh.create_issue(repo=r, title=t, state=None)",
                     "await mcp_gh.create_issue(**args)",
                     "await mcp_any.whatever(x=1)",
                     "print(1)", "x = (", "mcp_gh = 3\nmcp_gh.create_issue(x=1)"]:
            self.assertIsNone(problems(code), code)

    def test_wrong_calls_are_named_with_the_signature(self):
        text = problems("await mcp_gh.create_issue(repo='o/r', titel='t', count='2')")
        self.assertIn("mcp_gh.create_issue(repo: str, title: str", text)
        self.assertIn("unknown argument 'titel' (did you mean 'title'?)", text)
        self.assertIn("argument 'count' must be int, got str '2'", text)
        self.assertIn("missing required argument 'title'", text)
        self.assertIn("Found before the cell ran", text)
        text = problems("await mcp_gh.create_issue(repo='o/r', title='t', state='merged')")
        self.assertIn("must be one of 'open', 'closed' or None, got str 'merged'", text)
        # An unknown tool is the proxy's AttributeError when reached; calls meant to meet an
        # error are left to run.
        self.assertIsNone(problems("await mcp_gh.create_isue(repo='o/r')"))
        self.assertIsNone(problems("try:\n    await mcp_gh.create_issue(x=1)\nexcept TypeError:\n    pass"))
        self.assertIsNone(problems("f = lambda: mcp_gh.create_issue(x=1)"))
        self.assertIsNotNone(problems("try:\n    pass\nexcept TypeError:\n    await mcp_gh.create_issue(x=1)"))

    def test_many_wrong_calls_are_cut(self):
        code = "\n".join("await mcp_gh.create_issue(n%d=1)" % i for i in range(30))
        text = problems(code)
        self.assertIn("(and 20 more)", text)
        self.assertLess(len(text), 4000)


if __name__ == "__main__":
    unittest.main()
