"""Progress of training from Python and of ``kelab eval`` within long episodes (#42)."""

from __future__ import annotations

import io
import re
import sys

import pytest
from train_helpers import tiny_config

import kelab as ke
from kelab.cli import build_parser, main
from kelab.cli import play as play_cli
from kelab.errors import UserError
from kelab.tasks.cartpole import CartPoleTask

LINE = re.compile(
    r"(\[[#-]{24}\] )?it +(\d+) \((\d+)/(\d+)\)  (return +-?[\d.]+  "
    r"success +\S+( \(\d+ ep\))?|\(no episode finished yet\))  +[\d.]+k steps/s  ETA \S+"
)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _train(tmp_path, iterations: int, **kwargs) -> dict:
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    try:
        with ke.RLTrainer(env, run_dir=tmp_path / "run", config=tiny_config()) as tr:
            return tr.train(iterations, **kwargs)
    finally:
        env.close()


def test_train_from_python_shows_a_live_line_on_a_terminal(tmp_path, monkeypatch):
    # RLTrainer.train() printed nothing: a long run looked stuck
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    _train(tmp_path, 3)
    text = term.getvalue()
    assert text.startswith("\r") and text.endswith("\n") and text.count("\n") == 1
    shown = [LINE.fullmatch(part.removesuffix("\x1b[K")) for part in text[1:-1].split("\r")]
    assert all(shown), text
    assert [(m[2], m[3], m[4]) for m in shown] == [("1", "1", "3"), ("2", "2", "3"),
                                                   ("3", "3", "3")]  # fmt: skip


def test_train_off_a_terminal_prints_kelab_train_s_lines(tmp_path, capsys):
    # not a terminal (a log, a notebook): the first and last iterations' lines, as
    # kelab train prints them (then one every ~10 s), and the stdout untouched
    _train(tmp_path, 3)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 2, err
    assert [LINE.fullmatch(line)[2] for line in lines] == ["1", "3"]


def test_train_progress_false_shows_nothing_and_a_bad_switch_is_one_line(tmp_path, capsys):
    stats = _train(tmp_path, 2, progress=False)
    assert stats["iterations"] == 2 and capsys.readouterr() == ("", "")
    with pytest.raises(UserError, match=r"^train: progress must be True or False, got 'yes'$"):
        _train(tmp_path / "b", 1, progress="yes")


def test_train_progress_and_a_callback_both_run(tmp_path, capsys):
    rows = []
    stats = _train(tmp_path, 5, callback=lambda row: rows.append(row) or len(rows) == 2)
    assert stats["stopped_by_callback"] and len(rows) == 2
    assert [LINE.fullmatch(x)[2] for x in capsys.readouterr().err.splitlines()] == ["1", "2"]


def test_kelab_train_shows_its_line_once(tmp_path, capsys):
    assert main(["train", "CartPole-v0", "--num-envs", "8", "--iterations", "2",
                 "--run-dir", str(tmp_path / "r")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("(2/2)") == 1 and err.count("(1/2)") == 1, err  # not the trainer's too


def test_eval_shows_steps_before_the_first_episode_ends(trained_run, monkeypatch):
    # kelab eval of 100 parallel fixed-length episodes said nothing until they all ended
    # together: the line counted finished episodes only
    class Clock:
        now = 0.0

        def __call__(self) -> float:
            Clock.now += 5.0  # every look at the clock is 5 s later: a line every 2 steps
            return Clock.now

    real = play_cli.EvalProgress
    monkeypatch.setattr(play_cli, "EvalProgress", lambda *a, **k: real(*a, **k, clock=Clock()))
    spec = f"{trained_run['dir']}:best"
    args = build_parser().parse_args(
        ["eval", "CartPole-v0", "--checkpoint", spec, "--episodes", "8", "--num-envs", "8"]
    )
    out, err = io.StringIO(), io.StringIO()
    assert play_cli.run_eval(args, out, err) == 0
    lines = err.getvalue().splitlines()
    limit = ke.LearningEnv(CartPoleTask(), num_envs=1).max_episode_length
    assert lines[0] == f"eval: 0/8 episodes  step 2/{limit:,}  0.2 steps/s  ETA {_eta(limit)}"
    assert all(re.fullmatch(r"eval: \d/8 episodes  step \d+/[\d,]+  .*", x) for x in lines)


def _eta(limit: int) -> str:
    from kelab.cli.progress import format_duration

    return format_duration((limit - 2) / 0.2)
