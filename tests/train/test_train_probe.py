"""Fault probes of ``kelab train``'s start-up change (#30): the curve process and the log.

Each command runs in a subprocess with a timeout; no test asserts a wall-clock time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from prestart import Prestart
from train_helpers import tiny_config

PNG = b"\x89PNG\r\n\x1a\n"


def _train_command(run_dir: Path) -> list[str]:
    """``kelab train`` for two CartPole iterations into ``run_dir``."""
    kelab = [sys.executable, "-m", "kelab"]
    return [*kelab, "train", "CartPole-v0", "--run-dir", str(run_dir), "--iterations", "2"]


def _train_with_a_broken_matplotlib(folder: Path) -> list[str]:
    fake = folder / "fake"
    fake.mkdir()
    (fake / "matplotlib.py").write_text('raise ImportError("matplotlib is broken (probe)")\n')
    return _train_command(folder / "run")


BROKEN_MATPLOTLIB = Prestart(  # ~2 s of kelab train, started early (tests/prestart.py)
    _train_with_a_broken_matplotlib,
    env=lambda folder: {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(folder / "fake"), os.environ.get("PYTHONPATH")) if p
        ),
    },
    timeout=300,
)


@pytest.mark.prestart(BROKEN_MATPLOTLIB)
def test_a_broken_matplotlib_ends_a_finished_run_with_a_warning_not_an_error():
    """matplotlib found but failing to import: the run is saved, says so, and exits 0."""
    proc = BROKEN_MATPLOTLIB.result()
    run = proc.folder / "run"
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "done: 2 iterations" in proc.stdout
    warning = [line for line in proc.stderr.splitlines() if "training_curve.png" in line]
    assert len(warning) == 1, proc.stderr[-2000:]
    assert warning[0].startswith("kelab: warning: ")
    assert "matplotlib is broken (probe)" in warning[0]
    assert "kelab plot" in warning[0]  # what to do about it
    assert (run / "latest.json").is_file()
    assert not (run / "training_curve.png").exists()
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]


def _trainer(run_dir: Path, drawer):
    import kelab as ke
    from kelab.tasks.cartpole import CartPoleTask
    from kelab.train.trainer import RLTrainer

    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=0)
    trainer = RLTrainer(env, seed=0, run_dir=run_dir, config=tiny_config(), curve_process=drawer)
    return env, trainer


def test_a_curve_process_closed_before_the_trainer_still_leaves_the_curve(tmp_path):
    """Its owner closes the drawer first (the last drawing dropped): the trainer draws it."""
    from kelab.train.curve_process import CurveProcess

    drawer = CurveProcess()
    env, trainer = _trainer(tmp_path / "run", drawer)
    try:
        trainer.train(2)
        drawer.close()  # the drawing train() sent is dropped with the process
        trainer.close()
    finally:
        drawer.close()
        env.close()
    assert (tmp_path / "run" / "training_curve.png").read_bytes()[:8] == PNG


def test_a_killed_curve_process_leaves_the_trainer_drawing_itself(tmp_path):
    """SIGKILL the curve process: the run goes on and the trainer draws the PNG."""
    from kelab.train.curve_process import CurveProcess

    drawer = CurveProcess()
    env, trainer = _trainer(tmp_path / "run", drawer)
    try:
        trainer.train(1)
        os.kill(drawer._proc.pid, signal.SIGKILL)
        drawer._proc.join(timeout=30)
        trainer.train(1)
        trainer.close()
    finally:
        drawer.close()
        env.close()
    assert (tmp_path / "run" / "training_curve.png").read_bytes()[:8] == PNG


def test_the_target_line_names_no_later_best_as_the_policy_that_met_it():
    """--no-stop-at-target: best moved on to iteration 60, the target was met at 38."""
    from kelab.cli.train import target_line

    stats = {"target_reached_at": 38, "stopped_at_target": False, "iterations": 60}
    line = target_line(stats, 60)
    assert line is not None
    assert "by the policy of iteration 60" not in line
    assert line.startswith("target met at iteration 38")
    assert "trained on to iteration 60" in line


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_sigkilled_kelab_train_leaves_no_helper_process(tmp_path):
    """SIGKILL mid-run: the curve and eval processes see their pipes close and exit."""
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "kelab", "train", "CartPole-v0", "--run-dir", str(tmp_path / "r")]
        + ["--iterations", "400", "--no-stop-at-target"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("training")  # the helpers are forked
        helpers = _children(proc.pid)
        assert helpers, "kelab train forked no helper process"
    finally:
        proc.kill()
        proc.wait(timeout=60)
        proc.stdout.close()
    deadline = time.monotonic() + 60  # a timeout, not a measurement
    while any(_running(pid) for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in helpers if _running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"helper processes {left} outlived the killed trainer"
