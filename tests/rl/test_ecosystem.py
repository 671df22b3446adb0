"""Gymnasium conventions: check_env without a display, episode statistics, real bounds."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kelab.rl.direct import DirectRLEnv
from kelab.rl.env import LearningEnv
from kelab.rl.task import TaskError
from kelab.tasks.ball_to_goal import BallToGoalTask
from kelab.tasks.cartpole import CartPoleTask
from kelab.tasks.pi_locomotion import MAX_COMMAND, PiLocomotionTask


def test_check_env_passes_with_no_display():
    script = textwrap.dedent(
        """
        import warnings
        import gymnasium
        from gymnasium.utils.env_checker import check_env
        import kelab.tasks
        kelab.tasks.register_tasks()
        for env_id in kelab.tasks.TASK_IDS:
            env = gymnasium.make(env_id)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                check_env(env.unwrapped)
            fell_back = [w for w in caught if "no display is available" in str(w.message)]
            assert fell_back, [str(w.message) for w in caught]  # says it drew offscreen
            env.close()
            print("ok", env_id)
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("SDL_VIDEODRIVER", None)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ok ") == 4


def _random_actions(env, rng):
    return rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)


def test_vector_info_has_record_episode_statistics_layout():
    env = LearningEnv(CartPoleTask(), num_envs=4, seed=0)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    returns = np.zeros(4)
    lengths = np.zeros(4, dtype=int)
    checked = 0
    for _ in range(400):
        _, rewards, terminated, truncated, info = env.step(_random_actions(env, rng))
        returns += rewards
        lengths += 1
        done = terminated | truncated
        if not done.any():
            assert "episode" not in info
            continue
        # CleanRL (Gymnasium 1.x): for i in np.where(info["_episode"])[0]: info["episode"]["r"][i]
        np.testing.assert_array_equal(info["_episode"], done)
        ep = info["episode"]
        assert set(ep) == {"r", "l", "t"}
        np.testing.assert_allclose(ep["r"][done], returns[done], rtol=1e-5)
        np.testing.assert_array_equal(ep["l"][done], lengths[done])
        assert (ep["r"][~done] == 0).all() and (ep["l"][~done] == 0).all()
        assert (ep["t"][done] >= 0).all()
        # same-step autoreset: the finished episode is also under final_info
        np.testing.assert_array_equal(info["final_info"]["_episode"], done)
        np.testing.assert_array_equal(info["final_info"]["episode"]["l"], ep["l"])
        # KELab's own keys stay
        np.testing.assert_array_equal(info["episode_length"][done], lengths[done])
        returns[done] = 0.0
        lengths[done] = 0
        checked += 1
        if checked >= 3:
            break
    assert checked >= 3
    env.close()


def test_direct_info_has_episode_statistics():
    env = DirectRLEnv(CartPoleTask(), seed=0)
    rng = np.random.default_rng(1)
    env.reset(seed=0)
    total, steps = 0.0, 0
    for _ in range(400):
        _, r, term, trunc, info = env.step(_random_actions(env, rng))
        total += r
        steps += 1
        if term or trunc:
            assert info["episode"]["r"] == pytest.approx(total, rel=1e-5)
            assert info["episode"]["l"] == steps == info["episode_length"]
            assert info["episode"]["t"] >= 0.0
            break
        assert "episode" not in info
    else:
        pytest.fail("no episode ended")
    env.close()


def test_observation_spaces_declare_real_bounds():
    pi = DirectRLEnv(PiLocomotionTask(), seed=0)
    assert pi.observation_space.low[-1] == 0.0
    assert pi.observation_space.high[-1] == pytest.approx(MAX_COMMAND)
    assert np.isinf(pi.observation_space.high[:-1]).all()
    obs, _ = pi.reset(seed=3)
    assert pi.observation_space.contains(obs)
    pi.close()
    ball = LearningEnv(BallToGoalTask(), num_envs=8, seed=0)
    obs, _ = ball.reset(seed=0)
    assert np.isfinite(ball.single_observation_space.high[4:]).all()
    assert ball.observation_space.contains(obs.astype(np.float32))
    ball.close()


def test_bad_observation_bounds_name_the_task_and_the_fix():
    class Bad(CartPoleTask):
        observation_bounds = ((0.0,) * 3, (1.0,) * 3)

    with pytest.raises(TaskError, match=r"Bad.observation_bounds must hold observation_dim=4"):
        DirectRLEnv(Bad(), seed=0)
