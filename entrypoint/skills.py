"""Skills in the sandbox (GUIDE.md, "Skills"): `keep` turns a function defined in a cell into a
small module (the cell's imports it uses, then its source) for `runtime.save_skill`, refusing a
function that reads a name that would not exist when the module runs again; `build` runs an
approved skill's module in a fresh namespace holding the run's server proxies and returns the
function. Owns no I/O: the host keeps the text and says whether it is approved."""
import ast
import builtins
import inspect
import keyword
import linecache
import symtable
import textwrap
import types

CELL_FILENAME = "<run_python>"  # runner.FILENAME: the file name cells are compiled under
MAX_NAME = 64  # bytes; the host checks the same rule (src/skills/record.rs)


def check_name(name):
    """`name` as a skill name: an ASCII identifier of at most MAX_NAME bytes, not a keyword, not
    starting with "_"; ValueError saying which rule it breaks."""
    if not isinstance(name, str) or not name:
        raise ValueError("a skill name is a non-empty string")
    if len(name) > MAX_NAME:
        raise ValueError("the skill name %r is longer than %d bytes" % (name[:80], MAX_NAME))
    if not (name.isascii() and name.isidentifier()) or name.startswith("_") \
            or keyword.iskeyword(name) or keyword.issoftkeyword(name):
        raise ValueError("the skill name %r is not a plain ASCII Python identifier (letters, "
                         "digits and _, no leading _, not a keyword)" % (name,))
    return name


def _cell_imports(cell_source):
    """{bound name: (line, import statement text)} of the cell's own imports (not those inside its
    functions or classes); a star import binds nothing that can be kept."""
    try:
        tree = ast.parse(cell_source)
    except SyntaxError:
        return {}
    found, todo = {}, list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                found[bound] = (node.lineno, ast.unparse(ast.Import(names=[alias])))
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    stmt = ast.ImportFrom(module=node.module, names=[alias], level=0)
                    found[alias.asname or alias.name] = (node.lineno, ast.unparse(stmt))
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _global_reads(source):
    """Names the module text `source` reads from its module namespace: in the function (and
    functions and classes inside it) the names that are neither parameters nor locals nor an
    outer function's, and at the top those read by decorators and defaults."""
    names, todo = set(), [symtable.symtable(source, "<skill>", "exec")]
    while todo:
        table = todo.pop()
        top = table.get_type() == "module"
        for sym in table.get_symbols():
            if sym.is_referenced() and (top or sym.is_global()):
                names.add(sym.get_name())
        todo.extend(table.get_children())
    return names


def keep(fn, name, cell_lines):
    """(module text, is_async, description) of `fn` saved as `name` (its own name when None).
    `cell_lines(code)` gives the source lines of the cell a code object was compiled from, or
    None. ValueError (saying what to do) when `fn` cannot be kept."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError("runtime.save_skill keeps a function (def or async def), not %s"
                        % type(fn).__name__)
    code = fn.__code__
    if code.co_filename != CELL_FILENAME or fn.__name__ == "<lambda>" \
            or "<locals>" in fn.__qualname__:
        raise ValueError("runtime.save_skill keeps a function defined with def at the top of a "
                         "run_python cell; %s is not one" % fn.__qualname__)
    name = check_name(fn.__name__ if name is None else name)
    lines = cell_lines(code)
    if not lines:
        raise ValueError("the source of %s is no longer known: define it again in this cell "
                         "and save it there" % fn.__name__)
    block = inspect.getblock([line + "\n" for line in lines[code.co_firstlineno - 1:]])
    source = textwrap.dedent("".join(block))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    first = tree.body[0] if tree and tree.body else None
    if not isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or first.name != fn.__name__:
        raise ValueError("the source of %s could not be found in its cell: define it with def "
                         "at the top of the cell" % fn.__name__)
    imports = _cell_imports("\n".join(lines))
    allowed = set(dir(builtins)) | {fn.__name__, name, "mcp_servers"}
    used, missing = [], []
    for read in sorted(_global_reads(source)):
        if read in imports:
            used.append(imports[read])
        elif read not in allowed and not read.startswith("mcp_"):
            missing.append(read)
    if missing:
        raise ValueError(
            "runtime.save_skill cannot keep %s: it reads %s, which %s neither a builtin, an "
            "import of this cell, an mcp_* server proxy nor a parameter or local of the "
            "function. Import it in the cell, pass it as a parameter, or define it inside the "
            "function" % (fn.__name__, ", ".join(missing), "is" if len(missing) == 1 else "are"))
    text = "\n".join(stmt for _, stmt in sorted(set(used)))
    text = (text + "\n\n\n" if text else "") + source.rstrip("\n") + "\n"
    if name != fn.__name__:
        text += "\n\n%s = %s\n" % (name, fn.__name__)
    doc = inspect.getdoc(fn) or ""
    return text, inspect.iscoroutinefunction(fn), doc.strip().partition("\n")[0]


def build(name, source, proxies):
    """The function `name` of the approved module text `source`, run in a fresh module whose
    namespace starts with `proxies` ({"mcp_<alias>": proxy, "mcp_servers": ...}: this run's
    servers). Tracebacks show its lines."""
    filename = "<skill %s>" % name
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType("skills." + name)
    module.__dict__.update(proxies)
    exec(compile(source, filename, "exec"), module.__dict__)
    fn = module.__dict__.get(name)
    if not callable(fn):
        raise ImportError("the skill %r defines no function %r" % (name, name))
    return fn
