"""kelab train / play / eval: exit codes and outputs (short real runs, in-process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kelab.cli import main
from kelab.train import cli as train_cli


def test_train_writes_a_run_and_prints_where(tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "CartPole-v0", "--num-envs", "8", "--iterations", "2",
                 "--run-dir", str(run), "--seed", "1"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "training kelab/CartPole-v0: 8 copies" in out.out
    assert f"best:   {run}/best.json" in out.out and f"latest: {run}/latest.json" in out.out
    assert "it     2 (2/2)" in out.err  # the progress line
    assert (run / "metrics.csv").exists() and (run / "training_curve.png").exists()
    # resume from it: the counter goes on
    code = main(["train", "kelab/CartPole-v0", "--iterations", "1", "--run-dir", str(run),
                 "--resume", f"{run}:latest", "--num-envs", "8"])  # fmt: skip
    assert code == 0
    assert json.loads((run / "latest.json").read_text())["iteration"] == 3


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


def test_without_the_extra_train_says_how_to_install(monkeypatch, capsys):
    import kelab.train._deps as deps

    monkeypatch.setattr(deps, "missing_training_packages", lambda: ["torch", "rsl-rl-lib"])
    for command in ("train", "play", "eval"):
        assert main([command, "CartPole-v0"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "pip install 'kelab[train]'" in err[0]
        assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in err[0]


def test_play_without_checkpoint_uses_the_shipped_policy(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(train_cli, "POLICY_DIR", tmp_path)  # a task with no shipped policy
    assert main(["play", "CartPole-v0", "--video", str(tmp_path / "x.gif")]) == 2
    assert "ships no policy for CartPole-v0" in capsys.readouterr().err


def test_kelab_the_app_and_the_envs_never_import_torch():
    code = (
        "import sys, kelab as ke\n"
        "from kelab.tasks.cartpole import CartPoleTask\n"
        "env = ke.LearningEnv(CartPoleTask(), num_envs=2); env.reset(); env.close()\n"
        "ke.DirectRLEnv(CartPoleTask()).close()\n"
        "ke.App; import kelab.train, kelab.train.cli, kelab.tasks.humanoid\n"
        "from kelab.cli import build_parser; build_parser()\n"
        "bad = [m for m in ('torch', 'rsl_rl', 'tensordict', 'safetensors') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
