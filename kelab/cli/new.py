"""``kelab new NAME``: a starter project, a task of your own with its tests and README.

``NAME/`` holds ``NAME.py`` (a two-link reaching arm written with the Task API, its
success rule and training config), ``tests/test_NAME.py`` (``check_env``, a step, a
hand-written controller that solves it, a short training run), a README whose commands
(preview, train, eval, play, export) run as written from inside the folder, a
``pyproject.toml`` for pytest and a ``.gitignore``. The files are rendered from the
templates in ``kelab/cli/templates/starter/`` (package data), written into a temp folder
beside ``NAME`` and renamed to ``NAME`` when all are there, so a failure leaves nothing.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import keyword
import os
import re
import secrets
import shutil
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TextIO

from kelab._files import atomic_write_bytes, fsync_dir
from kelab.errors import UserError

__all__ = [
    "STARTER_FILES",
    "Starter",
    "add_new_parser",
    "check_project_name",
    "create_project",
    "run_new",
    "starter_for",
]

STARTER_FILES: dict[str, str] = {
    "task.py.tmpl": "{name}.py",
    "test_task.py.tmpl": "tests/test_{name}.py",
    "README.md.tmpl": "README.md",
    "pyproject.toml.tmpl": "pyproject.toml",
    "gitignore.tmpl": ".gitignore",
}
"""Template in ``kelab/cli/templates/starter/`` -> the file it becomes in ``NAME/``."""

#: names a project cannot take: its own files would shadow or confuse them
_RESERVED = {"tests": "the project's tests folder", "conftest": "pytest's conftest module"}
_FIELD = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class Starter:
    """What ``kelab new NAME`` fills its templates with.

    Attributes:
        name: The project, its folder and its task's module (``reach``).
        task_class: The task's class (``ReachTask``).
    """

    name: str
    task_class: str

    @property
    def task_spec(self) -> str:
        """How ``kelab train`` names the task from inside the folder: ``reach:ReachTask``."""
        return f"{self.name}:{self.task_class}"

    def render(self, template: str) -> str:
        """``template`` with ``{{name}}`` and ``{{task_class}}`` filled in.

        Raises:
            KeyError: For a ``{{field}}`` the starter does not have (a template's bug).
        """
        fields = {"name": self.name, "task_class": self.task_class}
        return _FIELD.sub(lambda m: fields[m.group(1)], template)


def starter_for(name: str) -> Starter:
    """The starter of project ``name``: its task class is ``name`` in CamelCase + ``Task``.

    Example:
        >>> starter_for("my_arm")
        Starter(name='my_arm', task_class='MyArmTask')
        >>> starter_for("reach_task").task_spec
        'reach_task:ReachTask'
    """
    camel = "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)
    if not camel or camel[0].isdigit():
        camel = f"My{camel}"
    return Starter(name, camel if camel.endswith("Task") else f"{camel}Task")


def _shadowed_by(name: str) -> str | None:
    """Where an importable module ``name`` already is (None: nowhere but here).

    ``kelab train NAME:Class`` imports ``NAME`` from ``sys.path`` first and from the
    current folder only when it is not found there, so such a name would train another
    module. The current folder itself is left out of the search.
    """
    if name in sys.builtin_module_names or name in getattr(sys, "stdlib_module_names", ()):
        return "the standard library"
    cwd = os.getcwd()
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != cwd]
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None:
        return None
    where = spec.origin or next(iter(spec.submodule_search_locations or []), None)
    return str(where) if where else "sys.path"


def check_project_name(name: object, parent: Path) -> str:
    """Return ``name`` if ``kelab new`` can make ``parent/name``; else raise, saying why.

    Raises:
        UserError: For a name that is not a Python identifier (or is a keyword), one taken
            by an importable module or reserved, or a ``parent/name`` that exists.
    """
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        hint = re.sub(r"\W", "_", str(name))
        if not hint or hint[0].isdigit():
            hint = f"task_{hint}"
        if keyword.iskeyword(hint):
            hint = f"{hint}_task"
        raise UserError(
            f"NAME must be a Python identifier that is not a keyword (letters, digits and _, "
            f"not starting with a digit: it names the task's module), got {name!r}; try "
            f"kelab new {hint}"
        )
    if name in _RESERVED:
        raise UserError(
            f"NAME must not be {name!r} ({_RESERVED[name]}); choose another name, e.g. "
            f"kelab new my_{name}"
        )
    shadow = _shadowed_by(name)
    if shadow is not None:
        raise UserError(
            f"NAME must not be the name of a module Python already imports ({name!r} is in "
            f"{shadow}): kelab train {name}:... would import that one, not {name}.py; choose "
            f"another name, e.g. kelab new my_{name}"
        )
    target = parent / name
    if os.path.lexists(target):
        what = "a folder" if target.is_dir() else "a file"
        raise UserError(
            f"{target} already exists ({what}); kelab new never writes into an existing "
            "path: choose another name or move it away"
        )
    return name


def _template(file: str) -> str:
    return (resources.files("kelab.cli") / "templates" / "starter" / file).read_text("utf-8")


def create_project(name: str, parent: str | os.PathLike[str] = ".") -> Path:
    """Write the starter project ``parent/name`` (see the module docstring) and return it.

    All or nothing: the files are written (each atomically) into a new temp folder beside
    the target, which is renamed to ``name`` once they are all there.

    Args:
        name: The project's name: a Python identifier, the task's module.
        parent: The folder to make it in (default: the current folder).

    Returns:
        The new folder.

    Raises:
        UserError: See :func:`check_project_name`; also a ``parent`` that is not a folder.

    Example:
        >>> import tempfile
        >>> folder = create_project("reach", tempfile.mkdtemp())
        >>> sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        ['.gitignore', 'README.md', 'pyproject.toml', 'reach.py', 'tests/test_reach.py']
    """
    base = Path(parent)
    if not base.is_dir():
        raise UserError(f"the folder to make {name!r} in must exist, got {base}; create it first")
    check_project_name(name, base)
    starter = starter_for(name)
    texts = {
        out.format(name=name): starter.render(_template(src)) for src, out in STARTER_FILES.items()
    }
    target = base / name
    temp = base / f".{name}.new-{secrets.token_hex(4)}"
    os.mkdir(temp)  # the usual mode (umask), unlike mkdtemp's 0700
    try:
        for relative, text in texts.items():
            atomic_write_bytes(temp / relative, text.encode("utf-8"))
        if os.path.lexists(target):  # made while we wrote
            raise UserError(f"{target} appeared while kelab new wrote; nothing was written")
        os.rename(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    fsync_dir(base)
    return target


def run_new(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``kelab new NAME``: make the starter project and say what to run next.

    Returns:
        0 (a bad name or an existing path raises `kelab.errors.UserError`: one line,
        exit 2).
    """
    out = out or sys.stdout
    folder = create_project(args.name)
    starter = starter_for(args.name)
    files = ", ".join(out_.format(name=args.name) for out_ in STARTER_FILES.values())
    print(f"created {folder}{os.sep}: {files} (the task: {starter.task_spec})", file=out)
    print(
        f"next: cd {folder} && python -m pytest && kelab train {starter.task_spec} "
        "--run-dir runs/first (README.md has the rest)",
        file=out,
    )
    return 0


def add_new_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``new`` to the ``kelab`` command's subparsers."""
    p = sub.add_parser(
        "new",
        help="make a starter project: a task of your own, its tests and a README",
        description="Make NAME/ in the current folder: NAME.py (a two-link arm reaching for "
        "a goal, written with the Task API, with its success rule and training config), its "
        "tests (python -m pytest) and a README whose commands (preview, train, eval, play, "
        "export) run from inside NAME/.",
    )
    p.add_argument(
        "name",
        metavar="NAME",
        help="the project, its folder and its task's module: a Python identifier",
    )
    p.set_defaults(func=run_new)
