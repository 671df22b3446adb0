"""The Gymnasium spaces of a task's observations and actions (internal).

A task may declare ``observation_bounds = (low, high)``; both environments (and the Ray
workers, through LearningEnv) build their Box spaces here. An image task
(``observation_shape``) gets Gymnasium's uint8 image space, and its observations are
checked by :func:`image_batch`.
"""

from __future__ import annotations

import gymnasium
import numpy as np

from kelab.rl.errors import TaskError, describe_array
from kelab.rl.task import Task

__all__ = ["action_space", "image_batch", "observation_bounds", "observation_space"]


def observation_bounds(task: Task, obs_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(low, high)`` float32 bounds of one copy's observation for its Box space.

    A task declares them with an ``observation_bounds = (low, high)`` class attribute
    (sequences of ``observation_dim`` numbers, ``-inf``/``inf`` where an entry has no real
    bound); without it every entry is unbounded.

    Raises:
        TaskError: For bounds of the wrong length, with NaN, or with low > high.
    """
    bounds = getattr(task, "observation_bounds", None)
    if bounds is None:
        return np.full(obs_dim, -np.inf, np.float32), np.full(obs_dim, np.inf, np.float32)
    name = type(task).__name__
    try:
        low, high = (np.asarray(b, dtype=np.float32).reshape(-1) for b in bounds)
    except (TypeError, ValueError):
        raise TaskError(
            f"{name}.observation_bounds must be (low, high), two sequences of numbers, got "
            f"{bounds!r}"
        ) from None
    if low.shape != (obs_dim,) or high.shape != (obs_dim,):
        raise TaskError(
            f"{name}.observation_bounds must hold observation_dim={obs_dim} numbers each, got "
            f"{low.size} and {high.size}"
        )
    if np.isnan(low).any() or np.isnan(high).any() or (low > high).any():
        raise TaskError(
            f"{name}.observation_bounds must have low <= high and no NaN (use -inf/inf for no "
            "bound)"
        )
    return low, high


def observation_space(task: Task) -> gymnasium.spaces.Box:
    """One copy's observation space: float32 ``(observation_dim,)`` within the task's bounds.

    An image task's (``observation_shape`` set): ``Box(0, 255, (height, width, channels),
    uint8)``, Gymnasium's image space (what Stable-Baselines3's ``CnnPolicy`` takes).
    """
    if task.observation_shape is not None:
        return gymnasium.spaces.Box(0, 255, tuple(task.observation_shape), np.uint8)
    dim = int(task.observation_dim)
    low, high = observation_bounds(task, dim)
    return gymnasium.spaces.Box(low, high, (dim,), np.float32)


def image_batch(task: Task, value: object, num_envs: int) -> np.ndarray:
    """An image task's ``get_observations()`` checked: a new uint8 ``(num_envs, H, W, C)``.

    Raises:
        TaskError: For anything but a uint8 array of that shape, naming both.
    """
    shape = (num_envs, *task.observation_shape)  # type: ignore[misc]
    if not isinstance(value, np.ndarray) or value.dtype != np.uint8 or value.shape != shape:
        raise TaskError(
            f"{type(task).__name__}.get_observations() must return a uint8 array of shape "
            f"{shape} (one image per copy: observation_shape), got {describe_array(value)}"
        )
    return value.copy()  # a new array: the task may reuse its buffer


def action_space(task: Task) -> gymnasium.spaces.Box:
    """One copy's action space: float32 ``(action_dim,)`` in [-1, 1]."""
    return gymnasium.spaces.Box(-1.0, 1.0, (int(task.action_dim),), np.float32)
