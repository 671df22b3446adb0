"""Run every docstring example in the ``kelab`` package, one test per module.

Modules are found on disk (nothing is imported at collection) and imported when their
test runs. A module that needs an optional extra (a name listed under
``[project.optional-dependencies]`` in pyproject.toml, such as torch or ray) is skipped
only when that extra really is not installed; any other import error fails the test.
``python -m pytest --doctest-modules kelab`` runs the same examples through pytest's own
doctest plugin.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import sys
from pathlib import Path

import pytest

import kelab

PACKAGE_DIR = Path(kelab.__file__).resolve().parent
PYPROJECT = PACKAGE_DIR.parent / "pyproject.toml"

# import name -> distribution name, where an optional extra's two names differ
IMPORT_ALIASES: dict[str, str] = {"imgui": "imgui-bundle", "imgui_bundle": "imgui-bundle"}

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _optional_requirements() -> dict[str, str]:
    """Normalised distribution name -> the extra that lists it."""
    out: dict[str, str] = {}
    if sys.version_info >= (3, 11) and PYPROJECT.is_file():
        import tomllib

        extras = tomllib.loads(PYPROJECT.read_text())["project"].get("optional-dependencies", {})
        pairs = [(extra, req) for extra, reqs in extras.items() for req in reqs]
    else:  # installed metadata: "torch>=2; extra == 'train'"
        from importlib.metadata import requires

        pairs = []
        for req in requires("kelab") or []:
            found = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
            if found:
                pairs.append((found.group(1), req))
    for extra, req in pairs:
        dist = re.match(r"[A-Za-z0-9_.-]+", req)
        if dist:
            out.setdefault(_normalise(dist.group(0)), extra)
    return out


def _import_or_skip(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing == "kelab" or importlib.util.find_spec(missing) is not None:
            raise
        dist = _normalise(IMPORT_ALIASES.get(missing, missing))
        extra = _optional_requirements().get(dist)
        if extra is None:
            raise ModuleNotFoundError(
                f"{name} imports {missing!r}, which is neither installed nor listed as an "
                "optional dependency in pyproject.toml; declare it under "
                "[project.optional-dependencies] (or add its import name to IMPORT_ALIASES "
                "in tests/test_doctests.py)",
                name=exc.name,
            ) from exc
        pytest.skip(f"{name} needs the optional extra [{extra}] ({missing} is not installed)")


def test_every_module_is_found() -> None:
    names = _module_names()
    assert "kelab" in names and "kelab.render.canvas" in names and "kelab.rl.task" in names


@pytest.mark.parametrize("module_name", _module_names())
def test_docstring_examples(module_name: str) -> None:
    module = _import_or_skip(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report: list[str] = []
    for test in finder.find(module, module_name):
        if test.examples:
            runner.run(test, out=report.append, clear_globs=True)
    result = runner.summarize(verbose=False)
    if result.failed:
        pytest.fail(
            f"{result.failed} of {result.attempted} docstring examples in {module_name} "
            "failed:\n" + "".join(report),
            pytrace=False,
        )


def test_a_missing_optional_extra_skips_and_anything_else_fails(tmp_path, monkeypatch) -> None:
    (tmp_path / "needs_extra_mod.py").write_text("import kelab_missing_extra_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="neither installed nor listed"):
        _import_or_skip("needs_extra_mod")
    monkeypatch.setattr(
        sys.modules[__name__], "_optional_requirements", lambda: {"kelab-missing-extra-pkg": "x"}
    )
    with pytest.raises(pytest.skip.Exception, match=r"optional extra \[x\]"):
        _import_or_skip("needs_extra_mod")
    (tmp_path / "broken_kelab_import.py").write_text("import kelab.no_such_module\n")
    with pytest.raises(ModuleNotFoundError):
        _import_or_skip("broken_kelab_import")
