"""Gymnasium entry points of the registered tasks (see :mod:`kelab.tasks`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kelab.rl.direct import DirectRLEnv
from kelab.rl.env import LearningEnv
from kelab.rl.task import Task

__all__ = ["build_task", "make_direct", "make_vector", "task_class"]


def task_class(target: str) -> type[Task]:
    """Return the Task class named by ``"module:Class"`` (``Class`` may be dotted)."""
    module, _, name = target.partition(":")
    cls: Any = importlib.import_module(module)
    for part in name.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"{target!r} is not a ke.Task subclass")
    return cls


def build_task(task: str | type[Task] | Callable[[], Task]) -> Task:
    """Make a new task object from what :func:`kelab.tasks.register_task` stored.

    Args:
        task: ``"module:TaskClass"``, a Task subclass, or a function returning a task.

    Raises:
        ValueError: If the result is not a ``ke.Task``.
    """
    made = task_class(task)() if isinstance(task, str) else task()
    if not isinstance(made, Task):
        raise ValueError(f"the registered task {task!r} made {made!r}, not a ke.Task")
    return made


def make_direct(
    task: str | type[Task] | Callable[[], Task], render_mode: str | None = None, **kwargs: Any
) -> DirectRLEnv:
    """``gymnasium.make`` entry point: one copy of the task as a DirectRLEnv.

    Args:
        task: What the task was registered as (see :func:`build_task`).
        render_mode: None, "human" or "rgb_array".
        **kwargs: Passed to DirectRLEnv (run_config, timing, seed, success, pacer).
    """
    return DirectRLEnv(build_task(task), render_mode=render_mode, **kwargs)


make_direct.metadata = DirectRLEnv.metadata  # type: ignore[attr-defined]


def make_vector(
    task: str | type[Task] | Callable[[], Task],
    num_envs: int = 1,
    render_mode: str | None = None,
    **kwargs: Any,
) -> LearningEnv:
    """``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`` entry point.

    Like every LearningEnv, it runs at the task's own ``sim_dt`` and ``decimation``
    unless ``timing`` / ``dt`` / ``physics_steps_per_action`` are given.

    Args:
        task: What the task was registered as (see :func:`build_task`).
        num_envs: Copies run side by side.
        render_mode: None, "human" or "rgb_array".
        **kwargs: Passed to LearningEnv (seed, env_spacing, run_config, success...).
    """
    return LearningEnv(build_task(task), num_envs=num_envs, render_mode=render_mode, **kwargs)
