from __future__ import annotations

import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import kelab as ke

IDS = ["kelab/CartPole-v0", "kelab/Humanoid-v0", "kelab/Pi-Locomotion-v0", "kelab/BallToGoal-v0"]


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes(env_id, monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")  # check_env also opens the "human" mode
    env = gymnasium.make(env_id)
    assert isinstance(env.unwrapped, ke.DirectRLEnv)
    check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize(
    "env_id, hz, decimation, names",
    [
        ("kelab/CartPole-v0", 120, 2, ("pole fell", "cart left the track")),
        ("kelab/Humanoid-v0", 120, 2, ("torso fell",)),
        ("kelab/Pi-Locomotion-v0", 1000, 20, ("body fell",)),
        ("kelab/BallToGoal-v0", 120, 2, ("ball stayed at the goal", "ball left the table")),
    ],
)
def test_make_vec_gives_a_learning_env(env_id, hz, decimation, names):
    env = gymnasium.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point")
    assert isinstance(env, ke.LearningEnv) and env.num_envs == 2
    assert env.timing.physics_hz == pytest.approx(hz) and env.timing.decimation == decimation
    env.reset(seed=0)
    env.step(np.zeros(env.action_space.shape, np.float32))
    assert env.task.terminations.names == names
    assert env.task.robot.path is not None and env.task.success_rule is not None
    env.close()


def test_per_episode_values_are_public():
    env = gymnasium.make_vec(
        "kelab/BallToGoal-v0", num_envs=3, vectorization_mode="vector_entry_point"
    )
    env.reset(seed=1)
    goals = env.task.goal_pos.copy()
    assert goals.shape == (3, 2) and len({tuple(g) for g in goals}) == 3
    dist = np.linalg.norm(goals - env.task.ball_pos(), axis=1)
    assert ((dist >= 1.0 - 1e-9) & (dist <= 1.5 + 1e-9)).all()
    pi = gymnasium.make_vec(
        "kelab/Pi-Locomotion-v0", num_envs=2, vectorization_mode="vector_entry_point"
    )
    obs, _ = pi.reset(seed=0)
    assert obs[:, -1].tolist() == pi.task.command.astype(np.float32).tolist()


def test_import_kelab_registers_without_importing_gymnasium():
    code = (
        "import sys, kelab; assert 'gymnasium' not in sys.modules; "
        "import gymnasium; print(sorted(k for k in gymnasium.registry if k.startswith('kelab/')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(sorted(IDS))
    late = "import gymnasium, kelab; print('kelab/Humanoid-v0' in gymnasium.registry)"
    assert (
        subprocess.run([sys.executable, "-c", late], capture_output=True, text=True).stdout.strip()
        == "True"
    )


def test_humanoid_falls_without_control_and_pi_stands():
    env = gymnasium.make_vec(
        "kelab/Humanoid-v0", num_envs=2, vectorization_mode="vector_entry_point"
    )
    report = ke.evaluate(
        env, lambda obs: np.zeros((2, 6), np.float32), episodes=2, seed=0, max_steps=600
    )
    assert report.ended_by["torso fell"] == 2 and report.success_rate == 0.0
