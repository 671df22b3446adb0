"""KELab's built-in tasks, registered with Gymnasium under the ``kelab/`` namespace.

``gymnasium.make("kelab/CartPole-v0", render_mode=...)`` returns a
:class:`~kelab.rl.direct.DirectRLEnv`; ``gymnasium.make_vec("kelab/CartPole-v0",
num_envs=N, vectorization_mode="vector_entry_point")`` returns a
:class:`~kelab.rl.env.LearningEnv`. Ids: ``kelab/CartPole-v0``, ``kelab/Humanoid-v0``,
``kelab/Pi-Locomotion-v0``, ``kelab/BallToGoal-v0``.

Registration is cheap and automatic: ``import kelab`` calls
:func:`install_registration_hook`, which registers at once when Gymnasium is already
imported, and otherwise registers right after Gymnasium's own import finishes (a one-shot
import hook), so ``import kelab`` never imports Gymnasium itself. :func:`register_tasks`
does it explicitly; ``gymnasium.make("kelab.tasks:kelab/CartPole-v0")`` works too.
See docs/tasks.md.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

__all__ = ["TASK_IDS", "install_registration_hook", "register_tasks"]

TASK_IDS: dict[str, str] = {
    "kelab/CartPole-v0": "kelab.tasks.cartpole:CartPoleTask",
    "kelab/Humanoid-v0": "kelab.tasks.humanoid:HumanoidTask",
    "kelab/Pi-Locomotion-v0": "kelab.tasks.pi_locomotion:PiLocomotionTask",
    "kelab/BallToGoal-v0": "kelab.tasks.ball_to_goal:BallToGoalTask",
}
"""Gymnasium id -> ``module:TaskClass`` of every built-in task."""


def register_tasks() -> list[str]:
    """Register every built-in task with Gymnasium (idempotent).

    Returns:
        The ids registered by this call (empty when all were registered already).
    """
    import gymnasium

    added = []
    for env_id, target in TASK_IDS.items():
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            entry_point="kelab.tasks.registry:make_direct",
            vector_entry_point="kelab.tasks.registry:make_vector",
            kwargs={"task": target},
            nondeterministic=False,
        )
        added.append(env_id)
    return added


class _RegisterAfterGymnasium:
    """One-shot meta-path finder: registers the tasks right after ``import gymnasium``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "gymnasium":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            register_tasks()

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install_registration_hook() -> None:
    """Register the tasks now if Gymnasium is imported, else right after it is."""
    gym = sys.modules.get("gymnasium")
    if gym is not None and hasattr(gym, "register"):
        register_tasks()
        return
    if not any(isinstance(f, _RegisterAfterGymnasium) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterGymnasium())


install_registration_hook()
