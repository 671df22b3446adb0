"""Fixtures for the training tests: one tiny real training run shared by the session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from train_helpers import tiny_config

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> dict:
    """A CartPole run of 3 tiny iterations: its run dir and train() statistics."""
    import kelab as ke
    from kelab.tasks.cartpole import CartPoleTask

    run_dir = tmp_path_factory.mktemp("run")
    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    with ke.RLTrainer(
        env, seed=3, run_dir=run_dir, config=tiny_config(), task_id="kelab/CartPole-v0"
    ) as trainer:
        stats = trainer.train(3)
    env.close()
    return {"dir": Path(run_dir), "stats": stats}


@pytest.fixture
def real_window(x_display: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real window on the session X display (Xvfb when DISPLAY is unset)."""
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    return x_display
