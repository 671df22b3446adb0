"""The interface between the training loop and an algorithm, and the algorithm registry.

The runner (:class:`kelab.train.trainer.RLTrainer`, its rollouts in
:mod:`kelab.train.rollouts`) only calls what :class:`Algorithm` lists, in the order
rsl-rl-lib's ``OnPolicyRunner`` does: ``start_rollout``; per env step ``act`` then
``process_env_step``; after the rollout ``compute_returns``; then ``update``. A checkpoint is
:meth:`Algorithm.training_state` (``actor.*`` tensors are the policy every player runs),
a resume :meth:`Algorithm.load_training_state`.

A new algorithm is one module with a builder (``(config, obs_dim, act_dim, num_envs,
device) -> Algorithm``) plus one entry in :data:`kelab.train.config.ALGORITHMS`;
``RLTrainer(env, algorithm="NAME")`` then builds it through :func:`build_algorithm`.
``TrainConfig.overlap_rollout`` needs more of it (:class:`Overlappable`: a rollout
storage the learner process shares, and generators of its own).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kelab.errors import UserError
from kelab.train.config import ALGORITHMS

if TYPE_CHECKING:
    import torch

    from kelab.train.checkpoint import Checkpoint
    from kelab.train.config import TrainConfig
    from kelab.train.nets import PolicyNet
    from kelab.train.storage import RolloutStorage

__all__ = ["Algorithm", "Overlappable", "build_algorithm"]


@runtime_checkable
class Algorithm(Protocol):
    """What the training loop calls of an algorithm (and nothing else)."""

    actor: PolicyNet
    """The policy network: saved as ``actor.*``, run by RLPlayer, judged by evaluations."""

    learning_rate: float
    """The current learning rate (logged each iteration)."""

    def train_mode(self) -> None:
        """Put the networks in training mode (before a rollout and an update)."""

    def start_rollout(self) -> None:
        """Begin a rollout (dropping the transitions of one cut short)."""

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Sample actions for ``(num_envs, obs_dim)`` observations; remember the transition."""

    def process_env_step(
        self,
        obs: torch.Tensor,
        rewards: torch.Tensor,
        dones: torch.Tensor,
        extras: dict[str, torch.Tensor],
    ) -> None:
        """Record the outcome of the last ``act`` (``extras``: time-outs, final obs)."""

    def compute_returns(self, obs: torch.Tensor) -> None:
        """Close the rollout: returns and advantages from the last observations."""

    def update(self) -> dict[str, float]:
        """Learn from the rollout; mean ``value``, ``surrogate`` and ``entropy`` losses."""

    def action_std(self) -> torch.Tensor:
        """The action noise's standard deviation (logged each iteration)."""

    def deterministic_actions(self, obs: torch.Tensor) -> torch.Tensor:
        """The policy's deterministic actions for raw ``(N, obs_dim)`` observations."""

    def training_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Named tensors (the networks' own, not copies) and the optimizer's JSON."""

    def load_training_state(self, checkpoint: Checkpoint) -> None:
        """Continue from a checkpoint's networks and optimizer (strict; CheckpointError)."""


@runtime_checkable
class Overlappable(Algorithm, Protocol):
    """An algorithm whose update may run beside the next rollout (``overlap_rollout``)."""

    storage: RolloutStorage
    """The rollout being filled or learnt from; two instances swap theirs each iteration."""

    critic: PolicyNet
    """The value network (the collector's is synced from the learner's)."""

    lagged: bool
    """The rollouts come from the policy one update back."""

    sample_generator: torch.Generator | None
    """Where action noise comes from (None: torch's global generator)."""

    update_generator: torch.Generator | None
    """Where the update's mini-batch order comes from (None: torch's global generator)."""


def build_algorithm(
    name: str, config: TrainConfig, obs_dim: int, act_dim: int, num_envs: int, device: str
) -> Algorithm:
    """Build algorithm ``name`` of :data:`~kelab.train.config.ALGORITHMS` as ``config`` says.

    Raises:
        UserError: For a name the registry does not hold (listing those it does).
    """
    if name not in ALGORITHMS:
        raise UserError(f"unknown algorithm {name!r}; known algorithms: {sorted(ALGORITHMS)}")
    module, _, builder = ALGORITHMS[name].partition(":")
    build = getattr(importlib.import_module(module), builder)
    return build(config, obs_dim, act_dim, num_envs, device)
