"""The whole package's import graph (#26): no circle, no arrow up, no private name
imported across modules, no private module imported from another room, no module over
`MAX_CODE_LINES` lines of code.

Every import counts: at module level, inside a function, under ``if TYPE_CHECKING:``
(a typing-only import is still knowledge of another module). The layers, bottom to top
(docs/DESIGN.md): the root helpers, ``timing``, ``sim``, ``render``, then ``app`` and
``rl`` side by side (neither imports the other), ``tasks``, ``train``, ``cli``. The one
exemption is ``kelab/__init__.py``: its public names are a lazy map onto every layer.
The rooms inside a layer have their own tests (tests/sim/test_sim_layers.py,
tests/app/test_app_layers.py, tests/render/test_renderer.py).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import source_trees

import kelab

ROOT = Path(kelab.__file__).parent
RANK = {
    "errors": -1,  # UserError: imports nothing; _validate raises it
    "_validate": 0,
    "_files": 0,
    "_numpy": 0,  # numpy's door (a count without the dispatch wrapper), for every room
    "_after_import": 0,
    "_settings": 0.5,  # config fields declared once; uses _validate's checks
    "timing": 1,
    "sim": 2,
    "render": 3,
    "app": 4,
    "rl": 4,
    "tasks": 5,
    "train": 6,
    "cli": 7,
    "__main__": 8,
}
#: A module's size limit in lines of code (docstrings, comments and blank lines not
#: counted): a smell detector, far above what a module needs, never a target (#38). A
#: module is split where one job ends and another begins, not to meet a count.
MAX_CODE_LINES = 700


def _modules() -> dict[str, Path]:
    """Every module: the Python files and the C sources of the extension modules."""
    found = {}
    for path in sorted([*ROOT.rglob("*.py"), *ROOT.rglob("*.c")]):
        parts = ["kelab", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def _imports(module: str) -> tuple[tuple[str, str | None], ...]:
    """(imported module, name taken from it or None) for every kelab import."""
    path = MODULES[module]
    if path.suffix == ".c":  # an extension module imports nothing from kelab
        return ()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, str | None]] = []
    for node in source_trees.nodes(path):  # parsed once a session
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub, None) if sub in MODULES else (base, a.name))
    return tuple((m, n) for m, n in found if m == "kelab" or m.startswith("kelab."))


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _ in _imports(module):
            owner = _owner(target)
            if owner and owner != module:
                edges[module].add(owner)
    return edges


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer():
    assert {_layer(m) for m in MODULES} - {"__init__"} <= set(RANK), sorted(
        {_layer(m) for m in MODULES} - set(RANK)
    )


def test_no_import_points_up_or_across_sibling_layers():
    wrong = []
    for module, targets in _edges().items():
        here = _layer(module)
        if here == "__init__":
            continue  # the lazy public name map
        for target in targets:
            there = _layer(target)
            if there in (here, "__init__"):
                continue
            if RANK[there] >= RANK[here]:
                wrong.append(f"{module} -> {target}")
    assert not wrong, wrong


def test_the_import_graph_has_no_circle():
    edges = _edges()
    del edges["kelab"]  # the lazy public name map points everywhere by design
    for targets in edges.values():
        targets.discard("kelab")
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    assert not circles, circles


def test_no_private_name_is_imported_across_modules():
    found = [
        f"{module} imports {target}.{name}"
        for module in MODULES
        for target, name in _imports(module)
        if name and name.startswith("_") and not name.startswith("__")
    ]
    assert not found, found


def _room(module: str) -> str:
    """The room a module lives in: ``kelab`` for the root's helpers, else ``kelab.X``."""
    if module.count(".") > 1 or MODULES[module].name == "__init__.py":
        return ".".join(module.split(".")[:2])
    return "kelab"


def test_no_private_module_of_another_room_is_imported():
    """A module whose name starts with ``_`` is its own room's business (#38).

    ``kelab/train/_x.py`` is imported only inside ``kelab.train``; the root's private
    modules (``kelab._validate``, ``kelab._files``) are the bottom layer every room uses.
    """
    found = []
    for module in MODULES:
        for target, _ in _imports(module):
            owner = _owner(target)
            if owner is None or owner == module:
                continue
            private = [p for p in owner.split(".") if p.startswith("_") and p != "__main__"]
            room = _room(owner)
            if private and module != room and not module.startswith(room + "."):
                found.append(f"{module} imports {owner}")
    assert not found, sorted(set(found))


#: Each dependency's private names (``torch._fused_adam_``, ``pymunk._chipmunk_cffi``) are
#: used in one module, its door, which checks the release they were written for and takes
#: the public path elsewhere (#38). Annotations are not counted: they never run.
DOORS = {
    "torch": "kelab.train._torch",
    "atexit": "kelab.cli._exit",
    "pymunk": "kelab.sim.physics._chipmunk",
    "numpy": "kelab._numpy",
    "argparse": "kelab.cli.args",  # _SubParsersAction: add_subparsers' type, no public name
}
#: Underscored names their library documents as public.
DOCUMENTED = {"os._exit"}  # the exit of a forked child (kelab.train._fork)


def _private_uses(module: str) -> list[str]:
    """``dependency.private_name`` for each use of a non-kelab module's private name."""
    path = MODULES[module]
    if path.suffix == ".c":
        return []
    module_nodes = source_trees.nodes(path)  # parsed and walked once a session
    annotations = set()
    for node in module_nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            notes = [a.annotation for a in every if a is not None] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            notes = [node.annotation]
        else:
            continue
        annotations |= {id(n) for note in notes if note for n in ast.walk(note)}

    def private(dotted: str) -> bool:
        return any(p.startswith("_") and not p.startswith("__") for p in dotted.split(".")[1:])

    aliases: dict[str, str] = {}
    found = []
    for node in module_nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    aliases.setdefault(a.name.split(".")[0], a.name.split(".")[0])
                found += [a.name] if private(a.name) else []
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for a in node.names:
                dotted = f"{node.module}.{a.name}"
                found += [dotted] if private(dotted) else []
    for node in module_nodes:
        if isinstance(node, ast.Attribute) and id(node) not in annotations:
            chain = [node.attr]
            base = node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases and node.attr.startswith("_"):
                dotted = ".".join([aliases[base.id], *reversed(chain)])
                found += [dotted] if private(dotted) and not dotted.endswith("__") else []
    return [d for d in found if not d.startswith("kelab") and d not in DOCUMENTED]


def test_each_dependency_s_private_names_are_used_behind_its_one_door():
    wrong = [
        f"{module} uses {dotted}"
        for module in MODULES
        for dotted in _private_uses(module)
        if DOORS.get(dotted.split(".")[0]) != module
    ]
    assert not wrong, sorted(set(wrong))


_LAYOUT_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT}
_LAYOUT_TOKENS |= {tokenize.DEDENT, tokenize.ENDMARKER}


def code_lines(text: str, c_source: bool = False) -> int:
    """Lines of code in a module's text: docstrings, comments and blank lines not counted.

    Python: the lines that hold a token other than a comment, less those of string
    statements (module, class, function and attribute docstrings). C: the non-blank lines
    once ``/* ... */`` and ``// ...`` comments are removed.
    """
    if c_source:
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        return sum(1 for line in text.splitlines() if line.strip())
    docs: set[int] = set()
    for node in source_trees.nodes_of(text):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):
                docs.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in _LAYOUT_TOKENS:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - docs)


def test_the_size_check_counts_code_lines_only():
    python = '''"""A module docstring
over two lines."""

# a comment

def f(x):  # a comment after code
    """A docstring."""
    y = """a string that is data,
    over two lines"""
    return (x +
            y)


class A:
    n = 1
    """An attribute's docstring."""
'''
    assert code_lines(python) == 7  # def, y = (2 lines), return (2 lines), class, n = 1
    c = "/* a comment\n over lines */\nint f(void) {  // why\n\n    return 1;\n}\n// end\n"
    assert code_lines(c, c_source=True) == 3


def test_no_module_is_over_the_code_line_limit():
    big = {}
    for module, path in MODULES.items():
        n = code_lines(path.read_text(encoding="utf-8"), c_source=path.suffix == ".c")
        if n > MAX_CODE_LINES:
            big[module] = n
    assert not big, big
