"""``RolloutStorage``: one rollout of every copy, as plain tensors ``(steps, copies, ...)``.

What PPO learns from: the observations each action was taken in, the actions, rewards,
episode ends, the critic's values, the actions' log-probabilities and the Gaussian's
mean and std (for the KL of the adaptive learning rate), then the returns and
advantages :meth:`~kelab.train.ppo.FinalObsPPO.compute_returns` writes. Every tensor is
allocated at once, so :meth:`share_memory_` can hand the whole storage to a forked
learner (``TrainConfig.overlap_rollout``) before the first step.

Example:
    >>> import torch
    >>> st = RolloutStorage(num_envs=4, num_transitions_per_env=2, obs_dim=3, action_dim=1)
    >>> st.add(torch.zeros(4, 3), torch.ones(4, 1), torch.zeros(4), torch.zeros(4),
    ...        torch.zeros(4, 1), torch.zeros(4), (torch.zeros(4, 1), torch.ones(4, 1)))
    >>> st.step, st.actions[0, :, 0].tolist()
    (1, [1.0, 1.0, 1.0, 1.0])
"""

from __future__ import annotations

import torch

__all__ = ["RolloutStorage"]


class RolloutStorage:
    """A rollout's transitions (see the module docstring).

    Args:
        num_envs: Copies.
        num_transitions_per_env: Steps of each copy per rollout.
        obs_dim: Observation size.
        action_dim: Action size.

    Attributes:
        step: Transitions stored so far.
    """

    FIELDS = (
        "observations",
        "rewards",
        "actions",
        "dones",
        "values",
        "actions_log_prob",
        "returns",
        "advantages",
    )
    """The tensors besides :attr:`distribution_params` (what :meth:`share_memory_` moves)."""

    def __init__(
        self, num_envs: int, num_transitions_per_env: int, obs_dim: int, action_dim: int
    ) -> None:
        steps = self.num_transitions_per_env = int(num_transitions_per_env)
        n = self.num_envs = int(num_envs)
        self.observations = torch.zeros(steps, n, int(obs_dim))
        self.rewards = torch.zeros(steps, n, 1)
        self.actions = torch.zeros(steps, n, int(action_dim))
        self.dones = torch.zeros(steps, n, 1, dtype=torch.uint8)
        self.values = torch.zeros(steps, n, 1)
        self.actions_log_prob = torch.zeros(steps, n, 1)
        self.returns = torch.zeros(steps, n, 1)
        self.advantages = torch.zeros(steps, n, 1)
        shape = (steps, n, int(action_dim))
        self.distribution_params = (torch.zeros(shape), torch.zeros(shape))
        """The acting Gaussian's ``(mean, std)`` at each step."""
        self.step = 0

    def add(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        values: torch.Tensor,
        actions_log_prob: torch.Tensor,
        distribution_params: tuple[torch.Tensor, torch.Tensor],
    ) -> None:
        """Store one step of every copy (``rewards``, ``dones``, ``actions_log_prob``: ``(n,)``).

        Raises:
            OverflowError: When the rollout is full (call :meth:`clear` first).
        """
        i = self.step
        if i >= self.num_transitions_per_env:
            raise OverflowError(
                f"RolloutStorage holds {self.num_transitions_per_env} steps and is full; call "
                "clear() before adding the next rollout"
            )
        self.observations[i].copy_(observations)
        self.actions[i].copy_(actions)
        self.rewards[i].copy_(rewards.view(-1, 1))
        self.dones[i].copy_(dones.view(-1, 1))
        self.values[i].copy_(values)
        self.actions_log_prob[i].copy_(actions_log_prob.view(-1, 1))
        self.distribution_params[0][i].copy_(distribution_params[0])
        self.distribution_params[1][i].copy_(distribution_params[1])
        self.step = i + 1

    def clear(self) -> None:
        """Start the next rollout (the tensors are overwritten step by step)."""
        self.step = 0

    def share_memory_(self) -> None:
        """Move every tensor to shared memory, where a forked process sees the same bytes."""
        for name in self.FIELDS:
            getattr(self, name).share_memory_()
        for param in self.distribution_params:
            param.share_memory_()
