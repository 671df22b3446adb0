"""kelab train / play / eval: exit codes and outputs (short real runs, in-process)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prestart import Prestart

from kelab.cli import main, progress
from kelab.cli import play as play_cli
from kelab.cli.train import summary_line
from kelab.train import shipped as shipped_policies
from kelab.train.checkpoint import load_checkpoint


def test_train_writes_a_run_and_prints_where(tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "CartPole-v0", "--num-envs", "8", "--iterations", "2",
                 "--run-dir", str(run), "--seed", "1"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "training kelab/CartPole-v0: 8 copies" in out.out
    assert f"best:   {run}/best.json" in out.out and f"latest: {run}/latest.json" in out.out
    assert "it     2 (2/2)" in out.err  # the progress line
    done = next(line for line in out.out.splitlines() if line.startswith("done:"))
    assert re.fullmatch(
        r"done: 2 iterations, 256 env steps in \d+\.\d s \([\d,]+ steps/s\); mean return "
        r"-?\d+\.\d, success rate \d+% over \d+ training episodes? \(with exploration noise\)",
        done,
    ), done
    assert (run / "metrics.csv").exists() and (run / "training_curve.png").exists()
    # resume from it: the counter goes on
    code = main(["train", "kelab/CartPole-v0", "--iterations", "1", "--run-dir", str(run),
                 "--resume", f"{run}:latest", "--num-envs", "8"])  # fmt: skip
    assert code == 0
    assert json.loads((run / "latest.json").read_text())["iteration"] == 3
    out = capsys.readouterr().out
    assert ", up to 1 iteration (stops at the target), seed 42;" in out  # singular
    done = next(line for line in out.splitlines() if line.startswith("done:"))
    assert done.startswith("done: 1 iteration (resumed at iteration 2, now 3), 384 env steps")
    assert "None" not in done
    assert re.search(r"mean return (-?\d+\.\d|n/a)", done), done


def test_a_resume_goes_on_with_its_runs_config_and_refuses_another_network(tmp_path, capsys):
    """A run trained with network options resumes without them (its checkpoint's config,
    the options given on top); a network option that differs is named, not blamed on the
    checkpoint (a new user resumed a --share-cnn run and was told it was damaged)."""
    run = tmp_path / "run"
    common = ["--num-envs", "8", "--run-dir", str(run)]
    assert main(["train", "CartPole-v0", "--iterations", "1", "--actor-hidden-dims", "16",
                 "16", "--no-stop-at-target", *common]) == 0  # fmt: skip
    assert main(["train", "CartPole-v0", "--iterations", "1", "--resume", f"{run}:latest",
                 *common]) == 0  # fmt: skip
    meta = json.loads((run / "latest.json").read_text())
    assert meta["iteration"] == 2 and meta["train_config"]["actor_hidden_dims"] == [16, 16]
    assert meta["train_config"]["stop_at_target"] is False  # the run's, not the task's
    capsys.readouterr()
    code = main(["train", "CartPole-v0", "--iterations", "1", "--resume", f"{run}:latest",
                 "--actor-hidden-dims", "32", *common])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert (
        "with actor_hidden_dims=(32,): its run was trained with actor_hidden_dims=(16, 16)"
        in (err[0])
        and "leave --actor-hidden-dims out" in err[0]
    )


def test_no_stop_at_target_trains_every_iteration(tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "CartPole-v0", "--num-envs", "8", "--iterations", "2",
                 "--run-dir", str(run), "--no-stop-at-target"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert ", 2 iterations, seed 42;" in out  # no "up to": the config's stop is off
    config = json.loads((run / "latest.json").read_text())["train_config"]
    assert config["stop_at_target"] is False


def test_eval_prints_the_report_and_json(trained_run, capsys):
    spec = f"{trained_run['dir']}:best"
    assert main(["eval", "CartPole-v0", "--checkpoint", spec, "--episodes", "4"]) == 0
    out = capsys.readouterr().out
    assert "Evaluation report" in out and "success (balanced)" in out and "pole fell" in out
    assert main(["eval", "CartPole-v0", "--checkpoint", spec, "--episodes", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["episodes"] == 4 and data["task"] == "kelab/CartPole-v0"
    assert set(data["ended_by"]) >= {"pole fell", "cart left the track", "time limit"}


def test_play_records_a_video(trained_run, tmp_path, capsys):
    out = tmp_path / "cartpole.gif"
    spec = f"{trained_run['dir']}:best"
    args = ["play", "CartPole-v0", "--checkpoint", spec, "--episodes", "1", "--video", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "episode 1: return" in text and f"video: {out}" in text
    assert out.read_bytes()[:6] == b"GIF89a"


def test_play_interactive_prints_each_episode_once_as_it_ends(trained_run, real_window, capsys):
    spec = f"{trained_run['dir']}:best"  # 3 iterations of training: the pole soon falls
    args = ["play", "CartPole-v0", "--checkpoint", spec, "--interactive", "--episodes", "1"]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len([line for line in lines if line.startswith("episode ")]) == 1
    assert lines[-1].startswith("episode 1: return ")


def test_user_errors_exit_2_with_one_line(trained_run, tmp_path, capsys):
    assert main(["train", "NoSuchTask-v0"]) == 2
    assert "unknown task 'NoSuchTask-v0'; use a built-in task (CartPole" in capsys.readouterr().err
    assert main(["eval", "CartPole-v0", "--checkpoint", str(tmp_path / "none.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    spec = f"{trained_run['dir']}:best"
    assert main(["eval", "BallToGoal-v0", "--checkpoint", spec, "--episodes", "2"]) == 2
    assert "observation_dim=4, action_dim=1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["train", "CartPole-v0", "--iterations", "0"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "kelab train: error: argument --iterations: iterations must be an int >= 1, got 0; "
        "see kelab train --help"
    ]


def test_a_wrong_case_task_id_gets_a_suggestion(capsys):
    assert main(["train", "cartpole-v0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("kelab: error: unknown task 'cartpole-v0'; ")
    assert "did you mean CartPole-v0?" in err[0]
    assert "--debug" not in err[0]  # a user error: the traceback shows nothing useful
    assert main(["eval", "kelab/ball-to-goal-v0"]) == 2
    assert "did you mean BallToGoal-v0?" in capsys.readouterr().err
    assert main(["eval", "Qwerty-v9"]) == 2
    assert "did you mean" not in capsys.readouterr().err  # nothing close: no guess


def test_the_weights_file_as_checkpoint_says_to_pass_the_json(capsys):
    shipped = shipped_policies.shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    weights = shipped.parent / json.loads(shipped.read_text())["weights"]["file"]
    for command in ("eval", "play"):
        assert main([command, "CartPole-v0", "--checkpoint", str(weights)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [
            f"kelab: error: checkpoint {str(weights)!r} is a .safetensors weights file; pass "
            f"the checkpoint's .json (or RUN_DIR:best), not its weights file: {shipped}"
        ]


def _row(iteration: int) -> dict:
    return {"iteration": iteration, "mean_return": 20.0 + iteration, "success_rate": 0.5,
            "env_steps_per_s": 5000.0}  # fmt: skip


def test_the_progress_shows_the_last_iteration_when_the_run_ends_early():
    # not a terminal: a line every ~10 s, so a run stopped at its target (or interrupted)
    # after 3 of 400 planned iterations printed only iteration 1 before close()
    out = io.StringIO()
    bar = progress.ProgressBar(400, 0, out)
    for it in (1, 2, 3):
        bar(_row(it))
    assert [line.split("]")[1].split("  return")[0] for line in out.getvalue().splitlines()] == [
        " it     1 (1/400)"
    ]
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "it     3 (3/400)  return    23.00" in lines[1]
    bar.close()  # a second close prints nothing more
    assert out.getvalue().splitlines() == lines

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    bar = progress.ProgressBar(400, 0, tty)
    for it in (1, 2, 3):
        bar(_row(it))
    bar.close()
    assert "it     3 (3/400)" in tty.getvalue().split("\r")[-1] and tty.getvalue().endswith("\n")
    assert tty.getvalue().split("\r")[-1].startswith("it     3")  # no room for a bar


def test_the_progress_line_fits_a_narrow_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "60")  # shutil.get_terminal_size reads it first: no bar
    tty = Terminal()
    bar = progress.ProgressBar(400, 0, tty)
    bar(_row(1))
    bar.close()
    monkeypatch.setenv("COLUMNS", "80")
    wide = Terminal()
    bar = progress.ProgressBar(400, 0, wide)
    bar.evaluated = 0.95
    bar(_row(2))
    assert wide.getvalue().split("\r")[-1].endswith("ETA 0s\x1b[K")  # nothing cut off
    line = tty.getvalue().split("\r")[-1].rstrip("\n").removesuffix("\x1b[K")
    assert len(line) <= 59 and line.startswith("it 1 (1/400) return 21.00 success")


def test_the_summary_rounds_and_says_why_a_number_is_missing():
    stats = {"iterations": 12, "env_steps": 9600, "wall_time_s": 3.21, "env_steps_per_s": 2990.6,
             "last_reward": 97.96035585950536, "success_rate": 0.02, "episodes": 40,
             "interrupted": False}  # fmt: skip
    assert summary_line(stats) == (
        "done: 12 iterations, 9,600 env steps in 3.2 s (2,991 steps/s); mean return 98.0, "
        "success rate 2% over 40 training episodes (with exploration noise)"
    )
    no_rule = {**stats, "success_rate": None, "iterations": 1, "interrupted": True}
    assert summary_line(no_rule).startswith("interrupted: 1 iteration, ")
    assert "success rate n/a (the task has no success rule)" in summary_line(no_rule)
    resumed = {**stats, "last_reward": None, "success_rate": None, "episodes": 0}
    assert summary_line(resumed, start_iteration=11) == (
        "done: 1 iteration (resumed at iteration 11, now 12), 9,600 env steps in 3.2 s in all "
        "(2,991 steps/s since the resume); mean return n/a, success rate n/a (no training "
        "episode ended in this run)"
    )


def test_help_shows_the_defaults(capsys):
    expected = {
        "train": ["--seed SEED", "(default: 42)", "runs/<TaskClass>/<UTC time>",
                  "(default: the task's max_iterations)"],
        "play": ["(default: 0)", "episodes to play (default: 3; with --interactive, until the "
                 "window is closed)", "(default: the task's shipped policy)",
                 "--video OUT"],
        "eval": ["(default: 1000)", "episodes judged (default: 100)"],
    }  # fmt: skip
    for command, parts in expected.items():
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        for part in parts:
            assert part in text, (command, part, text)
        assert "(default: None)" not in text and "(default: False)" not in text


#: ``python -m kelab play CartPole-v0 --episodes 1`` (kelab/__main__.py runs ``run()``) with
#: CartPole's episodes cut to 0.5 s: play paces them in real time, and the task's own 5 s
#: episode was 4 s of this test's 5.5
PLAY_A_SHORT_CARTPOLE = (
    "import sys; from kelab.tasks.cartpole import CartPoleTask; "
    "CartPoleTask.episode_length_s = 0.5; from kelab.cli import run; "
    "sys.argv = ['kelab', 'play', 'CartPole-v0', '--episodes', '1']; run()"
)


PLAY_WITHOUT_A_DISPLAY = Prestart(  # started early, beside the suite (tests/prestart.py)
    [sys.executable, "-c", PLAY_A_SHORT_CARTPOLE],
    env={k: v for k, v in os.environ.items()
         if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")},
    timeout=300,
)  # fmt: skip


@pytest.mark.prestart(PLAY_WITHOUT_A_DISPLAY)
def test_play_without_a_display_warns_once_in_one_line():
    proc = PLAY_WITHOUT_A_DISPLAY.result()
    assert proc.returncode == 0, proc.stderr
    assert "episode 1: return" in proc.stdout
    err = proc.stderr.splitlines()
    assert len(err) == 1, proc.stderr  # no "path.py:636: RuntimeWarning" and source line
    assert err[0].startswith("kelab: warning: no display")
    assert "--video out.mp4 records them" in err[0]


MY_TASK = """from kelab.tasks.cartpole import CartPoleTask


class MyCart(CartPoleTask):
    pass
"""


def _eval_from_a_folder_with_mytask(*args: str) -> Prestart:
    """``kelab eval ARGS`` run as the console script runs it, in a folder holding
    mytask.py, started early, beside the suite (tests/prestart.py)."""
    # the `kelab` console script does not put the current folder on sys.path; -P does the
    # same to `python -c`, so this runs the command as the console script would
    shipped = str(shipped_policies.shipped_policy("kelab.tasks.cartpole:CartPoleTask"))
    command = [sys.executable, "-P", "-c", "import sys; from kelab.cli import main; "
               "assert sys.path[0] != ''; sys.exit(main())"]  # fmt: skip

    def in_folder(folder: Path) -> list[str]:
        (folder / "mytask.py").write_text(MY_TASK)
        return [*command, "eval", *args, "--checkpoint", shipped]

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return Prestart(in_folder, env=env, timeout=300)


MY_TASK_EVAL = _eval_from_a_folder_with_mytask("mytask:MyCart", "--episodes", "2")
NOT_MY_TASK_EVAL = _eval_from_a_folder_with_mytask("notmytask:MyCart")


@pytest.mark.prestart(MY_TASK_EVAL)
@pytest.mark.prestart(NOT_MY_TASK_EVAL)
def test_a_task_module_in_the_current_folder_imports_like_python_m():
    proc = MY_TASK_EVAL.result()
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.startswith("mytask:MyCart  checkpoint ") and "Evaluation report" in proc.stdout
    )
    proc = NOT_MY_TASK_EVAL.result()
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "kelab: error: cannot import module 'notmytask' of task 'notmytask:MyCart': no "
        f"'notmytask' in the current folder ({proc.folder.resolve()}) or on sys.path; run "
        "from the folder that contains notmytask.py (or the notmytask package) or add that "
        "folder to PYTHONPATH"
    ]


def test_without_the_extra_train_says_how_to_install(monkeypatch, capsys):
    import kelab.train.extra as deps

    monkeypatch.setattr(deps, "missing_training_packages", lambda: ["torch", "rsl-rl-lib"])
    for command in ("train",):  # play and eval need no extra (tests/train/test_numpy_actor.py)
        assert main([command, "CartPole-v0"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "pip install 'kelab[train]'" in err[0]
        assert err[0].startswith("kelab: error: torch, rsl-rl-lib not installed; "), err
        assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in err[0]


def test_play_without_checkpoint_uses_the_shipped_policy(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shipped_policies, "POLICY_DIR", tmp_path)  # a task with no shipped policy
    assert main(["play", "CartPole-v0", "--video", str(tmp_path / "x.gif")]) == 2
    assert "ships no policy for CartPole-v0" in capsys.readouterr().err


NO_TORCH = Prestart(  # a fresh interpreter, started early, beside the suite (tests/prestart.py)
    [
        sys.executable,
        "-c",
        "import sys, kelab as ke\n"
        "from kelab.tasks.cartpole import CartPoleTask\n"
        "env = ke.LearningEnv(CartPoleTask(), num_envs=2); env.reset(); env.close()\n"
        "ke.DirectRLEnv(CartPoleTask()).close()\n"
        "ke.App; import kelab.train, kelab.train.shipped, kelab.tasks.humanoid\n"
        "from kelab.cli import build_parser; build_parser()\n"
        "bad = [m for m in ('torch', 'rsl_rl', 'tensordict', 'safetensors') if m in sys.modules]\n"
        "assert not bad, bad\n",
    ],
    cwd=Path.cwd(),
    timeout=120,
)


@pytest.mark.prestart(NO_TORCH)
def test_kelab_the_app_and_the_envs_never_import_torch():
    NO_TORCH.result().check_returncode()


def test_too_many_copies_names_the_cli_fix(tmp_path, capsys):
    code = main(["train", "CartPole-v0", "--num-envs", "100000", "--run-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "--num-envs 100000 is more copies than kelab/CartPole-v0 fits here; pass " in err
    assert "--num-envs 16384 or fewer" in err


def test_sigterm_stops_the_run_like_ctrl_c_and_saves_latest(tmp_path):
    run_dir = tmp_path / "run"

    def rows() -> int:  # metrics.csv's lines: its header, then one an iteration
        path = run_dir / "metrics.csv"
        return path.read_text().count("\n") if path.exists() else 0

    command = [
        sys.executable, "-m", "kelab", "train", "Humanoid-v0", "--num-envs", "16",
        "--iterations", "1000", "--no-stop-at-target", "--run-dir", str(run_dir),
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while rows() < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # some iterations in (Humanoid-v0 overlaps its update: a process)
        # to the whole group, as systemd or `kill -- -PGID` do: the learner process
        # gets it too, and leaves the stop to the trainer
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in out and "Traceback" not in err
    latest = load_checkpoint(f"{run_dir}:latest")
    assert 1 <= latest.meta["iteration"] < 1000


def _play_returns(capsys, spec: str, video: Path, seed: str) -> list[str]:
    args = ["play", "CartPole-v0", "--checkpoint", spec, "--episodes", "2",
            "--video", str(video), "--seed", seed]  # fmt: skip
    assert main(args) == 0
    return re.findall(r"episode \d: return (-?[\d.]+), (\d+) steps", capsys.readouterr().out)


def test_play_and_eval_seed_sets_the_episodes(trained_run, tmp_path, capsys):
    # --seed was ignored by play: the player reset with its own seed 0 whatever was given
    # (.mp4, not .gif: the seed does not depend on the format, and GIF quantizing was ~4 s a play)
    spec = f"{trained_run['dir']}:best"
    first = _play_returns(capsys, spec, tmp_path / "a.mp4", "0")
    other = _play_returns(capsys, spec, tmp_path / "b.mp4", "5")
    again = _play_returns(capsys, spec, tmp_path / "c.mp4", "5")
    assert len(first) == 2 and other == again and other != first

    def report(seed: str) -> dict:
        args = ["eval", "CartPole-v0", "--checkpoint", spec, "--episodes", "4", "--json"]
        assert main([*args, "--seed", seed]) == 0
        return json.loads(capsys.readouterr().out)

    five = report("5")
    assert report("5") == five and five != report("6")


def _argument_error(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    return err[0]


def test_run_dir_naming_a_file_says_it_must_be_a_folder(tmp_path, capsys):
    # was "kelab: error: File exists: ..." (the trainer's mkdir)
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    line = _argument_error(capsys, "train", "CartPole-v0", "--run-dir", str(file))
    assert line == (
        f"kelab train: error: argument --run-dir: run-dir must be a folder, got the file "
        f"'{file}'; name a new folder (or the run being resumed) instead of a file; see "
        "kelab train --help"
    )
    assert file.read_text() == "mine"


def test_an_empty_run_dir_is_refused_not_the_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # '' trained into the current folder
    line = _argument_error(capsys, "train", "CartPole-v0", "--run-dir", "", "--iterations", "1")
    assert "argument --run-dir: run-dir must be a folder path, got ''" in line
    assert list(tmp_path.iterdir()) == []


def test_a_task_module_that_raises_on_import_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "kelab_broken_task.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for command in ("train", "eval", "preview"):  # was a 31-line traceback
        assert main([command, "kelab_broken_task:Task"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert err == [
            "kelab: error: cannot import module 'kelab_broken_task' of task "
            "'kelab_broken_task:Task': RuntimeError: boom at import; fix the error in "
            "kelab_broken_task (kelab --debug ... shows where it was raised)"
        ]
    # nothing made but the import's bytecode (where Python writes it)
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")
    assert made == ["kelab_broken_task.py"]


HUGE = "99999999999999999999"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("train", "CartPole-v0", "--seed", HUGE), "seed must be an int <= 18446744073709551615"),
        (("train", "CartPole-v0", "--iterations", HUGE), "iterations must be an int <= 1000000000"),
        (("train", "CartPole-v0", "--num-envs", HUGE), "num-envs must be an int <= 1000000 "),
        (("eval", "CartPole-v0", "--episodes", HUGE), "episodes must be an int <= 1000000000"),
        (("play", "CartPole-v0", "--seed", HUGE), "seed must be an int <= 18446744073709551615"),
    ],
)
def test_integer_options_out_of_range_fail_before_anything_is_created(
    tmp_path, monkeypatch, capsys, args, message
):
    # --seed 10**20 said "Overflow when unpacking long long" and left an empty run folder
    monkeypatch.chdir(tmp_path)
    line = _argument_error(capsys, *args)
    assert message in line and f"got {HUGE}" in line
    assert list(tmp_path.iterdir()) == []


def test_the_trainer_refuses_a_seed_torch_cannot_take_before_claiming(tmp_path):
    import kelab as ke
    from kelab.tasks.cartpole import CartPoleTask

    env = ke.LearningEnv(CartPoleTask(), num_envs=2, seed=0)
    try:
        with pytest.raises(ValueError, match=r"^seed must be an int <= 18446744073709551615"):
            ke.RLTrainer(env, seed=2**64, run_dir=tmp_path / "run")
        assert not (tmp_path / "run").exists()
        for bad, words in (
            ("", "must be a folder path, got ''"),
            (tmp_path / "f", "must be a folder, got the file"),
        ):
            if bad:
                bad.write_text("x")
            with pytest.raises(ValueError, match=f"^run_dir {words}"):
                ke.RLTrainer(env, run_dir=bad)
    finally:
        env.close()


def test_interactive_play_without_a_display_gives_command_line_advice(monkeypatch, capsys):
    # was the App's "pass headless=True for offscreen rendering" (advice for Python)
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(name, raising=False)
    assert main(["play", "CartPole-v0", "--interactive"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "kelab: error: --interactive needs a display for its window (DISPLAY and "
        "WAYLAND_DISPLAY are unset); record the episodes offscreen instead (kelab play "
        "CartPole-v0 --video play.mp4), or run under a virtual display (xvfb-run -a kelab "
        "play CartPole-v0 --interactive)"
    ]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_eval_shows_progress_and_ctrl_c_prints_the_finished_episodes(trained_run, monkeypatch):
    # a long eval ran silently, and Ctrl-C printed only "kelab: interrupted"
    from kelab.cli import build_parser
    from kelab.rl.env import LearningEnv

    real_step, steps = LearningEnv.step, [0]

    def step(self, actions):
        steps[0] += 1
        if steps[0] == 400:  # Ctrl-C, some 20-step episodes in
            raise KeyboardInterrupt
        return real_step(self, actions)

    monkeypatch.setattr(LearningEnv, "step", step)
    spec = f"{trained_run['dir']}:best"
    args = build_parser().parse_args(
        ["eval", "CartPole-v0", "--checkpoint", spec, "--episodes", "1000000", "--num-envs", "8"]
    )
    out, err = io.StringIO(), _Terminal()
    assert play_cli.run_eval(args, out, err) == 130
    live = re.findall(
        r"\reval: ([\d,]+)/1,000,000 episodes  step [\d,]+/[\d,]+  [\d,.]+ steps/s  ETA \S+",
        err.getvalue(),
    )
    # from the first step on; the first finished ones are shown as they end
    assert live and live[0] == "0" and any(int(n.replace(",", "")) >= 1 for n in live)
    finished = re.search(
        r"interrupted after ([\d,]+) of 1,000,000 episodes; the report of the episodes finished:",
        err.getvalue(),
    )
    assert finished, err.getvalue()
    count = int(finished.group(1).replace(",", ""))
    assert count > 8
    assert re.search(rf"episodes\s+{count}\n", out.getvalue()), out.getvalue()
    # --json says it too
    steps[0] = 0
    args.json = True
    out = io.StringIO()
    assert play_cli.run_eval(args, out, io.StringIO()) == 130
    data = json.loads(out.getvalue())
    assert data["episodes"] == count and data["interrupted"] == {"episodes_asked": 1000000}


def test_eval_progress_prints_a_line_every_10_s_off_a_terminal():
    now = [0.0]
    out = io.StringIO()
    bar = progress.EvalProgress(1000, out, clock=lambda: now[0])
    for done in range(1, 11):
        now[0] += 4.0  # an episode per 4 s: lines at 12 s (3 episodes), 24 s, 36 s
        bar(done)
    bar.close()
    assert out.getvalue().splitlines() == [
        "eval: 3/1,000 episodes  0.2 episodes/s  ETA 1h06m",
        "eval: 6/1,000 episodes  0.2 episodes/s  ETA 1h06m",
        "eval: 9/1,000 episodes  0.2 episodes/s  ETA 1h06m",
    ]


def test_play_video_suffix_is_checked_up_front_in_the_clis_words(tmp_path, capsys):
    """--video x.avi: the CLI's own one line (it was the VideoRecorder's), nothing written."""
    assert main(["play", "CartPole-v0", "--video", str(tmp_path / "new" / "x.avi")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("kelab: error: --video must end in .mp4 or .gif, got "), err
    assert "x.avi" in err and not (tmp_path / "new").exists()


def test_plot_creates_a_missing_out_folder(trained_run, tmp_path, capsys):
    """plot --out follows the one rule of every --out: a missing folder is created."""
    out = tmp_path / "new" / "curves.png"
    assert main(["plot", str(trained_run["dir"]), "--out", str(out)]) == 0, capsys.readouterr()
    assert out.is_file()


def test_a_success_rate_says_how_many_episodes_it_is_over():
    """A rate from 1 or 2 episodes must not read like a run's verdict (#39 item 2)."""
    stats = {"iterations": 1, "env_steps": 96, "wall_time_s": 0.5, "env_steps_per_s": 192.0,
             "last_reward": 3.0, "success_rate": 1.0, "episodes": 2,
             "interrupted": False}  # fmt: skip
    assert summary_line(stats).endswith(
        "success rate 100% over 2 training episodes (with exploration noise)"
    )
    # the rate is over the window of recent episodes, not every episode of the run
    many = {**stats, "episodes": 5000, "success_rate": 0.34}
    assert summary_line(many, window=200).endswith(
        "success rate 34% over the last 200 training episodes (with exploration noise)"
    )
    out = io.StringIO()
    bar = progress.ProgressBar(1, 0, out, window=200)
    bar({**_row(1), "success_rate": 1.0, "episodes": 1})
    assert "success  1.00 (1 ep)  " in out.getvalue()
    out = io.StringIO()
    bar = progress.ProgressBar(1, 0, out, window=200)
    bar({**_row(1), "episodes": 900})
    assert "success  0.50 (200 ep)  " in out.getvalue()


def test_a_config_refused_after_the_run_dir_was_named_leaves_it_unclaimed(tmp_path, capsys):
    # the trial (2026-12-06): "--cnn-kernels 40" was refused after the run dir was claimed,
    # and the corrected command was refused ("already holds the start of a run")
    run = tmp_path / "runs" / "bad1"
    code = main(["train", "CartPole-Pixels-v0", "--iterations", "1", "--num-envs", "2",
                 "--cnn-channels", "8", "--cnn-kernels", "40", "--cnn-strides", "2",
                 "--run-dir", str(run)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "convolution 1 (kernel 40, stride 2) does not fit its 36x64" in err
    assert not (tmp_path / "runs").exists()  # nothing claimed, no folder left
