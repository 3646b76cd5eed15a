"""A cell's tool calls checked against the loaded tools' signatures before the cell runs: a call
`mcp_x.tool(...)` written with keyword arguments whose names, required arguments or literal values
do not fit the tool's typed signature (the stubs' types, `proxies.describe`) raises
`mcp.InvalidArgumentsError` naming every such call, and nothing in the cell runs. Calls it cannot
judge (`**kwargs`, a proxy of a server with no tool list or a name the cell rebinds, an
annotation it does not read) and calls written to meet an error (inside a `try` that handles
errors, or a `lambda`) are left to the host's own check when they are made. Pure: reads the
namespace, no I/O."""
import ast
import difflib
import inspect

from .errors import InvalidArgumentsError

MAX_REPORTED = 10  # calls named in one error at most
_SCALARS = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
_SAID = {str: "str", int: "int", float: "float", bool: "bool", type(None): "None"}


def check(source, namespace, flags):
    """Raise InvalidArgumentsError when a tool call in `source` cannot fit its tool; cheap when
    the cell names no proxy."""
    if "mcp_" not in source:
        return
    try:
        tree = compile(source, "<cell>", "exec", flags=flags | ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError:
        return  # the runner's own compile reports it
    rebound = _bound_names(tree)
    found = []
    for node in _judged(tree):
        if isinstance(node, ast.Call) and not _names_rebound(node, rebound):
            problem = _call_problem(node, namespace)
            if problem and problem not in found:
                found.append(problem)
    if found:
        shown = found[:MAX_REPORTED]
        more = len(found) - len(shown)
        text = "\n".join(shown) + ("\n(and %d more)" % more if more else "")
        raise InvalidArgumentsError(
            text + "\nFound before the cell ran: nothing in it was run. Fix the calls and run it "
            "again (help(mcp_<server>.<tool>) or runtime.stubs(server) show the signatures).")


def _judged(tree):
    """Every node of `tree` except what is inside a `try` block that handles errors, or a
    `lambda`: code there may be written to meet the error, so its calls are left to the host's
    check when they are made."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Lambda):
                continue
            if isinstance(child, (ast.Try, getattr(ast, "TryStar", ast.Try))) and child.handlers:
                todo.extend(child.handlers)
                todo.extend(child.orelse)
                todo.extend(child.finalbody)
                continue
            todo.append(child)


def _bound_names(tree):
    """Names the cell binds anywhere (assigned, imported, parameters, definitions): a proxy's
    name among them may mean something else by the time a call runs, so it is not judged."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return bound


def _names_rebound(node, rebound):
    func = node.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
        and func.value.id in rebound


def _call_problem(node, namespace):
    func = node.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id.startswith("mcp_")):
        return None
    proxy = namespace.get(func.value.id)
    state = getattr(proxy, "__dict__", None)
    if not isinstance(state, dict) or "_mcp_functions" not in state or state["_mcp_tools"] is None:
        return None
    call = "%s.%s" % (func.value.id, func.attr)
    fn = state["_mcp_functions"].get(func.attr) or state["_mcp_real"].get(func.attr)
    if fn is None:
        return None  # the proxy's AttributeError names the tools when the call is reached
    sig = fn.__dict__.get("__signature__")
    given = _given(node)
    if sig is None or given is None:
        return None
    params = sig.parameters
    problems = []
    for name, value in given.items():
        param = params.get(name)
        if param is None:
            near = difflib.get_close_matches(name, list(params), n=1, cutoff=0.6)
            hint = " (did you mean %r?)" % near[0] if near else ""
            problems.append("unknown argument %r%s" % (name, hint))
        elif isinstance(value, ast.Constant):
            wrong = _mismatch(param.annotation, value.value)
            if wrong:
                problems.append("argument %r must be %s, got %s %r"
                                % (name, wrong, _SAID.get(type(value.value), "a value"), value.value))
    for name, param in params.items():
        if param.default is inspect.Parameter.empty and name not in given:
            problems.append("missing required argument %r" % name)
    if not problems:
        return None
    shown = str(sig).replace("(*, ", "(", 1)
    return "%s%s: %s" % (call, shown, "; ".join(problems))


def _given(node):
    """{name: value node} of the call's arguments; None when it cannot be told (`**kwargs`, a
    positional argument that is not a dict literal with string keys)."""
    given = {}
    if node.args:
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Dict):
            return None
        for key, value in zip(node.args[0].keys, node.args[0].values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                return None
            given[key.value] = value
    for kw in node.keywords:
        if kw.arg is None:
            return None
        given[kw.arg] = kw.value
    return given


def _mismatch(annotation, value):
    """What `value` should have been when it does not fit `annotation`; None when it fits or
    the annotation is not one this check reads."""
    text = annotation.__name__ if isinstance(annotation, type) else repr(annotation)
    tail = text.endswith(" | None")
    head = text[:-len(" | None")] if tail else text
    parts = [p.strip() for p in head.split(" | ")] if "[" not in head else [head.strip()]
    if tail:
        parts.append("None")
    allowed = []
    for part in parts:
        if part == "None":
            if value is None:
                return None
            allowed.append("None")
        elif part in _SCALARS:
            kinds = _SCALARS[part]
            if isinstance(value, kinds) and not (part != "bool" and isinstance(value, bool)):
                return None
            allowed.append(part)
        elif part.startswith("Literal[") and part.endswith("]"):
            options = _literal(part)
            if options is None:
                return None
            if any(value == o and type(value) is type(o) for o in options):
                return None
            allowed.append("one of " + ", ".join(repr(o) for o in options))
        else:
            return None  # a type this check does not read
    return " or ".join(allowed) if allowed else None


def _literal(text):
    """The values of a `Literal[...]` annotation's text; None when they cannot be read."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Subscript):
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = []
    for item in items:
        if not isinstance(item, ast.Constant):
            return None
        values.append(item.value)
    return values
