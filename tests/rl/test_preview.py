from __future__ import annotations

import argparse

import pytest

from kelab.cli.preview import add_preview_parser, run_preview


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
