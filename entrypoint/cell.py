"""One cell's source as the runner compiles it, with notebook behaviour (GUIDE.md, "Notebook
behaviour"): when the cell ends with an expression, its value is kept under `RESULT` so the
runner can show its repr, as IPython does (not when the line ends with `;`). Also the hints
added to errors a model often makes (`mcp_time` used without loading `time`). Pure: no I/O."""
import ast
import asyncio
import re

FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
RESULT = "_mcp_cell_result_"  # namespace key holding the final expression's value, popped at once
_NO_VALUE = object()


# A last line that is a plain `print(...)` call: its value is None, nothing to show, so the cell
# is compiled straight from source (the AST route costs ~16 µs more on a short cell).
_ENDS_WITH_PRINT = re.compile(r"(?:^|\n)print\([^;\n]*\)[ \t]*\n*\Z")


def compile_cell(source, filename):
    """The code object for `source`, and whether it ends with an expression to show."""
    if _ENDS_WITH_PRINT.search(source):
        return compile(source, filename, "exec", flags=FLAGS, dont_inherit=True), False
    tree = compile(source, filename, "exec", flags=FLAGS | ast.PyCF_ONLY_AST, dont_inherit=True)
    last = tree.body[-1] if tree.body else None
    shows = isinstance(last, ast.Expr) and not _silenced(source, last)
    if shows:
        target = ast.Name(RESULT, ast.Store())
        tree.body[-1] = ast.copy_location(ast.Assign([target], last.value), last)
        ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", flags=FLAGS, dont_inherit=True), shows


def _silenced(source, node):
    """True when a `;` follows the final expression (`df.plot();`), as in IPython."""
    lines = source.splitlines()
    if not node.end_lineno or node.end_lineno > len(lines):
        return False
    rest = lines[node.end_lineno - 1].encode("utf-8")[node.end_col_offset:].decode("utf-8", "ignore")
    return rest.lstrip().startswith(";")


def take_result(namespace):
    """Remove the final expression's value from `namespace`; `_NO_VALUE` when there is none."""
    return namespace.pop(RESULT, _NO_VALUE)


def show(value, stdout, stderr):
    """Write the repr of a final expression's value to `stdout` (nothing for None). A coroutine
    was never run: it is closed and the model told to await it."""
    if value is _NO_VALUE or value is None:
        return
    if asyncio.iscoroutine(value):
        value.close()
        stderr.write("note: the cell's last expression is a coroutine and did not run; "
                     "write `await %s(...)`\n" % getattr(value, "__qualname__", "it"))
        return
    stdout.write(repr(value) + "\n")


_MCP_NAME = re.compile(r"mcp_(\w+)$")


def explain(exc):
    """Add a hint to an error a model often makes; returns `exc` (changed in place)."""
    if type(exc) is NameError and isinstance(getattr(exc, "name", None), str):
        match = _MCP_NAME.match(exc.name)
        if match and len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = ("%s. MCP server proxies exist only for the servers a run loads: call "
                        "run_python with servers=[%r] (the server of that name or alias; "
                        "configured servers: runtime.list_servers())"
                        % (exc.args[0], match.group(1)),)
    return exc
