"""Every ```python block in docs/*.md and README.md runs, so the examples never rot; every
module, path and name docs/DESIGN.md gives exists, so the map never goes stale."""

from __future__ import annotations

import ast
import contextlib
import doctest
import functools
import importlib
import io
import os
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest
import source_trees
from prestart import Prestart

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PAGES = sorted(p for p in DOCS.glob("*.md") if BLOCK.search(p.read_text())) + [
    DOCS.parent / "README.md"
]


#: A shown output: ``# out: TEXT`` ending a line (after a print) or on a line of its own.
SHOWN = re.compile(r"#\s*out:\s?(.*)$", re.M)
_CHECKER = doctest.OutputChecker()


def shown_output_problems(code: str, printed: str) -> list[str]:
    """What a block shows (``# out: ...``) that its run did not print, in order.

    Each shown line must match a printed line after the previous one matched (``...``
    stands for any text, as in a doctest); printed lines nothing shows are allowed.
    """
    lines = printed.splitlines()
    at, problems = 0, []
    for want in (w.strip() for w in SHOWN.findall(code)):
        for j in range(at, len(lines)):
            if _CHECKER.check_output(want + "\n", lines[j].strip() + "\n", doctest.ELLIPSIS):
                at = j + 1
                break
        else:
            problems.append(f"shows {want!r}, printed {lines[at:]!r}")
            break
    return problems


#: A block that is a module the page's later blocks import: its first line names the file.
FILE_LINE = re.compile(r"# file: (\w+\.py)\n")


def run_page_blocks(page: Path) -> None:
    """Run a page's ```python blocks in order, each in a namespace of its own, in the
    current folder (on ``sys.path``: a ``# file: x.py`` block is saved there for the
    later blocks to import). A block that raises, or that shows output it did not print,
    fails the run."""
    saved: list[str] = []
    try:
        for i, block in enumerate(BLOCK.findall(page.read_text())):
            namespace = {"__name__": f"docs_{page.stem}_{i}"}
            code = textwrap.dedent(block)  # a block inside a list item is indented
            named = FILE_LINE.match(code)
            if named:  # "# file: puck.py": saved there, as the page tells the reader to
                Path(named.group(1)).write_text(code)
                saved.append(named.group(1)[:-3])
                sys.modules.pop(saved[-1], None)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
            problems = shown_output_problems(code, printed.getvalue())
            assert problems == [], f"{page.name}[block {i}]: {problems}"
    finally:
        for name in saved:  # another page may save a module of the same name
            sys.modules.pop(name, None)


#: A page in a fresh interpreter, as a reader runs it: its warnings are errors, as here
_PAGE_IN_A_CHILD = """
import os, sys, warnings
from pathlib import Path
sys.path[:0] = [os.getcwd(), {tests!r}]
from test_docs import run_page_blocks
warnings.simplefilter("error")
run_page_blocks(Path({page!r}))
print("every block ran")
"""
#: The pages that start Ray or train for seconds run in a child started early, beside the
#: suite (tests/prestart.py); the others here
IN_A_CHILD = {
    page.name: Prestart(
        [
            sys.executable,
            "-c",
            _PAGE_IN_A_CHILD.format(tests=str(Path(__file__).parent), page=str(page)),
        ],
        env={**os.environ, "KELAB_DOCS_QUICK": "1"},  # a page's training: a few iterations
        timeout=600,
    )
    for page in PAGES
    if page.name in ("scale.md", "training.md")
}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=[pytest.mark.prestart(IN_A_CHILD[page.name])], id=page.name)
        if page.name in IN_A_CHILD
        else pytest.param(page, id=page.name)
        for page in PAGES
    ],
)
def test_doc_examples_run(page, tmp_path, monkeypatch):
    if page.name in IN_A_CHILD:
        done = IN_A_CHILD[page.name].result()
        assert done.returncode == 0 and done.stdout.endswith("every block ran\n"), done.stderr[
            -4000:
        ]
        return
    monkeypatch.chdir(tmp_path)  # examples may write files
    monkeypatch.syspath_prepend(str(tmp_path))  # ... and import the modules they save
    monkeypatch.setenv("KELAB_DOCS_QUICK", "1")  # a page's training: a few iterations
    run_page_blocks(page)


def test_shown_outputs_are_checked():
    code = (
        "print(21, False)  # out: 21 False\nprint('x')\nprint('a long line')\n# out: a ... line\n"
    )
    assert shown_output_problems(code, "21 False\nx\na long line\n") == []
    assert shown_output_problems(code, "20 False\nx\na long line\n") != []
    assert shown_output_problems("print(1)  # out: 1\nprint(2)  # out: 2\n", "2\n1\n") != []


# ---------------------------------------------------------------- docs/DESIGN.md, the map
DESIGN = DOCS / "DESIGN.md"
REPO = DOCS.parent
KELAB = REPO / "kelab"
#: A path from the repository's root: kelab/..., tests/..., benchmarks/..., docs/...
REPO_PATH = re.compile(
    r"(?<![\w/.:-])((?:kelab|tests|benchmarks|docs|tools|demos)/[\w/.*-]*[\w/*])"
)
#: A file named without its folder: world.py, _native.c, world.md.
BARE_FILE = re.compile(r"(?<![\w/.-])(\w+\.(?:py|c|md))\b")
#: A name in backticks: `ClockState`, `kelab._settings.setting()`, `App.start()`.
TICKED = re.compile(r"`([A-Za-z_][\w.]*)(?:\(\))?`")
#: Third-party and standard-library names the page may tick without kelab defining them.
NOT_KELAB = {"Any", "Fraction", "TYPE_CHECKING", "ValueError", "ImportError", "OSError"}
#: The most lines the map may have: a page or two (#38 item 8).
DESIGN_MAX_LINES = 200


def _defined_names(folder: Path, recursive: bool = True) -> set[str]:
    """Every class, function and assigned name (module or class level) in a folder's modules."""
    names: set[str] = set()
    for path in folder.rglob("*.py") if recursive else folder.glob("*.py"):
        names |= _names_in(path)
    return names


@functools.cache
def _names_in(path: Path) -> frozenset[str]:
    """The names one module defines; each file is parsed once a session (the checks below
    read the whole tree three times, ~3 CPU s each when every read parsed it again)."""
    names: set[str] = set()
    for node in source_trees.nodes(path):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def _rooms(text: str) -> dict[str, str]:
    """The room listing of "## The rooms": each room's folder -> the text of its lines."""
    section = text.split("## The rooms", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    rooms: dict[str, str] = {}
    room = None
    for line in block.splitlines()[1:]:
        if line.startswith("kelab/"):
            room, line = line.split(None, 1)
            rooms[room] = ""
        assert room is not None, f"a line before the first room: {line!r}"
        rooms[room] += " " + line.strip()
    return rooms


def _resolve(attrs: list[str]) -> object | None:
    """``kelab.<attrs...>`` (an attribute or a submodule at each step), or None."""
    target: object = importlib.import_module("kelab")
    for attr in attrs:
        if hasattr(target, attr):
            target = getattr(target, attr)
            continue
        if not isinstance(target, types.ModuleType):
            return None
        try:
            target = importlib.import_module(f"{target.__name__}.{attr}")
        except ImportError:
            return None
    return target


def design_problems(text: str) -> list[str]:
    """What on the design page is not true of the tree: paths, modules and names that are
    not there, and its length."""
    problems = []
    lines = text.count("\n")
    if lines > DESIGN_MAX_LINES:
        problems.append(f"{lines} lines, more than {DESIGN_MAX_LINES}: a map, not a changelog")
    for path in sorted(set(REPO_PATH.findall(text))):
        if not any(REPO.glob(path.rstrip("/"))):
            problems.append(f"no {path}")
    if "## The rooms" not in text:
        return [*problems, "no '## The rooms' section listing each room's modules"]
    rooms = _rooms(text)
    for room, listing in rooms.items():
        folder = REPO / room
        if not folder.is_dir():
            problems.append(f"no room {room}")
            continue
        for name in BARE_FILE.findall(listing):
            if not (folder / name).is_file():
                problems.append(f"no {room}{name}")
        for sub in re.findall(r"(?<![\w/.-])(\w+)/", listing):
            if not (folder / sub).is_dir():
                problems.append(f"no {room}{sub}/")
        own = _defined_names(folder, recursive=False)
        for group in re.findall(r"\(([^()]*)\)", listing):
            for item in group.split(","):
                item = item.split(":")[0].strip()
                code_like = item[:1].isupper() or "_" in item
                if re.fullmatch(r"[A-Za-z_]\w*", item) and code_like and item not in own:
                    problems.append(f"{room}: no {item} defined there")
    rest = text.split("## The rooms", 1)[0] + text.split("## The rooms", 1)[1].split("\n## ", 1)[1]
    every_file = {p.name for p in KELAB.rglob("*") if p.suffix in (".py", ".c")}
    every_file |= {p.name for p in DOCS.glob("*.md")} | {p.name for p in REPO.glob("*.md")}
    for name in sorted(set(BARE_FILE.findall(rest)) - every_file):
        problems.append(f"no file {name} in kelab/, docs/ or the repository's root")
    defined = _defined_names(KELAB) | _defined_names(REPO / "tests")
    for ticked in sorted(set(TICKED.findall(text))):
        head, *attrs = ticked.split(".")
        if head in ("kelab", "ke") and _resolve(attrs) is None:
            problems.append(f"no {ticked}")
        elif head[:1].isupper() and head not in defined | NOT_KELAB:
            problems.append(f"no {head} in kelab or tests")
    return problems


def test_the_design_map_names_only_what_exists():
    """docs/DESIGN.md is the map: every path, module and name it gives exists (#38 item 8)."""
    assert design_problems(DESIGN.read_text(encoding="utf-8")) == []


def test_the_design_check_sees_a_stale_map():
    text = DESIGN.read_text(encoding="utf-8")
    stale = text.replace("sites.py,", "sites.py (SiteReadout), kelab_gone.py,", 1)
    stale = stale.replace("(kelab/sim/physics/_native_reset.c)", "(kelab/sim/physics/_gone.c)", 1)
    stale = stale.rstrip("\n") + " `SiteReadout`, `kelab.sim.world.Nothing`, docs/gone.md\n"
    assert design_problems(stale) == [
        "no docs/gone.md",
        "no kelab/sim/physics/_gone.c",
        "no kelab/sim/kelab_gone.py",
        "kelab/sim/: no SiteReadout defined there",
        "no SiteReadout in kelab or tests",
        "no kelab.sim.world.Nothing",
    ]
    assert design_problems(text + "\n" * DESIGN_MAX_LINES)[0].endswith("a map, not a changelog")
