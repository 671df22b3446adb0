"""``TrainConfig``: everything a PPO training run is set up with (no torch here).

Each built-in task carries its tuned settings as plain data, a ``training_config`` class
attribute mapping field names to values (tasks sit below train and never import it);
:func:`training_config_of` turns them into a checked ``TrainConfig``, so ``kelab train
CartPole-v0`` with no flags reaches the task's target. The config is saved in every
checkpoint's JSON and read back with :meth:`TrainConfig.from_dict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kelab._validate import check_bool, check_choice, check_int, check_layout, check_number, must
from kelab.rl.config import DEFAULT_LAYOUT

__all__ = ["ALGORITHMS", "TrainConfig", "training_config_of"]

ALGORITHMS: dict[str, str] = {"PPO": "kelab.train.ppo:build_algorithm"}
"""The algorithms ``RLTrainer`` knows: name -> ``"module:builder"``, imported when used.

A builder takes ``(config, obs_dim, act_dim, num_envs, device)`` and returns an object
with the interface of :class:`kelab.train.algorithm.Algorithm`; a new algorithm is one
module with such a builder plus one entry here (docs/training.md, "Adding an algorithm").
"""

_ACTIVATIONS = ("elu", "relu", "tanh", "selu", "gelu", "silu")


@dataclass(frozen=True)
class TrainConfig:
    """PPO settings of one training run (rsl-rl-lib's PPO, KELab's loop).

    Attributes:
        num_envs: Copies of the task stepped side by side (one LearningEnv).
        num_steps_per_env: Env steps per copy collected per iteration (the rollout).
        max_iterations: Iterations ``kelab train`` runs when ``--iterations`` is not given.
        actor_hidden_dims: Hidden layer widths of the policy network.
        critic_hidden_dims: Hidden layer widths of the value network.
        activation: Hidden activation (``"elu"``, ``"relu"``, ``"tanh"``, ...).
        init_noise_std: Initial standard deviation of the Gaussian action noise.
        obs_normalization: Normalise observations with running mean/std statistics (part
            of the policy: saved in the checkpoint, frozen at playback).
        learning_rate: Adam learning rate (the starting value with ``schedule="adaptive"``).
        schedule: ``"adaptive"`` (adapt the learning rate to keep the KL near
            ``desired_kl``) or ``"fixed"``.
        desired_kl: Target KL divergence per update for the adaptive schedule.
        max_learning_rate: Upper bound of the adaptive schedule's learning rate (rsl-rl's
            own bound is 1e-2; a lower one keeps a converged policy from large steps).
        gamma: Discount factor.
        lam: GAE lambda.
        clip_param: PPO ratio clip.
        entropy_coef: Entropy bonus weight.
        value_loss_coef: Value loss weight.
        num_learning_epochs: Passes over each rollout.
        num_mini_batches: Mini-batches per pass.
        max_grad_norm: Gradient-norm clip.
        layout: World layout of the training env; the default is ``ke.EnvConfig``'s
            (``"isolated"``: each copy exact, as a lone World). ``"packed"`` is faster for
            many copies, and the built-in tasks choose it in their training configs.
        num_threads: Threads stepping the World (results identical for every value).
        torch_threads: Threads torch uses for the networks (``torch.set_num_threads``;
            small networks gain little from more, and it keeps runs repeatable).
        success_target: Success rate the task's target asks for (reported, and the run
            stops early once the recent episodes reach it when ``stop_at_target``).
        stop_at_target: End training as soon as ``success_window`` recent episodes reach
            ``success_target`` (after at least ``min_iterations``).
        min_iterations: Iterations before a run may stop at its target.
        target_patience: Iterations to keep training after the target is first reached
            (the training success rate is measured with exploration noise; a few more
            iterations make the deterministic policy reliable too).
        success_window: Recent finished episodes the success rate and mean return are
            taken over.
        overlap_rollout: Collect the next rollout while the PPO update runs in a second
            process (forked at each ``train()`` call; a thread where the trainer cannot
            fork or ``torch_threads > 1``: :mod:`kelab.train.learner`), so the env and the
            networks use two cores at once. The rollout then acts with the policy from
            before that update (one iteration of policy lag); the update takes the policy
            before it as the proximal one (clipping and the KL of the learning-rate
            schedule) and weights each sample by ``pi_prox / pi_acting`` (decoupled PPO;
            ``FinalObsPPO.lagged``). Deterministic, the same run in a process or a
            thread, and however ``train()`` calls split it.
        eval_every: Iterations between evaluations of the deterministic policy
            (:class:`kelab.train.target.TargetCheck`: ``eval_episodes`` fresh seeded
            episodes, a 10-episode pre-check first); 0 never evaluates. With it, "best"
            prefers the evaluated success rate and ``stop_at_target`` stops at the first
            evaluation that meets ``success_target`` (after ``min_iterations``; no
            patience: the evaluated policy is the one saved as ``best``).
        eval_episodes: Episodes of each evaluation (one copy each).
        eval_process: Run the evaluations in a second process (forked when the trainer
            is built; :class:`kelab.train.eval_process.EvalProcess`), on another core
            while training goes on. The verdict on iteration k's policy is read at
            iteration k + ``eval_every``, or when ``train()`` returns (waiting for it if
            need be), so runs stay deterministic. It judges all ``eval_episodes`` with no
            10-episode pre-check (that only saves time, which the second process has to
            spare). A passing verdict stops the run there, and ``best`` is the policy
            that passed. Where it cannot fork (a RayLearningEnv, a Ray driver process, no
            ``fork`` start method) the trainer warns and evaluates in its own process.
        checkpoint_every: Iterations between ``latest`` saves (``best`` is saved whenever
            it improves, at most this often too).
    """

    num_envs: int = 256
    num_steps_per_env: int = 24
    max_iterations: int = 300
    actor_hidden_dims: tuple[int, ...] = (64, 64)
    critic_hidden_dims: tuple[int, ...] = (64, 64)
    activation: str = "elu"
    init_noise_std: float = 1.0
    obs_normalization: bool = True
    learning_rate: float = 1e-3
    schedule: str = "adaptive"
    desired_kl: float = 0.01
    max_learning_rate: float = 1e-2
    gamma: float = 0.99
    lam: float = 0.95
    clip_param: float = 0.2
    entropy_coef: float = 0.005
    value_loss_coef: float = 1.0
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    max_grad_norm: float = 1.0
    layout: str = DEFAULT_LAYOUT
    num_threads: int = 1
    torch_threads: int = 1
    success_target: float = 0.95
    stop_at_target: bool = False
    min_iterations: int = 10
    target_patience: int = 0
    success_window: int = 200
    checkpoint_every: int = 10
    overlap_rollout: bool = False
    eval_every: int = 0
    eval_episodes: int = 100
    eval_process: bool = False

    def __post_init__(self) -> None:
        for name in (
            "num_envs",
            "num_steps_per_env",
            "max_iterations",
            "num_learning_epochs",
            "num_mini_batches",
            "num_threads",
            "torch_threads",
            "min_iterations",
            "success_window",
            "checkpoint_every",
            "eval_episodes",
        ):
            self._set(name, check_int(getattr(self, name), f"TrainConfig.{name}", low=1))
        self._set("eval_every", check_int(self.eval_every, "TrainConfig.eval_every", low=0))
        for name in ("actor_hidden_dims", "critic_hidden_dims"):
            value = getattr(self, name)
            if isinstance(value, list):
                value = tuple(value)
            try:
                widths = tuple(check_int(v, name, low=1, high=4096) for v in value)
            except (TypeError, ValueError):  # not a tuple, or a bad width
                widths = ()
            if not isinstance(value, tuple) or not widths:
                raise ValueError(
                    must(
                        f"TrainConfig.{name}",
                        "a non-empty tuple of layer widths in [1, 4096]",
                        value,
                    )
                )
            self._set(name, widths)
        check_choice(self.activation, "TrainConfig.activation", _ACTIVATIONS)
        check_choice(self.schedule, "TrainConfig.schedule", ("adaptive", "fixed"))
        check_layout(self.layout, "TrainConfig.layout")
        for name in ("obs_normalization", "stop_at_target", "overlap_rollout", "eval_process"):
            self._set(name, check_bool(getattr(self, name), f"TrainConfig.{name}"))
        positive = (
            "init_noise_std",
            "learning_rate",
            "desired_kl",
            "max_learning_rate",
            "clip_param",
            "value_loss_coef",
            "max_grad_norm",
        )
        for name in positive:
            self._set_real(name, low=0.0, low_open=True)
        for name in ("gamma", "lam", "success_target"):
            self._set_real(name, low=0.0, high=1.0)
        self._set(
            "target_patience",
            check_int(self.target_patience, "TrainConfig.target_patience", low=0),
        )
        self._set_real("entropy_coef", low=0.0)
        if self.learning_rate > self.max_learning_rate:
            raise ValueError(
                f"TrainConfig.learning_rate must be <= max_learning_rate="
                f"{self.max_learning_rate}, got {self.learning_rate}; lower it or raise "
                "max_learning_rate"
            )
        batch = self.num_envs * self.num_steps_per_env
        if batch < self.num_mini_batches:
            raise ValueError(
                f"TrainConfig: a rollout of num_envs * num_steps_per_env = {batch} transitions "
                f"cannot be split into num_mini_batches={self.num_mini_batches}; collect more "
                "steps or use fewer mini-batches"
            )

    def _set(self, name: str, value: object) -> None:
        """Store a checked value (numpy scalars become Python ones, saved as JSON)."""
        object.__setattr__(self, name, value)

    def _set_real(
        self, name: str, *, low: float, high: float | None = None, low_open: bool = False
    ) -> None:
        """Check a real-valued field; keep a Python int or float as given."""
        value = getattr(self, name)
        number = check_number(value, f"TrainConfig.{name}", low=low, high=high, low_open=low_open)
        if type(value) not in (int, float):
            object.__setattr__(self, name, number)

    def replace(self, **changes: Any) -> TrainConfig:
        """Return a copy with ``changes`` applied (validated like the constructor)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as a JSON-compatible dict."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["actor_hidden_dims"] = list(self.actor_hidden_dims)
        out["critic_hidden_dims"] = list(self.critic_hidden_dims)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build a config from :meth:`to_dict` output (unknown keys are an error).

        Raises:
            ValueError: For a non-dict, an unknown key, or an invalid value.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a training config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown training config keys {unknown}; known keys: {sorted(known)}")
        return cls(**data)


def training_config_of(task_type: type) -> TrainConfig:
    """The task's tuned settings as a checked ``TrainConfig`` (the defaults without any).

    A task's ``training_config`` class attribute is plain data, a mapping of
    ``TrainConfig`` field names to values (what the built-in tasks carry), or a
    ``TrainConfig`` (a user's task may import train).

    Raises:
        ValueError: For anything else, an unknown field or a bad value, naming the task.

    Example:
        >>> class Task:
        ...     training_config = {"num_envs": 32, "learning_rate": 3e-3}
        >>> training_config_of(Task).num_envs, training_config_of(object).num_envs
        (32, 256)
    """
    config = getattr(task_type, "training_config", None)
    name = f"{getattr(task_type, '__name__', task_type)}.training_config"
    if config is None:
        return TrainConfig()
    if isinstance(config, TrainConfig):
        return config
    if not isinstance(config, Mapping):
        raise ValueError(
            f"{name} must be a mapping of TrainConfig fields (or a kelab.train.TrainConfig), "
            f"got {config!r}; write it as a dict, e.g. {{'num_envs': 64}}"
        )
    try:
        return TrainConfig.from_dict(dict(config))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: {err}") from None
