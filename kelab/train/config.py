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

from kelab._settings import check_settings, setting
from kelab._validate import LAYOUTS, check_bool, check_int, check_layout, check_number, must
from kelab.errors import UserError
from kelab.rl.config import DEFAULT_LAYOUT

__all__ = [
    "ACTIVATIONS",
    "ALGORITHMS",
    "NETWORK_FIELDS",
    "SCHEDULES",
    "TrainConfig",
    "training_config_of",
]

NETWORK_FIELDS = (
    "actor_hidden_dims",
    "critic_hidden_dims",
    "cnn_channels",
    "cnn_kernels",
    "cnn_strides",
    "share_cnn",
    "activation",
    "obs_normalization",
)
"""The ``TrainConfig`` fields that shape the networks (their tensors and the optimizer's
parameters): a run resumes only with the values it was trained with."""

ALGORITHMS: dict[str, str] = {"PPO": "kelab.train.ppo:build_algorithm"}
"""The algorithms ``RLTrainer`` knows: name -> ``"module:builder"``, imported when used.

A builder takes ``(config, obs_dim, act_dim, num_envs, device)`` and returns an object
with the interface of :class:`kelab.train.algorithm.Algorithm`; a new algorithm is one
module with such a builder plus one entry here (docs/training.md, "Adding an algorithm").
"""

ACTIVATIONS = ("elu", "relu", "tanh", "selu", "gelu", "silu")
"""The hidden activations ``TrainConfig.activation`` takes."""

SCHEDULES = ("adaptive", "fixed")
"""The learning-rate schedules ``TrainConfig.schedule`` takes."""


def _count(value: object, name: str) -> int:
    return check_int(value, name, low=1)


def _count_or_0(value: object, name: str) -> int:
    return check_int(value, name, low=0)


def _flag(value: object, name: str) -> bool:
    return check_bool(value, name)


def _real(
    value: object, name: str, *, low: float, high: float | None = None, low_open: bool = False
) -> object:
    """A checked real number; a Python int or float is kept as given (saved as JSON)."""
    number = check_number(value, name, low=low, high=high, low_open=low_open)
    return value if type(value) in (int, float) else number


def _positive(value: object, name: str) -> object:
    return _real(value, name, low=0.0, low_open=True)


def _fraction(value: object, name: str) -> object:
    return _real(value, name, low=0.0, high=1.0)


def _at_least_0(value: object, name: str) -> object:
    return _real(value, name, low=0.0)


def _sizes(value: object, name: str, high: int) -> tuple[int, ...]:
    """A tuple (or list) of ints in [1, high], possibly empty."""
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise UserError(must(name, f"a tuple of ints in [1, {high}] (empty: none)", value))
    return tuple(check_int(v, name, low=1, high=high) for v in value)


def _cnn_channels(value: object, name: str) -> tuple[int, ...]:
    return _sizes(value, name, 1024)


def _cnn_sizes(value: object, name: str) -> tuple[int, ...]:
    return _sizes(value, name, 64)


def _image(value: object, name: str) -> tuple[int, ...]:
    """``()`` or an image's ``(height, width, channels)``."""
    shape = _sizes(value, name, 2**20)
    if len(shape) not in (0, 3):
        raise UserError(must(name, "() or (height, width, channels)", value))
    return shape


def _widths(value: object, name: str) -> tuple[int, ...]:
    """Hidden layer widths: a non-empty tuple (or list) of ints in [1, 4096]."""
    if isinstance(value, list):
        value = tuple(value)
    try:
        widths = tuple(check_int(v, name, low=1, high=4096) for v in value)  # type: ignore[attr-defined]
    except (TypeError, ValueError):  # not a tuple, or a bad width
        widths = ()
    if not isinstance(value, tuple) or not widths:
        raise UserError(must(name, "a non-empty tuple of layer widths in [1, 4096]", value))
    return widths


@dataclass(frozen=True)
class TrainConfig:
    """PPO settings of one training run (rsl-rl-lib's PPO, KELab's loop).

    Each field is declared once with its doc and check (`kelab._settings.setting`):
    ``kelab train`` makes an option of each (``--learning-rate``...: kelab/cli/train.py),
    and docs/training.md's table of the fields is generated from them.
    """

    num_envs: int = setting(
        256, "Copies of the task stepped side by side (one LearningEnv).", _count
    )
    num_steps_per_env: int = setting(
        24, "Env steps per copy collected per iteration (the rollout).", _count
    )
    max_iterations: int = setting(
        300, "Iterations kelab train runs when --iterations is not given.", _count
    )
    actor_hidden_dims: tuple[int, ...] = setting(
        (64, 64), "Hidden layer widths of the policy network.", _widths
    )
    critic_hidden_dims: tuple[int, ...] = setting(
        (64, 64), "Hidden layer widths of the value network.", _widths
    )
    cnn_channels: tuple[int, ...] = setting(
        (),
        "Filters of each convolution of a convolutional policy, for an image observation "
        "(docs/training.md, Learning from pixels); empty: no convolution, an MLP.",
        _cnn_channels,
    )
    cnn_kernels: tuple[int, ...] = setting(
        (), "Square kernel side of each convolution (one per cnn_channels entry).", _cnn_sizes
    )
    cnn_strides: tuple[int, ...] = setting(
        (), "Stride of each convolution (one per cnn_channels entry).", _cnn_sizes
    )
    share_cnn: bool = setting(
        False,
        "The value network reads the policy network's convolutions: one convolutional trunk, "
        "trained by both losses (SB3's CnnPolicy, CleanRL's Atari PPO), whose update runs once, "
        "not twice. Needs cnn_channels and obs_normalization off.",
        _flag,
    )
    observation_shape: tuple[int, ...] = setting(
        (),
        "The image (height, width, channels) the policy reads its observation as: RLTrainer "
        "sets it from the env's image observation space; () for a vector observation.",
        _image,
    )
    activation: str = setting(
        "elu",
        "Hidden activation of both networks: elu, relu, tanh, selu, gelu or silu.",
        choices=ACTIVATIONS,
    )
    init_noise_std: float = setting(
        1.0, "Initial standard deviation of the Gaussian action noise.", _positive
    )
    obs_normalization: bool = setting(
        True,
        "Normalise observations with running mean/std statistics (part of the policy: saved "
        "in the checkpoint, frozen at playback).",
        _flag,
    )
    learning_rate: float = setting(
        1e-3,
        "Adam learning rate (the starting value with the adaptive schedule); at most "
        "max_learning_rate.",
        _positive,
    )
    schedule: str = setting(
        "adaptive",
        "Learning-rate schedule: adaptive (adapt the learning rate to keep the KL near "
        "desired_kl) or fixed.",
        choices=SCHEDULES,
    )
    desired_kl: float = setting(
        0.01, "Target KL divergence per update for the adaptive schedule.", _positive
    )
    max_learning_rate: float = setting(
        1e-2,
        "Upper bound of the adaptive schedule's learning rate (rsl-rl's own bound is 1e-2; a "
        "lower one keeps a converged policy from large steps).",
        _positive,
    )
    gamma: float = setting(0.99, "Discount factor, in [0, 1].", _fraction)
    lam: float = setting(0.95, "GAE lambda, in [0, 1].", _fraction)
    clip_param: float = setting(0.2, "PPO ratio clip.", _positive)
    entropy_coef: float = setting(0.005, "Entropy bonus weight (>= 0).", _at_least_0)
    value_loss_coef: float = setting(1.0, "Value loss weight.", _positive)
    num_learning_epochs: int = setting(5, "Passes over each rollout.", _count)
    num_mini_batches: int = setting(
        4,
        "Mini-batches per pass (at most num_envs * num_steps_per_env transitions).",
        _count,
    )
    max_grad_norm: float = setting(1.0, "Gradient-norm clip.", _positive)
    layout: str = setting(
        DEFAULT_LAYOUT,
        "World layout of the training env; the default is EnvConfig's (isolated: each copy "
        "exact, as a lone World). packed is faster for many copies, and the built-in tasks "
        "choose it in their training configs.",
        check_layout,
        choices=LAYOUTS,
    )
    num_threads: int = setting(
        1, "Threads stepping the World (results identical for every value).", _count
    )
    torch_threads: int = setting(
        1,
        "Threads torch uses for the networks (torch.set_num_threads; small networks gain "
        "little from more, and one keeps runs repeatable).",
        _count,
    )
    success_target: float = setting(
        0.95,
        "Success rate the task's target asks for, in [0, 1] (reported; with stop_at_target "
        "the run stops once it is met).",
        _fraction,
    )
    stop_at_target: bool = setting(
        False,
        "End training once the task's success target is met, after at least min_iterations: "
        "at the first evaluation of the deterministic policy that meets it when eval_every "
        "is set, else when success_window recent training episodes reach it (then after "
        "target_patience more iterations).",
        _flag,
    )
    min_iterations: int = setting(10, "Iterations before a run may stop at its target.", _count)
    target_patience: int = setting(
        0,
        "Iterations to keep training after the target is first reached by the training "
        "episodes (their success rate is measured with exploration noise; a few more "
        "iterations make the deterministic policy reliable too).",
        _count_or_0,
    )
    success_window: int = setting(
        200,
        "Recent finished episodes the training success rate and mean return are taken over.",
        _count,
    )
    checkpoint_every: int = setting(
        10,
        "Iterations between latest saves (best is saved whenever it improves, at most this "
        "often too).",
        _count,
    )
    overlap_rollout: bool = setting(
        False,
        "Collect the next rollout while the PPO update runs in a second process (a thread where "
        "the trainer cannot fork), so the env and the networks use two cores at once. The rollout "
        "acts with the policy from before that update: one iteration of policy lag, which the "
        "update corrects for (decoupled PPO). Deterministic, and the same run in a process or a "
        "thread (docs/training.md).",
        _flag,
    )
    eval_every: int = setting(
        0,
        "Iterations between evaluations of the deterministic policy (eval_episodes fresh seeded "
        "episodes, a 10-episode pre-check first); 0 never evaluates. With it, best prefers the "
        "evaluated success rate and stop_at_target stops at the first evaluation that meets "
        "success_target (after min_iterations, with no patience).",
        _count_or_0,
    )
    eval_episodes: int = setting(100, "Episodes of each evaluation (one copy each).", _count)
    eval_process: bool = setting(
        False,
        "Run the evaluations in a second process, on another core while training goes on (forked "
        "when the trainer is built). The verdict on iteration k's policy is read at iteration k + "
        "eval_every, or when train() returns (then metrics.csv repeats the last iteration's row "
        "with it, and it counts for the target and the returned statistics like any other), so "
        "runs stay deterministic; it judges all "
        "eval_episodes with no 10-episode pre-check. Where it cannot fork (a RayLearningEnv, no "
        "fork start method) the trainer warns and evaluates in its own process.",
        _flag,
    )

    def __post_init__(self) -> None:
        names = [f.name for f in dataclasses.fields(self)]
        values = {name: getattr(self, name) for name in names}
        for name, value in check_settings(values, TrainConfig, "TrainConfig.").items():
            self._set(name, value)
        if self.learning_rate > self.max_learning_rate:
            raise UserError(
                f"TrainConfig.learning_rate must be <= max_learning_rate="
                f"{self.max_learning_rate}, got {self.learning_rate}; lower it or raise "
                "max_learning_rate"
            )
        counts = {len(self.cnn_channels), len(self.cnn_kernels), len(self.cnn_strides)}
        if len(counts) > 1:
            raise UserError(
                "TrainConfig.cnn_channels, cnn_kernels and cnn_strides must have one entry per "
                f"convolution each, got {len(self.cnn_channels)}, {len(self.cnn_kernels)} and "
                f"{len(self.cnn_strides)}; give all three the same length"
            )
        if self.share_cnn and not self.cnn_channels:
            raise UserError(
                "TrainConfig.share_cnn needs convolutions to share, got cnn_channels=(); set "
                "cnn_channels (an image task) or leave share_cnn off"
            )
        if self.share_cnn and self.obs_normalization:
            raise UserError(
                "TrainConfig.share_cnn needs obs_normalization=False (one trunk reads one "
                "input, the raw image), got True; turn obs_normalization off or share_cnn off"
            )
        batch = self.num_envs * self.num_steps_per_env
        if batch < self.num_mini_batches:
            raise UserError(
                f"TrainConfig: a rollout of num_envs * num_steps_per_env = {batch} transitions "
                f"cannot be split into num_mini_batches={self.num_mini_batches}; collect more "
                "steps or use fewer mini-batches"
            )

    def _set(self, name: str, value: object) -> None:
        """Store a checked value (numpy scalars become Python ones, saved as JSON)."""
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> TrainConfig:
        """Return a copy with ``changes`` applied (validated like the constructor)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as a JSON-compatible dict."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in _TUPLES:
            out[name] = list(getattr(self, name))
        return out

    @property
    def cnn(self) -> tuple[tuple[int, int, int], ...]:
        """Each convolution's ``(channels, kernel, stride)``; empty for an MLP policy."""
        return tuple(zip(self.cnn_channels, self.cnn_kernels, self.cnn_strides, strict=True))

    @property
    def image(self) -> tuple[int, int, int] | None:
        """:attr:`observation_shape` as ``(height, width, channels)``, or None."""
        shape = self.observation_shape
        return (shape[0], shape[1], shape[2]) if shape else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build a config from :meth:`to_dict` output (unknown keys are an error).

        Raises:
            UserError: For a non-dict, an unknown key, or an invalid value.
        """
        if not isinstance(data, dict):
            raise UserError(f"a training config must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"unknown training config keys {unknown}; known keys: {sorted(known)}")
        return cls(**data)


_TUPLES = (
    "actor_hidden_dims",
    "critic_hidden_dims",
    "cnn_channels",
    "cnn_kernels",
    "cnn_strides",
    "observation_shape",
)
"""The tuple fields, saved as JSON lists."""


def training_config_of(task_type: type) -> TrainConfig:
    """The task's tuned settings as a checked ``TrainConfig`` (the defaults without any).

    A task's ``training_config`` class attribute is plain data, a mapping of
    ``TrainConfig`` field names to values (what the built-in tasks carry), or a
    ``TrainConfig`` (a user's task may import train).

    Raises:
        UserError: For anything else, an unknown field or a bad value, naming the task.

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
        raise UserError(
            f"{name} must be a mapping of TrainConfig fields (or a kelab.train.TrainConfig), "
            f"got {config!r}; write it as a dict, e.g. {{'num_envs': 64}}"
        )
    try:
        return TrainConfig.from_dict(dict(config))
    except (TypeError, ValueError) as err:
        raise UserError(f"{name}: {err}") from None
