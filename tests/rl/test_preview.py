from __future__ import annotations

import argparse

import numpy as np
import pytest

from kelab.cli.preview import add_preview_parser, run_preview
from kelab.tasks.cartpole import CartPoleTask


def test_preview_runs_a_task_and_reports_episodes():
    lines = []
    out = run_preview(
        "CartPole-v0", actions="random", seconds=2.0, render_mode=None, print_fn=lines.append
    )
    assert out["steps"] == 120 and out["episodes"] >= 1
    assert set(out["ended_by"]) <= {"pole fell", "cart left the track"}
    assert lines[0].startswith("previewing CartPoleTask: 120 Hz physics")
    with pytest.raises(ValueError, match="unknown task"):
        run_preview("Nope-v0", render_mode=None)


def test_preview_parser_and_paced_window(monkeypatch, capsys):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    parser = argparse.ArgumentParser(prog="kelab")
    add_preview_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["preview", "kelab/BallToGoal-v0", "--seconds", "0.1"])
    assert args.func(args) == 0
    assert "previewing BallToGoalTask" in capsys.readouterr().out


class OneStep(CartPoleTask):
    """Every episode is cut short after its first step."""

    def get_dones(self):
        terminated, truncated = super().get_dones()
        return terminated, np.ones_like(truncated)


def test_preview_says_one_step_in_the_singular():
    lines = []
    run_preview(f"{__name__}:OneStep", seconds=0.05, render_mode=None, print_fn=lines.append)
    assert any("after 1 step," in line for line in lines), lines
    assert not any("after 1 steps" in line for line in lines)
