"""Time-limit endings bootstrap from the value of info["final_obs"] (FinalObsPPO)."""

from __future__ import annotations

import numpy as np
import torch
from train_helpers import tiny_config

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.adapter import RslVecEnv
from kelab.train.ppo import build_algorithm


def _t(x):
    return torch.as_tensor(np.asarray(x), dtype=torch.float32)


def test_time_outs_add_gamma_times_the_value_of_the_final_observation():
    torch.manual_seed(0)
    cfg = tiny_config(num_envs=3, num_steps_per_env=2, obs_normalization=False, gamma=0.9)
    alg = build_algorithm(cfg, 4, 1, 3)
    obs = _t(np.zeros((3, 4)))
    final = _t([[0.0, 0.0, 0.0, 0.0], [1.0, -2.0, 0.5, 3.0], [0.0, 0.0, 0.0, 0.0]])
    with torch.inference_mode():
        v_obs = alg.critic(obs).squeeze(1)
        alg.act(obs)
        v_final = alg.critic(final).squeeze(1)
        rewards = torch.tensor([1.0, 1.0, 1.0])
        dones = torch.tensor([0, 1, 1], dtype=torch.uint8)
        time_outs = torch.tensor([False, True, False])  # copy 2 ended in a terminal state
        alg.process_env_step(obs, rewards, dones, {"time_outs": time_outs, "final_obs": final})
    stored = alg.storage.rewards[0, :, 0]
    assert torch.allclose(stored, torch.tensor([1.0, 1.0 + 0.9 * float(v_final[1]), 1.0]))
    assert abs(float(v_final[1]) - float(v_obs[1])) > 1e-4  # not rsl-rl's pre-step value


def test_the_adapter_passes_the_final_observation_of_time_limit_endings():
    class Short(CartPoleTask):
        episode_length_s = 4 / 60  # 4 env steps

    env = ke.LearningEnv(Short(), num_envs=3, seed=1)
    vec = RslVecEnv(env, seed=1)
    for _ in range(4):
        obs, rewards, dones, extras = vec.step(torch.zeros(3, 1))
    assert dones.tolist() == [1, 1, 1] and extras["time_outs"].tolist() == [True] * 3
    final = extras["final_obs"].numpy()
    assert np.array_equal(final, vec.last_info["final_obs"])
    assert not np.array_equal(final, obs.numpy())  # obs is the new episode's first
    assert vec.episode_length_buf.tolist() == [0, 0, 0]  # shares the env's counter
    env.close()
