"""``RslVecEnv``: a LearningEnv seen as rsl-rl-lib's ``VecEnv`` steps, in plain tensors.

rsl-rl-lib's runner steps batched tensors: ``get_observations()``,
``step(actions) -> (obs, rewards, dones, extras)`` with ``extras["time_outs"]``; its
observations are a ``TensorDict`` of groups, KELab's one ``(num_envs, obs_dim)`` tensor
(the algorithm, :class:`~kelab.train.ppo.FinalObsPPO`, reads nothing else). The
adapter shares memory with the env wherever it can (``torch.from_numpy``: no copies), so
no per-copy Python runs per step. rsl-rl never calls ``reset()``: the adapter resets the
env when it is built. ``extras["final_obs"]`` carries the final observation of the
episodes that ended in the step (the new episode's first observation is already in
``obs``), for :class:`~kelab.train.ppo.FinalObsPPO` to bootstrap time-limit endings from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from kelab.rl.env import LearningEnv

__all__ = ["RslVecEnv"]


class RslVecEnv:
    """rsl-rl's ``VecEnv`` over a :class:`~kelab.rl.env.LearningEnv`.

    Args:
        env: The LearningEnv (any number of copies).
        seed: Seed of the first reset.

    Attributes:
        num_envs: Copies.
        num_actions: Action size.
        max_episode_length: Env steps of a full-length episode.
        episode_length_buf: Steps of each copy's current episode (a tensor sharing the
            env's own counter).
        device: ``"cpu"``.
        cfg: Empty (rsl-rl reads it only for logging).
        last_info: The Gymnasium info of the latest step (episode endings, successes).
    """

    def __init__(self, env: LearningEnv, seed: int) -> None:
        self.env = env
        self.num_envs = int(env.num_envs)
        self.num_actions = int(env.single_action_space.shape[0])
        self.num_obs = int(np.prod(env.single_observation_space.shape))
        self.max_episode_length = int(env.max_episode_length)
        self.episode_length_buf = torch.from_numpy(env.episode_length_buf)
        self.device = "cpu"
        self.cfg: dict[str, Any] = {}
        self.last_info: dict[str, Any] = {}
        obs, _ = env.reset(seed=seed)
        self._obs = obs

    def get_observations(self) -> torch.Tensor:
        """The current observations, ``(num_envs, obs_dim)`` (sharing the env's array).

        An image task's ``(num_envs, H, W, C)`` uint8 images come flat, as float32 (a new
        tensor).
        """
        return self._flat(self._obs)

    def _flat(self, obs: np.ndarray) -> torch.Tensor:
        if obs.ndim == 2:
            return torch.from_numpy(obs)
        return torch.from_numpy(obs.reshape(obs.shape[0], -1).astype(np.float32))

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Step every copy; finished copies restart in the same step.

        Returns:
            ``(obs, rewards, dones, extras)``: ``dones`` is 1 where an episode ended (either
            way); ``extras["time_outs"]`` is 1 where it ended by truncation alone (time
            limit or cut short by the task, not a terminal state); ``extras["final_obs"]``
            holds those episodes' final observations (other rows are zero).
        """
        act = actions.detach().to("cpu", torch.float32).numpy()
        obs, rewards, terminated, truncated, info = self.env.step(act)
        self._obs = obs
        self.last_info = info
        dones = terminated | truncated
        extras = {"time_outs": torch.from_numpy(truncated & ~terminated)}
        if info:
            extras["final_obs"] = self._flat(info["final_obs"])
        return (
            self._flat(obs),
            torch.from_numpy(rewards),
            torch.from_numpy(dones.astype(np.uint8)),
            extras,
        )
