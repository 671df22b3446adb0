"""Gymnasium entry points of the built-in tasks (see :mod:`kelab.tasks`)."""

from __future__ import annotations

import importlib
from typing import Any

from kelab.rl.direct import DirectRLEnv
from kelab.rl.env import LearningEnv
from kelab.rl.task import Task

__all__ = ["make_direct", "make_vector", "task_class"]


def task_class(target: str) -> type[Task]:
    """Return the Task class named by ``"module:Class"``."""
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"{target!r} is not a ke.Task subclass")
    return cls


def make_direct(task: str, render_mode: str | None = None, **kwargs: Any) -> DirectRLEnv:
    """``gymnasium.make`` entry point: one copy of the task as a DirectRLEnv.

    Args:
        task: ``"module:TaskClass"``.
        render_mode: None, "human" or "rgb_array".
        **kwargs: Passed to DirectRLEnv (run_config, timing, seed, success, pacer).
    """
    return DirectRLEnv(task_class(task)(), render_mode=render_mode, **kwargs)


make_direct.metadata = DirectRLEnv.metadata  # type: ignore[attr-defined]


def make_vector(
    task: str, num_envs: int = 1, render_mode: str | None = None, **kwargs: Any
) -> LearningEnv:
    """``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`` entry point.

    Like every LearningEnv, it runs at the task's own ``sim_dt`` and ``decimation``
    unless ``timing`` / ``dt`` / ``physics_steps_per_action`` are given.

    Args:
        task: ``"module:TaskClass"``.
        num_envs: Copies run side by side.
        render_mode: None, "human" or "rgb_array".
        **kwargs: Passed to LearningEnv (seed, env_spacing, run_config, success...).
    """
    cls = task_class(task)
    return LearningEnv(cls(), num_envs=num_envs, render_mode=render_mode, **kwargs)
