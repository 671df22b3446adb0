import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import source_trees
from prestart import Prestart

import kelab as ke
from kelab.cli import main, run_demo


def test_demo_balances_every_copy():
    summary = run_demo(seconds=6.0, num_envs=3, seed=1)
    assert summary["balanced"]
    assert summary["robot_steps"] == 301 and summary["physics_steps"] == 721
    assert summary["capture_samples"] == 181
    assert summary["final_tilt_max_rad"] < 0.05 < summary["initial_tilt_max_rad"]


def test_demo_is_deterministic():
    a = run_demo(seconds=2.0, num_envs=2)
    b = run_demo(seconds=2.0, num_envs=2)
    assert a["final_tilt_max_rad"] == b["final_tilt_max_rad"]


def test_main_demo_exit_code(capsys):
    assert main(["demo", "--seconds", "3", "--num-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert "balanced" in out and "True" in out


def test_main_rejects_bad_arguments():
    with pytest.raises(SystemExit):
        main(["demo", "--seconds", "0"])


CONSOLE_DEMO = Prestart(
    [sys.executable, "-m", "kelab.cli", "demo", "--seconds", "5"], cwd=Path.cwd(), timeout=120
)


@pytest.mark.prestart(CONSOLE_DEMO)
def test_console_entry_point_runs():
    proc = CONSOLE_DEMO.result()
    assert proc.returncode == 0, proc.stderr
    assert "simulated_s" in proc.stdout


# ---------------------------------------------------------------- user errors: one line, exit 2
DEMOS = Path(__file__).resolve().parents[1] / "demos"


def _kelab_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("PYGAME_HIDE_SUPPORT_PROMPT", None)  # the command hides the banner itself
    env.pop("SDL_VIDEODRIVER", None)
    return env


def _kelab_job(*args: str, in_a_new_folder: bool = False) -> Prestart:
    """``python -m kelab.cli ARGS`` as a job started early, beside the suite
    (tests/prestart.py): run in a folder of its own (a test's tmp_path) or in the current
    one, without a display."""
    cwd = None if in_a_new_folder else Path.cwd()
    command = [sys.executable, "-m", "kelab.cli", *args]
    return Prestart(command, env=_kelab_env(), cwd=cwd, timeout=120)


def _jobs(cases: list[tuple], in_a_new_folder: bool = False) -> list:
    """Each ``(args, ...)`` case as a pytest param whose command starts early; the test
    reads it from ``KELAB[args, in_a_new_folder]``."""
    params = []
    for case in cases:
        job = _kelab_job(*case[0], in_a_new_folder=in_a_new_folder)
        KELAB[case[0], in_a_new_folder] = job
        params.append(pytest.param(*case, marks=pytest.mark.prestart(job)))
    return params


#: The jobs of `_jobs`, by their arguments and where they run
KELAB: dict[tuple[tuple[str, ...], bool], Prestart] = {}


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith("kelab")
    assert "pygame-ce" not in proc.stdout + proc.stderr  # no banner
    return errors[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    _jobs(
        [
            (("preview", "NoSuch-v0"), "unknown task 'NoSuch-v0'; use a built-in task"),
            (  # an id of ke.register_task is Gymnasium's: the commands say what they take
                ("preview", "me/PuckSlot-v0"),
                "unknown task 'me/PuckSlot-v0'; an id from ke.register_task is for "
                "gymnasium.make: name its class as module:TaskClass instead (for class "
                "PuckSlot in mytask.py: mytask:PuckSlot, imported from the current folder)",
            ),
            (("preview", "no_such_module:Task"), "cannot import module 'no_such_module'"),
            (("preview", "kelab.tasks.cartpole:Nope"), "has no class 'Nope'; check the name"),
            (  # a near miss of a task class in that module is named
                ("preview", "kelab.tasks.cartpole:CartPoleTsk"),
                "has no class 'CartPoleTsk'; did you mean 'CartPoleTask'?",
            ),
            (("preview", "kelab.tasks.cartpole:FORCE_SCALE"), "is not a ke.Task subclass"),
            (("preview", "CartPole-v0"), "no display for a preview window"),
            (("preview", "CartPole-v0", "--headless", "--out", "shot.txt"), "must end in .png"),
        ],
        in_a_new_folder=True,
    ),
)
def test_user_errors_print_one_line_and_exit_2(args, expected):
    line = _one_error_line(KELAB[args, True].result())
    assert line.startswith("kelab: error: ") and expected in line


@pytest.mark.parametrize(
    ("args", "prog"),
    _jobs(
        [
            (("demo", "--seconds", "-1"), "kelab demo"),
            (("demo", "--seconds", "0"), "kelab demo"),
            (("demo", "--num-envs", "0"), "kelab demo"),
            (("demo", "--seconds", "abc"), "kelab demo"),
            (("preview", "CartPole-v0", "--seconds", "0"), "kelab preview"),
            (("preview", "CartPole-v0", "--seed", "-3"), "kelab preview"),
            (("train",), "kelab train"),
            (("eval", "CartPole-v0", "--episodes", "x"), "kelab eval"),
            (("nosuchcommand",), "kelab"),
        ]
    ),
)
def test_argument_errors_are_one_line_and_exit_2(args, prog):
    proc = KELAB[args, False].result()
    line = _one_error_line(proc)
    assert proc.stderr.splitlines() == [line]  # no usage lines
    assert line.startswith(f"{prog}: error: ") and line.endswith(f"; see {prog} --help")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("preview", "CartPole-v0", "--seed", "-3"), "--seed: seed must be an int >= 0, got -3"),
        (("eval", "CartPole-v0", "--seed", "x"), "--seed: seed must be an int >= 0, got 'x'"),
        (("demo", "--num-envs", "0"), "--num-envs: num-envs must be an int >= 1, got 0"),
        (("train", "CartPole-v0", "--iterations", "1.5"), "iterations must be an int >= 1"),
        (("demo", "--seconds", "abc"), "seconds must be a finite number > 0, got 'abc'"),
        (("preview", "CartPole-v0", "--seconds", "inf"), "got inf; give the simulated seconds"),
    ],
)
def test_argument_errors_use_the_shared_wording(args, message, capsys):
    from kelab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("eval", "CartPole-v0", "--episdoes", "5"),
            "kelab eval: error: unrecognized arguments: --episdoes 5; did you mean --episodes?; "
            "see kelab eval --help",
        ),
        (  # no prefix abbreviations: --episode is not taken as --episodes
            ("eval", "CartPole-v0", "--episode", "5"),
            "kelab eval: error: unrecognized arguments: --episode 5; did you mean --episodes?; "
            "see kelab eval --help",
        ),
        (
            ("demo", "--secnds=2"),
            "kelab demo: error: unrecognized arguments: --secnds=2; did you mean --seconds?; "
            "see kelab demo --help",
        ),
        (
            ("eval", "CartPole-v0", "--zzzzzz"),
            "kelab eval: error: unrecognized arguments: --zzzzzz; see kelab eval --help",
        ),
    ],
)
def test_a_mistyped_option_names_the_subcommands_help_and_the_closest_option(
    args, expected, capsys
):
    from kelab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    assert exc.value.code == 2
    assert capsys.readouterr().err == expected + "\n"


OUT_A_FOLDER = Prestart(
    lambda folder: (
        [sys.executable, "-m", "kelab.cli", "preview", "CartPole-v0", "--headless"]
        + ["--out", str(folder)]
    ),
    env=_kelab_env(),
    cwd=Path.cwd(),
    timeout=120,
)


@pytest.mark.prestart(OUT_A_FOLDER)
def test_out_naming_a_directory_is_refused():
    line = _one_error_line(OUT_A_FOLDER.result())
    assert "must name a file" in line


DEBUG = _kelab_job("preview", "NoSuch-v0", "--debug", in_a_new_folder=True)


@pytest.mark.prestart(DEBUG)
def test_debug_shows_the_traceback():
    proc = DEBUG.result()
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "unknown task" in proc.stderr


def test_user_error_mapping_covers_other_subcommands(monkeypatch, capsys):
    import kelab as ke
    from kelab.cli import USER_ERRORS, KelabUsageError

    assert issubclass(KelabUsageError, ke.UserError) and ke.UserError in USER_ERRORS
    # a bare ValueError or ImportError is a bug (#38), not something the user must fix
    assert not {ValueError, ImportError} & set(USER_ERRORS)

    def fail(args):
        raise ke.UserError("config must be a .toml file, got x.txt; pass --config run.toml")

    # any registered subcommand's UserError becomes one line and exit 2 (train/play/eval too)
    _with_extra_command(monkeypatch, fail)
    assert main(["extra"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kelab: error: config must be a .toml file, got x.txt; pass --config run.toml"]


_FAILING_COMMAND = """
import argparse, sys
import kelab as ke
import kelab.cli as cli

original = cli.build_parser

def fail(args):
    if args.kind == "user":
        raise ke.UserError("episodes must be an int >= 1, got 0; pass --episodes 5")
    if args.kind == "extra":
        from kelab.errors import MissingExtraError

        raise MissingExtraError("onnx not installed; pip install 'kelab[export]'")
    raise {internal}("internal: a list index went wrong")  # a bug inside a command

def with_failing() -> argparse.ArgumentParser:
    parser = original()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    failing = sub.add_parser("failing")
    failing.add_argument("kind")
    failing.set_defaults(func=fail)
    return parser

cli.build_parser = with_failing
sys.argv = ["kelab", "failing", sys.argv[1]]
cli.run()
"""


#: Each error's three runs (internal, user, extra), started early (tests/prestart.py)
FAILING = {
    internal: {
        kind: Prestart(
            [sys.executable, "-c", _FAILING_COMMAND.format(internal=internal), kind],
            cwd=Path.cwd(),
            timeout=120,
        )
        for kind in ("internal", "user", "extra")
    }
    for internal in ("ValueError", "ImportError", "TypeError")
}


@pytest.mark.parametrize(
    "internal",
    [
        pytest.param(e, marks=[pytest.mark.prestart(j) for j in FAILING[e].values()])
        for e in FAILING
    ],
)
def test_an_internal_error_keeps_its_traceback_and_a_user_error_is_one_line(internal):
    def kelab_failing(kind: str) -> subprocess.CompletedProcess:
        return FAILING[internal][kind].result()

    bug = kelab_failing("internal")
    assert bug.returncode == 1, bug.stderr
    assert "Traceback (most recent call last)" in bug.stderr
    assert bug.stderr.strip().splitlines()[-1] == f"{internal}: internal: a list index went wrong"
    assert "kelab: error:" not in bug.stderr
    user = kelab_failing("user")
    assert (user.returncode, user.stderr) == (
        2,
        "kelab: error: episodes must be an int >= 1, got 0; pass --episodes 5\n",
    )
    extra = kelab_failing("extra")
    assert (extra.returncode, extra.stderr) == (
        2,
        "kelab: error: onnx not installed; pip install 'kelab[export]'\n",
    )


def _with_extra_command(monkeypatch, run) -> None:
    """Register an ``extra`` subcommand running ``run(args)`` in the ``kelab`` parser."""
    import argparse

    import kelab.cli as cli

    original = cli.build_parser

    def with_extra() -> argparse.ArgumentParser:
        parser = original()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.add_parser("extra").set_defaults(func=run)
        return parser

    monkeypatch.setattr(cli, "build_parser", with_extra)


def test_unexpected_os_errors_offer_the_traceback(monkeypatch, capsys):
    def fail(args):
        raise PermissionError(13, "Permission denied", "runs/x/best.json")

    _with_extra_command(monkeypatch, fail)
    assert main(["extra"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "kelab: error: Permission denied: runs/x/best.json (--debug shows the traceback)"
    ]


# the test raises warnings on purpose to see them printed: not errors here
@pytest.mark.filterwarnings("default")
def test_warnings_print_as_one_line_while_the_command_runs(monkeypatch, capsys):
    import warnings

    def warn(args):
        message = "the env's scene differs from the one\n  it was trained in"
        warnings.warn(message, UserWarning, stacklevel=1)
        warnings.warn("a second one", RuntimeWarning, stacklevel=1)
        return 0

    _with_extra_command(monkeypatch, warn)
    before = warnings.showwarning
    assert main(["extra"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "kelab: warning: the env's scene differs from the one it was trained in",
        "kelab: warning: a second one",
    ]
    assert warnings.showwarning is before  # only while the command runs


PYTHON_M_KELAB = (
    Prestart([sys.executable, "-m", "kelab", "--version"], timeout=120),
    _kelab_job("train", "cartpole-v0", in_a_new_folder=True),
    Prestart([sys.executable, "-m", "kelab", "demo", "--seconds", "0"], timeout=120),
)


@pytest.mark.prestart(PYTHON_M_KELAB[0])
@pytest.mark.prestart(PYTHON_M_KELAB[1])
@pytest.mark.prestart(PYTHON_M_KELAB[2])
def test_python_m_kelab_is_the_kelab_command():
    version, mistyped, demo = PYTHON_M_KELAB
    proc = version.result()
    assert proc.returncode == 0 and proc.stdout.strip() == f"kelab {ke.__version__}"
    line = _one_error_line(mistyped.result())
    assert "did you mean CartPole-v0?" in line
    proc = demo.result()
    assert proc.returncode == 2 and proc.stderr.startswith("kelab demo: error: argument --seconds")


WARNINGS_LEFT_ALONE = Prestart(
    [
        sys.executable,
        "-c",
        "import warnings; before = warnings.showwarning\n"
        "import kelab, kelab.cli, kelab.train.shipped\n"
        "assert warnings.showwarning is before\n",
    ],
    cwd=Path.cwd(),
    timeout=120,
)


@pytest.mark.prestart(WARNINGS_LEFT_ALONE)
def test_import_kelab_leaves_warnings_alone():
    proc = WARNINGS_LEFT_ALONE.result()
    assert proc.returncode == 0, proc.stderr


def test_a_task_module_is_imported_from_the_current_folder(tmp_path, monkeypatch):
    from kelab.tasks.registry import task_class

    (tmp_path / "kelab_cwd_task.py").write_text(
        "import kelab_cwd_helper\nfrom kelab.tasks.cartpole import CartPoleTask\n\n\n"
        "class MyCart(CartPoleTask):\n    helper = kelab_cwd_helper.VALUE\n"
    )
    (tmp_path / "kelab_cwd_helper.py").write_text("VALUE = 7\n")
    (tmp_path / "kelab_cwd_broken.py").write_text("import kelab_no_such_dependency\n")
    monkeypatch.chdir(tmp_path)
    cwd = os.getcwd()
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != cwd]
    monkeypatch.setattr(sys, "path", path)  # like the `kelab` console script
    names = ("kelab_cwd_task", "kelab_cwd_helper", "kelab_cwd_broken")
    try:
        nothing = (
            r"^cannot import module 'kelab_cwd_nothing'.*: no 'kelab_cwd_nothing' in the "
            r"current folder \(.*\) or on sys.path; run from the folder that contains "
            r"kelab_cwd_nothing.py"
        )
        with pytest.raises(ValueError, match=nothing):
            task_class("kelab_cwd_nothing:Task")
        assert cwd not in sys.path  # not found there either: sys.path as it was
        cls = task_class("kelab_cwd_task:MyCart")
        assert cls.__name__ == "MyCart" and cls.helper == 7  # its neighbour imports too
        assert sys.path[-1] == cwd  # appended: it shadows nothing installed
        # a module found but missing a dependency says which one, not "run from the folder"
        broken = (
            r"^cannot import module 'kelab_cwd_broken' of task 'kelab_cwd_broken:T': "
            r"No module named 'kelab_no_such_dependency'$"
        )
        with pytest.raises(ValueError, match=broken):
            task_class("kelab_cwd_broken:T")
    finally:
        for name in names:
            sys.modules.pop(name, None)


def test_help_shows_defaults_and_every_option_of_demo(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exc.value.code == 0
    assert "(default: 10.0)" in text and "(default: 4)" in text
    assert "seed of the world, an int from 0 to 2**64 - 1 (default: 0)" in text


VERSION = _kelab_job("--version")


@pytest.mark.prestart(VERSION)
def test_version():
    proc = VERSION.result()
    assert proc.returncode == 0 and proc.stdout.strip() == f"kelab {ke.__version__}"


def test_short_demo_explains_its_exit_1(capsys):
    assert main(["demo", "--seconds", "0.5", "--num-envs", "2"]) == 1
    err = capsys.readouterr().err
    assert "not balanced (exit 1)" in err and "--seconds 3" in err


PREVIEWS = {
    out: _kelab_job(
        "preview", "Pi-Locomotion-v0", "--headless", "--seconds", "0.4", "--out", out,
        in_a_new_folder=True,
    )
    for out in ["shot.png", "clip.mp4", "new/dir/shot.png"]
}  # fmt: skip


# imageio-ffmpeg (0.6) leaves ffmpeg's pipes open once a read reaches the end of an mp4
@pytest.mark.filterwarnings("ignore:unclosed file <_io.Buffered:ResourceWarning")
@pytest.mark.parametrize(
    "out", [pytest.param(out, marks=pytest.mark.prestart(job)) for out, job in PREVIEWS.items()]
)
def test_headless_preview_writes_a_picture_or_a_video(out):
    """A missing --out folder is created (the one rule of play --video, export and plot)."""
    proc = PREVIEWS[out].result()
    folder = proc.folder  # where it ran
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    import imageio.v3 as iio

    frames = iio.imread(folder / out) if out.endswith(".png") else iio.imread(folder / out)
    assert frames.ndim in (3, 4) and frames.size > 0
    assert [p.name for p in (folder / out).parent.iterdir()] == [Path(out).name]  # no temp


def _multi_rate_headless(*extra: str) -> Prestart:
    """``demos/multi_rate.py --headless`` with ``extra`` (``{folder}``: its own folder)."""
    return Prestart(
        lambda folder: (
            [sys.executable, str(DEMOS / "multi_rate.py"), "--headless"]
            + [arg.format(folder=folder) for arg in extra]
        ),
        timeout=60,
    )


ZERO_FRAMES = ("--frames", "0")
DEMO_REFUSALS = {ZERO_FRAMES: _multi_rate_headless(*ZERO_FRAMES)}
OUT_A_FOLDER_DEMO = _multi_rate_headless("--out", "{folder}")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ZERO_FRAMES,
            "--frames must be >= 1",
            marks=[
                pytest.mark.prestart(DEMO_REFUSALS[ZERO_FRAMES]),
                pytest.mark.prestart(OUT_A_FOLDER_DEMO),
            ],
        )
    ],
)
def test_demo_scripts_refuse_zero_frames_and_directory_out(args, expected):
    for job, msg in ((DEMO_REFUSALS[args], expected), (OUT_A_FOLDER_DEMO, "must name a .png file")):
        proc = job.result()
        assert proc.returncode == 2 and msg in proc.stderr and "Traceback" not in proc.stderr


def _options():
    from kelab.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        for action in command._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                yield name, action


def test_every_integer_option_has_a_top_bound():
    # the command refuses a huge value on its line, before an overflow deep inside (or an
    # allocation that runs for minutes) after a run folder was created
    checked = []
    for command, action in _options():
        if action.type is None:
            continue
        try:
            value = action.type("99999999999999999999")
        except argparse.ArgumentTypeError as err:
            checked.append((command, action.dest))
            assert "must be an int <=" in str(err) or "number" in str(err), (command, err)
            continue
        assert not isinstance(value, int), f"kelab {command} {action.option_strings[0]}"
    assert ("train", "seed") in checked and ("eval", "episodes") in checked
    assert ("demo", "num_envs") in checked and ("preview", "seed") in checked


def test_headless_preview_without_out_is_refused_naming_out(tmp_path, monkeypatch, capsys):
    # it simulated 5 s, exited 0 and wrote nothing
    monkeypatch.chdir(tmp_path)
    assert main(["preview", "CartPole-v0", "--headless"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before anything ran
    assert captured.err.splitlines() == [
        "kelab: error: --headless needs --out to keep what it draws; add --out preview.png "
        "(the last frame) or --out preview.mp4 (every step): kelab preview CartPole-v0 "
        "--headless --out preview.png"
    ]
    assert list(tmp_path.iterdir()) == []


def test_every_option_of_every_subcommand_has_help_with_its_default():
    from kelab.cli import build_parser

    parser = build_parser()
    formatter = parser.formatter_class(prog="kelab")
    missing = []
    for command, action in _options():
        where = f"kelab {command} {action.option_strings[-1]}"
        text = formatter._expand_help(action) if action.help else ""
        if not text.strip():
            missing.append(f"{where}: no help")
            continue
        has_default = action.default not in (None, False, argparse.SUPPRESS)
        if has_default and "default" not in formatter._get_help_string(action):
            missing.append(f"{where}: its default {action.default!r} is not shown")
        if action.choices and not all(str(c) in text for c in action.choices):
            missing.append(f"{where}: the choices are not named")
    assert missing == []
    for action in parser._actions:  # the top-level ones too
        assert action.help or not action.option_strings, action.option_strings


# ---------------------------------------------------------------- the command line is the top layer
KELAB_DIR = Path(ke.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """Every kelab module ``path`` imports, at its top or inside a function."""
    import ast

    package = ".".join(path.relative_to(KELAB_DIR.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        package += ".__init__"
    names: set[str] = set()
    for node in source_trees.nodes(path):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: -node.level]
                base = ".".join([*parent, base] if base else parent)
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return {n for n in names if n == "kelab" or n.startswith("kelab.")}


def _is_command_line(module: str) -> bool:
    """A module of the command line: kelab.cli and below, or any ``cli``-named module."""
    return any(part.startswith(("cli", "_cli")) for part in module.split(".")[1:])


def test_nothing_below_the_command_line_imports_it():
    # kelab.train.export imported kelab.train.cli (for shipped_policy), kelab.train.cli
    # imported kelab._cli_args: the command line was spread over three layers
    wrong = []
    for path in sorted(KELAB_DIR.rglob("*.py")):
        rel = path.relative_to(KELAB_DIR)
        if rel.parts[0] == "cli" or rel == Path("__main__.py"):
            continue
        wrong += [f"{rel} imports {m}" for m in sorted(_imports(path)) if _is_command_line(m)]
        module = "kelab." + ".".join(rel.with_suffix("").parts)
        assert not _is_command_line(module), f"{rel} is a command-line module outside kelab/cli/"
    assert wrong == []


def test_every_subcommand_is_registered_in_kelab_cli():
    # kelab plot and kelab export built their parsers in kelab/train/curve.py and export.py
    import ast

    registering = []
    for path in sorted(KELAB_DIR.rglob("*.py")):
        if path.relative_to(KELAB_DIR).parts[0] == "cli":
            continue
        for node in source_trees.nodes(path):
            if isinstance(node, ast.Attribute) and node.attr in ("add_parser", "add_subparsers"):
                registering.append(str(path.relative_to(KELAB_DIR)))
    assert registering == []


def test_the_command_line_modules_import_no_circle():
    # kelab.cli imported kelab.cli_preview, which imported kelab.cli back
    graph: dict[str, set[str]] = {}
    for path in sorted(KELAB_DIR.rglob("*.py")):
        parts = path.relative_to(KELAB_DIR.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if _is_command_line(module):
            graph[module] = {m for m in _imports(path) if _is_command_line(m) and m != module}
    assert "kelab.cli" in graph and len(graph) > 1

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert [m for m in graph if reaches(m, m, {m})] == []


_HELP_AND_DEMO_CODE = (
    "import argparse, contextlib, io, sys\n"
    "from kelab.cli import build_parser, main\n"
    "sub = next(a for a in build_parser()._actions\n"
    "           if isinstance(a, argparse._SubParsersAction))\n"
    "names = list(sub.choices)\n"
    "assert {'demo', 'preview', 'train', 'play', 'eval', 'export', 'plot'} <= set(names)\n"
    "for args in [['--help']] + [[name, '--help'] for name in names]:\n"
    "    with contextlib.redirect_stdout(io.StringIO()):\n"
    "        try:\n"
    "            main(args)\n"
    "        except SystemExit as exit:\n"
    "            assert exit.code == 0, (args, exit.code)\n"
    "quiet = contextlib.redirect_stdout(io.StringIO())\n"
    "with quiet, contextlib.redirect_stderr(io.StringIO()):\n"
    "    main(['demo', '--seconds', '0.1', '--num-envs', '1'])\n"
    "heavy = ('torch', 'rsl_rl', 'ray', 'onnx', 'matplotlib', 'tensordict')\n"
    "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
)
HELP_AND_DEMO = Prestart([sys.executable, "-c", _HELP_AND_DEMO_CODE], cwd=Path.cwd(), timeout=120)


@pytest.mark.prestart(HELP_AND_DEMO)
def test_help_and_demo_import_no_heavy_package():
    # `kelab --help`, every subcommand's --help and `kelab demo` stay cheap: torch, rsl_rl,
    # ray, onnx and matplotlib load only when a subcommand that needs them runs
    proc = HELP_AND_DEMO.result()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ---------------------------------------------------------------- the executable's exit
_EXIT_PROBE = """
import atexit, pathlib, sys, threading, time
out = pathlib.Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
if sys.argv[2] == "thread":  # a non-daemon thread still working when the command ends
    def late():
        time.sleep(0.5)
        (out / "thread").write_text("done")
    threading.Thread(target=late).start()
print("buffered", end="")  # no newline: still in the pipe's buffer when run() ends
sys.argv = ["kelab", "plot", str(out / "missing")]
from kelab.cli import run
run()
"""


@pytest.mark.parametrize("thread", ["none", "thread"])
def test_the_executable_exits_like_python(tmp_path, thread):
    """``run()`` (the ``kelab`` executable) skips only the interpreter's teardown.

    The exit code is ``main``'s; the atexit handlers run; buffered output reaches the
    pipe; a non-daemon thread still running is waited for.
    """
    proc = subprocess.run(
        [sys.executable, "-c", _EXIT_PROBE, str(tmp_path), thread],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr  # kelab plot of a missing run dir
    assert proc.stdout == "buffered"
    assert "must be a run directory" in proc.stderr
    assert (tmp_path / "atexit").read_text() == "ran"
    if thread == "thread":
        assert (tmp_path / "thread").read_text() == "done"


def test_python_m_kelab_uses_the_prompt_exit():
    import kelab.__main__ as entry

    assert entry.run is ke.cli.run
