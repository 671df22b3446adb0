"""``kelab new NAME`` (#39): a starter project whose tests and README commands pass.

The README's commands are read from its ``sh`` block and run as written, in the new
folder, with the real ``kelab`` console script (which, unlike ``python -m kelab``, does not
put the current folder on ``sys.path``): only ``kelab train`` gets ``--iterations 3``
added, so the test does not wait for a whole training run. They run in a child started
with the session, beside the suite (tests/prestart.py); the test checks what it saw.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from prestart import Prestart

from kelab.cli import main
from kelab.cli import new as new_module
from kelab.cli.new import STARTER_FILES, create_project, starter_for

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "kelab" / "cli" / "templates" / "starter"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("PYTHONPATH", None)  # the project's module must be found from its own folder
    env["SDL_VIDEODRIVER"] = "dummy"
    return env


def _kelab_executable() -> list[str]:
    """The installed ``kelab`` script beside this Python (``python -m kelab`` without it)."""
    script = Path(sys.executable).parent / "kelab"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "kelab"]


def readme_commands(readme: str) -> list[str]:
    """The command lines of the README's ``sh`` block (comments left out)."""
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    assert len(blocks) == 1, "the README has one sh block: its commands"
    lines = [line.strip() for line in blocks[0].splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize(
    "name, why",
    [
        ("my-arm", "Python identifier"),
        ("2arm", "Python identifier"),
        ("class", "not a keyword"),
        ("", "Python identifier"),
        ("json", "standard library"),
        ("numpy", "a module Python already imports"),
        ("kelab", "a module Python already imports"),
        ("tests", "tests folder"),
    ],
)
def test_new_refuses_a_bad_name_in_one_line(tmp_path, monkeypatch, capsys, name, why):
    monkeypatch.chdir(tmp_path)
    assert main(["new", name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kelab: error: ") and why in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_new_refuses_an_existing_path(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "arm"
    if kind == "folder":
        target.mkdir()
        (target / "mine.txt").write_text("keep me")
    else:
        target.write_text("keep me")
    assert main(["new", "arm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"already exists (a {kind})" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arm"]
    assert (target / "mine.txt" if kind == "folder" else target).read_text() == "keep me"


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    written = []

    def fail_on_the_third(path, data):
        if len(written) == 2:
            raise OSError(28, "No space left on device")
        written.append(path)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)

    monkeypatch.setattr(new_module, "atomic_write_bytes", fail_on_the_third)
    with pytest.raises(OSError, match="No space"):
        create_project("arm", tmp_path)
    assert list(tmp_path.iterdir()) == []  # neither arm/ nor the temp folder


def test_the_project_is_rendered_whole(tmp_path):
    folder = create_project("my_arm", tmp_path)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == sorted(out.format(name="my_arm") for out in STARTER_FILES.values())
    for path in folder.rglob("*"):
        if path.is_file():
            assert "{{" not in path.read_text(), path  # every field filled in
    assert starter_for("my_arm").task_spec == "my_arm:MyArmTask"
    assert "class MyArmTask(ke.Task):" in (folder / "my_arm.py").read_text()
    assert "kelab train my_arm:MyArmTask --run-dir runs/first" in readme_commands(
        (folder / "README.md").read_text()
    )


def test_every_template_ships_as_package_data():
    """``pip install .`` (not editable) installs the templates: pyproject lists them."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = data["package-data"]["kelab.cli"]
    for template in STARTER_FILES:
        relative = f"templates/starter/{template}"
        assert (TEMPLATES / template).is_file()
        assert any(fnmatch.fnmatch(relative, p) for p in patterns), (relative, patterns)
    assert sorted(p.name for p in TEMPLATES.iterdir()) == sorted(STARTER_FILES)


def run_the_starter(folder: Path) -> dict:
    """``kelab new demo_arm`` in ``folder``, then its README's commands as written, in
    the new folder; what each printed, for the test to check.

    Only ``kelab train`` gets ``--iterations 3`` (a short run: no wait for the target).
    The commands that read the trained run (runs/first:best) wait for ``kelab train``;
    the others run beside it, and those three beside each other (both cores busy). A
    batch with a command that failed ends the run.
    """
    made = subprocess.run(
        [*_kelab_executable(), "new", "demo_arm"],
        cwd=folder,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    seen: dict = {"new": [made.returncode, made.stdout, made.stderr], "runs": []}
    if made.returncode != 0:
        return seen
    project = folder / "demo_arm"
    commands = seen["commands"] = readme_commands((project / "README.md").read_text())
    for batch in ([c for c in commands if "runs/first:" not in c],
                  [c for c in commands if "runs/first:" in c]):  # fmt: skip
        started = []
        try:
            for command in batch:
                argv = shlex.split(command)
                if argv[0] == "python":
                    argv = [sys.executable, *argv[1:], "-q", "-p", "no:cacheprovider"]
                else:
                    argv = [*_kelab_executable(), *argv[1:]]
                if argv[-3:-1] == ["--run-dir", "runs/first"] and "train" in argv:
                    argv += ["--iterations", "3"]  # a short run: no wait for the target
                started.append((command, subprocess.Popen(
                    argv, cwd=project, env=_env(), stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True,
                )))  # fmt: skip
            for command, proc in started:
                out, err = proc.communicate(timeout=300)
                seen["runs"].append([command, proc.returncode, out[-2000:], err[-2000:]])
        finally:
            for _, proc in started:
                proc.kill()
                proc.wait()
        if any(run[1] != 0 for run in seen["runs"]):
            break
    return seen


#: The starter's whole check (~15 s of CPU over up to three processes), in a child
#: started early, beside the suite (tests/prestart.py)
STARTER = Prestart(
    [
        sys.executable,
        "-c",
        "import json, sys; from pathlib import Path; "
        f"sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        "from test_new import run_the_starter; "
        "print(json.dumps(run_the_starter(Path.cwd())))",
    ],
    timeout=900,
)


@pytest.mark.prestart(STARTER)
def test_the_starter_passes_its_tests_and_its_readme_runs_as_written():
    pytest.importorskip("torch")
    pytest.importorskip("onnx")
    done = STARTER.result()
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    returncode, out, err = seen["new"]
    assert returncode == 0, err
    assert "demo_arm:DemoArmTask" in out
    commands = seen["commands"]
    assert [shlex.split(c)[:2] for c in commands] == [
        ["python", "-m"],
        ["kelab", "preview"],
        ["kelab", "train"],
        ["kelab", "eval"],
        ["kelab", "play"],
        ["kelab", "export"],
    ]
    needs_run = ["runs/first:" in c for c in commands]
    assert needs_run == sorted(needs_run), "every command that reads the run comes last"
    for command, returncode, out, err in seen["runs"]:
        assert returncode == 0, (command, out, err)
        assert "Traceback" not in err and "warning" not in err, (command, err)
        if command.startswith("python"):  # the project's own tests
            assert re.search(r"\b4 passed\b", out), out
    assert sorted(run[0] for run in seen["runs"]) == sorted(commands)  # each ran once
    project = done.folder / "demo_arm"
    for output in ("preview.png", "runs/first/best.json", "play.mp4", "demo_arm.onnx"):
        assert (project / output).is_file(), output
