"""pygame is imported through one door, without its banner on the user's stdout (#42)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import source_trees

KELAB = Path(__file__).resolve().parents[2] / "kelab"
DOOR = KELAB / "render" / "pygame_door.py"

SCRIPT = textwrap.dedent(
    """
    import os, sys
    import kelab as ke

    for backend in ("pygame", "gl"):
        app = ke.App(headless=True, backend=backend, size=(64, 48), render_hz=None)
        app.start(max_frames=2)
        app.write_pixels_png(os.path.join(sys.argv[1], backend + ".png"))
        app.close()
    print("done", os.environ.get("PYGAME_HIDE_SUPPORT_PROMPT"))
    """
)


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "PYGAME_HIDE_SUPPORT_PROMPT"}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**clean, "SDL_VIDEODRIVER": "dummy", **env},
    )


def test_a_user_script_running_an_app_prints_no_pygame_banner(tmp_path):
    # it printed "pygame-ce 2.5.8 (SDL 2.32.10, Python 3.11.7)" among the script's output
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done None\n"  # the variable is put back as it was: unset
    assert (tmp_path / "pygame.png").is_file() and (tmp_path / "gl.png").is_file()


def test_a_variable_the_user_set_is_left_as_it_was(tmp_path):
    done = _run(tmp_path, PYGAME_HIDE_SUPPORT_PROMPT="yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done yes\n"


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def test_every_module_imports_pygame_through_the_door():
    found = []
    for path in sorted(KELAB.rglob("*.py")):
        if path == DOOR:
            continue
        every = source_trees.nodes(path)
        skipped = {
            id(n) for node in every if isinstance(node, ast.If) and _type_checking(node)
            for n in ast.walk(node)
        }  # fmt: skip
        for node in every:
            if id(node) in skipped:
                continue
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(n == "pygame" or n.startswith("pygame.") for n in names):
                found.append(f"{path.relative_to(KELAB.parent)}:{node.lineno}")
    assert not found, f"import pygame from kelab.render.pygame_door instead: {found}"
