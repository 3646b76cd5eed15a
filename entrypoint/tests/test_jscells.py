"""TypeScript cells' pieces that need no container: the harness's name splitting
(`mcp__server__tool`, longest configured server name wins) and cell rewriting (declarations made
globals), run by the host's node; and jscells' answer when there is no node at all. Node is
required under CI=true (.ci/run installs it); elsewhere a missing node skips the harness tests."""
import json
import os
import shutil
import subprocess
import unittest
from pathlib import Path

from entrypoint import jscells

HARNESS = Path(__file__).resolve().parents[1] / "js" / "harness.js"
NODE = shutil.which("node")


def harness(expr):
    """Evaluate `expr` (JavaScript, `h` is the harness's exports) with the host's node; its JSON."""
    script = "const h = require(%s); process.stdout.write(JSON.stringify(%s))" % (
        json.dumps(str(HARNESS)), expr)
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@unittest.skipIf(NODE is None and os.environ.get("CI", "").lower() not in ("1", "true"),
                 "node is not installed (CI installs it)")
class HarnessTest(unittest.TestCase):
    def test_the_longest_configured_server_name_wins(self):
        self.assertEqual(harness("h.splitToolName('mcp__a__b__c', ['a', 'a__b'])"),
                         {"server": "a__b", "tool": "c"})
        self.assertEqual(harness("h.splitToolName('mcp__a__b__c', ['a'])"),
                         {"server": "a", "tool": "b__c"})
        self.assertEqual(harness("h.splitToolName('mcp__github__create_issue', ['git', 'github'])"),
                         {"server": "github", "tool": "create_issue"})

    def test_names_that_do_not_fit_are_null(self):
        for expr in ("h.splitToolName('mcp__x__y', ['a'])", "h.splitToolName('a__b__c', ['a'])",
                     "h.splitToolName('mcp__a__', ['a'])", "h.splitToolName(7, ['a'])",
                     "h.splitToolName('mcp__a', ['a'])"):
            self.assertIsNone(harness(expr), expr)

    def test_aliases_match_the_python_side(self):
        self.assertEqual(harness("[h.alias('my-server.v2'), h.alias('2fa'), h.alias('ok_1')]"),
                         ["my_server_v2", "_2fa", "ok_1"])

    def test_top_level_declarations_become_globals(self):
        cell = harness("h.rewriteCell('const x = 1, y = 2\\nlet {a, b: c, ...d} = o; "
                       "function f() { const inner = 1 }\\nclass K {}\\n(k)')")
        self.assertEqual(sorted(cell["names"]), ["K", "a", "c", "d", "f", "x", "y"])
        self.assertTrue(cell["prelude"].startswith("var "))
        self.assertIn("void ( x = 1, y = 2)", cell["body"])
        self.assertIn("void ( {a, b: c, ...d} = o)", cell["body"])
        self.assertIn("globalThis.f = f;", cell["body"])
        self.assertIn("K = class K {};", cell["body"])
        self.assertIn("const inner = 1", cell["body"])  # not at the top level: kept
        self.assertEqual(cell["body"].count("\n"), 3)  # the source's lines kept

    def test_nested_and_quoted_declarations_are_left_alone(self):
        src = ("for (const i of [1]) {}\\nconst s = 'const no = 1'\\n"
               "const t = `${ {const: 1}.const }`\\nif (1) { let inside = 2 }\\nconst r = /const z/g")
        cell = harness("h.rewriteCell(%s)" % json.dumps(src).replace("\\\\", "\\"))
        self.assertEqual(sorted(cell["names"]), ["r", "s", "t"])


def run_cell(js, code):
    """Run `code` in `js`'s child (starting it); its stdout, and the `done` message."""
    import asyncio
    import contextlib
    import io
    out = io.StringIO()
    if js.prepare() is not None:
        raise AssertionError("node did not start")
    with contextlib.redirect_stdout(out):
        done = asyncio.run(js.start_cell(1, code, {}))
    return out.getvalue(), done


@unittest.skipIf(NODE is None and os.environ.get("CI", "").lower() not in ("1", "true"),
                 "node is not installed (CI installs it)")
class StateTest(unittest.TestCase):
    """A child's names saved (save_state) and put into a fresh child (restore_state), as an idle
    stop's snapshot carries them."""

    def setUp(self):
        self.js = jscells.JsCells(source=jscells.harness_source(), node=NODE)
        self.addCleanup(self.js._drop)

    def test_values_functions_and_classes_come_back_and_what_cannot_is_said(self):
        _, done = run_cell(self.js, (
            "const data = {a: [1, 2], m: new Map([[1, 'one']]), when: new Date(0), big: 10n}\n"
            "let count = 41\n"
            "function twice(n) { return n * data.a[1] }\n"
            "class Greeter { hi() { return 'hi ' + count } }\n"
            "const withFn = {f: () => 1}\n"
            "const arrow = (x) => x + 1\n"
            "const cyc = {n: [1]}; cyc.self = cyc; cyc.again = cyc.n\n"
            "class Point { constructor(x) { this.x = x } twice() { return this.x * 2 } }\n"
            "const p = new Point(3)\n"
            "const pts = [new Point(1), {inner: new Point(2), same: p}]\n"))
        self.assertTrue(done["ok"], done)
        blob, count = self.js.save_state(1 << 20)
        self.assertEqual(count, 10)
        fresh = jscells.JsCells(source=jscells.harness_source(), node=NODE)
        self.addCleanup(fresh._drop)
        names, failed = fresh.restore_state(blob)
        self.assertEqual(sorted(names), sorted(n + jscells.JS for n in
                                               ("data", "count", "twice", "Greeter", "arrow", "cyc",
                                                "Point", "p", "pts")))
        self.assertEqual([f[0] for f in failed], ["withFn" + jscells.JS])
        self.assertIn("cannot be saved", failed[0][1])
        out, done = run_cell(fresh, "count++\nconsole.log(twice(3), data.m.get(1), data.when.getTime(), "
                                    "data.big + 1n, new Greeter().hi(), arrow(1), data.a instanceof Array, "
                                    "data.m instanceof Map, data instanceof Object, data.when instanceof Date, "
                                    "cyc.self === cyc && cyc.again === cyc.n)")
        self.assertTrue(done["ok"], done)
        self.assertEqual(out.strip(), "6 one 0 11n hi 42 2 true true true true true")
        # instances of a cell's class come back as instances of the class restored beside them
        out, done = run_cell(fresh, "console.log(p instanceof Point, p.twice(), pts[0].twice(), "
                                    "pts[1].inner.twice(), pts[1].same instanceof Point, "
                                    "pts[1] instanceof Point)")
        self.assertTrue(done["ok"], done)
        self.assertEqual(out.strip(), "true 6 2 4 true false")

    def test_a_value_over_the_limit_is_left_out_and_no_child_means_no_state(self):
        self.assertEqual(self.js.save_state(1 << 20), (None, 0))
        run_cell(self.js, "const small = 1\nconst large = 'x'.repeat(100000)")
        blob, _ = self.js.save_state(1000)
        fresh = jscells.JsCells(source=jscells.harness_source(), node=NODE)
        self.addCleanup(fresh._drop)
        names, failed = fresh.restore_state(blob)
        self.assertEqual(names, ["small" + jscells.JS])
        self.assertEqual(failed, [("large" + jscells.JS, "too big for the snapshot")])
        self.assertEqual(fresh.restore_state(b"{not json")[1][0][0], "*" + jscells.JS)


class NoNodeTest(unittest.TestCase):
    def test_an_image_without_node_says_how_to_get_it(self):
        old = os.environ.get("PATH")
        os.environ["PATH"] = "/nonexistent"
        try:
            why = jscells.JsCells(source="// harness").prepare()
        finally:
            os.environ["PATH"] = old
        self.assertIn("no JavaScript runtime (node)", why)
        self.assertIn("mcp-code-bridge image build", why)


if __name__ == "__main__":
    unittest.main()
