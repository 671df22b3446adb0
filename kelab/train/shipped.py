"""The policies KELab ships for its built-in tasks (``kelab play <Task>`` with no checkpoint).

Each lives in ``kelab/train/policies/`` as ``<TaskClass>.json`` and its safetensors file;
``kelab play``, ``kelab eval``, ``kelab export`` and :func:`kelab.train.export.export_onnx`
use it when no checkpoint is given.

Example:
    >>> shipped_policy("kelab.tasks.cartpole:CartPoleTask").name
    'CartPoleTask.json'
    >>> shipped_policy("my_tasks:MyTask") is None
    True
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["POLICY_DIR", "shipped_policy"]

POLICY_DIR = Path(__file__).resolve().parent / "policies"
"""Where the shipped policies live (``<TaskClass>.json`` + its safetensors)."""


def shipped_policy(class_path: str) -> Path | None:
    """The shipped checkpoint of a task class, or None when KELab ships none.

    Args:
        class_path: The task's ``"module:TaskClass"`` (only the class name is used).

    Returns:
        The checkpoint's ``.json`` path, or None.
    """
    name = class_path.rpartition(":")[2]
    path = POLICY_DIR / f"{name}.json"
    return path if path.is_file() else None
