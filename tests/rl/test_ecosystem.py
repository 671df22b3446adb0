"""Gymnasium conventions: check_env without a display, episode statistics, real bounds;
other libraries' trainers (Stable-Baselines3) on KELab tasks, unchanged."""

from __future__ import annotations

import os
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from prestart import Prestart

from kelab.rl.direct import DirectRLEnv
from kelab.rl.env import LearningEnv
from kelab.rl.task import TaskError
from kelab.tasks import TASK_IDS
from kelab.tasks.ball_to_goal import BallToGoalTask
from kelab.tasks.cartpole import CartPoleTask
from kelab.tasks.pi_locomotion import MAX_COMMAND, PiLocomotionTask

_CHECK_ENV_WITHOUT_A_DISPLAY = textwrap.dedent(
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
NO_DISPLAY = Prestart(  # ~1 s, started early, beside the suite (tests/prestart.py)
    [sys.executable, "-c", _CHECK_ENV_WITHOUT_A_DISPLAY],
    env={
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")
    },
    cwd=Path.cwd(),
    timeout=240,
)


@pytest.mark.prestart(NO_DISPLAY)
def test_check_env_passes_with_no_display():
    proc = NO_DISPLAY.result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ok ") == len(TASK_IDS)


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


@pytest.fixture
def one_torch_thread():
    """SB3's small MLP runs fastest on one torch thread (more only contend on 2 cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _sb3_ppo(seed, n_steps):
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger

    import kelab  # noqa: F401 - registers the kelab/... ids

    env = gym.make("kelab/CartPole-v0")
    model = PPO("MlpPolicy", env, n_steps=n_steps, batch_size=128, n_epochs=2, seed=seed,
                device="cpu")  # fmt: skip
    # SB3's default logger makes an empty SB3-<time> folder in the temp folder per learn()
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def test_stable_baselines3_ppo_trains_on_a_kelab_task_unchanged(one_torch_thread):
    import gymnasium as gym
    from stable_baselines3.common.env_checker import check_env
    from stable_baselines3.common.evaluation import evaluate_policy

    import kelab  # noqa: F401

    env = gym.make("kelab/CartPole-v0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)  # SB3's own checker: spaces, dtypes, reset/step signatures
    assert [str(w.message) for w in caught] == []
    env.close()
    model = _sb3_ppo(seed=0, n_steps=512)
    model.learn(total_timesteps=2048)  # four rollouts and updates: the API, not a solve
    assert model.num_timesteps == 2048
    episodes = list(model.ep_info_buffer)  # SB3's Monitor saw KELab's episodes end
    assert len(episodes) >= 10
    assert all(ep["l"] >= 1 and np.isfinite(ep["r"]) for ep in episodes)
    vec = model.get_env()
    obs = vec.reset()
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (1, 1) and np.all(np.abs(action) <= 1.0)
    mean, _ = evaluate_policy(model, vec, n_eval_episodes=2, deterministic=True)
    assert np.isfinite(mean) and mean > 0  # CartPole pays per step upright
    vec.close()


def test_stable_baselines3_ppo_on_a_kelab_task_is_reproducible(one_torch_thread):
    import torch

    def weights(seed):
        model = _sb3_ppo(seed, n_steps=256)
        model.learn(total_timesteps=512)
        model.get_env().close()
        return [p.detach().clone() for p in model.policy.parameters()]

    first, again, other = weights(0), weights(0), weights(1)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))  # bit-identical
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


def test_stable_baselines3_here_and_in_docs_leaves_no_folder_in_the_temp_folder(
    one_torch_thread, tmp_path, monkeypatch
):
    # every learn() left an empty SB3-<timestamp> folder in the temp folder (#42)
    import re
    import tempfile
    from pathlib import Path

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    model = _sb3_ppo(seed=0, n_steps=128)
    model.learn(total_timesteps=128)
    model.get_env().close()
    rl_md = (Path(__file__).resolve().parents[2] / "docs" / "rl.md").read_text()
    (example,) = [b for b in re.findall(r"```python\n(.*?)```", rl_md, re.S)
                  if "stable_baselines3" in b]  # fmt: skip
    exec(compile(example, "docs/rl.md", "exec"), {"__name__": "docs_rl_sb3"})
    # (torch's own cache folder, torchinductor_<user>, may be made there: it is reused)
    assert [p.name for p in temp.iterdir() if p.name.startswith("SB3-")] == []
