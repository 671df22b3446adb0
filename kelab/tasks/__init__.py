"""KELab's built-in tasks, registered with Gymnasium under the ``kelab/`` namespace.

``gymnasium.make("kelab/CartPole-v0", render_mode=...)`` returns a
:class:`~kelab.rl.direct.DirectRLEnv`; ``gymnasium.make_vec("kelab/CartPole-v0",
num_envs=N, vectorization_mode="vector_entry_point")`` returns a
:class:`~kelab.rl.env.LearningEnv`. Ids: ``kelab/CartPole-v0``, ``kelab/CartPole-Pixels-v0``,
``kelab/Humanoid-v0``, ``kelab/Pi-Locomotion-v0``, ``kelab/BallToGoal-v0``.

Registration is explicit: importing this module calls :func:`register_tasks`, which
calls ``gymnasium.register`` once per built-in id (nothing else of KELab is imported
until an environment is made). ``import kelab`` imports this module when Gymnasium is
imported, before or after KELab (``kelab/_after_import.py``), so ``import kelab`` alone
loads neither. ``gymnasium.make("kelab:kelab/CartPole-v0")`` works without importing
KELab first, through Gymnasium's own ``"module:id"`` form. Your own tasks register the
same way with :func:`register_task`. See docs/tasks.md.

Example:
    >>> import gymnasium
    >>> import kelab as ke
    >>> "kelab/CartPole-v0" in gymnasium.registry
    True
    >>> ke.register_task("me/Balance-v0", "kelab.tasks.cartpole:CartPoleTask")
    >>> env = gymnasium.make("me/Balance-v0")
    >>> type(env.unwrapped).__name__
    'DirectRLEnv'
    >>> env.close()
    >>> del gymnasium.registry["me/Balance-v0"]
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kelab._validate import check_bool
from kelab.errors import UserError

if TYPE_CHECKING:
    from typing import TypeAlias

    from kelab.rl.task import Task

    # what a task is registered as: "module:Class", a Task subclass or a factory
    TaskSource: TypeAlias = str | type[Task] | Callable[[], Task]

__all__ = ["TASK_IDS", "register_task", "register_tasks"]

TASK_IDS: dict[str, str] = {
    "kelab/CartPole-v0": "kelab.tasks.cartpole:CartPoleTask",
    "kelab/CartPole-Pixels-v0": "kelab.tasks.cartpole_pixels:CartPolePixelsTask",
    "kelab/Humanoid-v0": "kelab.tasks.humanoid:HumanoidTask",
    "kelab/Pi-Locomotion-v0": "kelab.tasks.pi_locomotion:PiLocomotionTask",
    "kelab/BallToGoal-v0": "kelab.tasks.ball_to_goal:BallToGoalTask",
}
"""Gymnasium id -> ``module:TaskClass`` of every built-in task."""

_DIRECT = "kelab.tasks.registry:make_direct"
_VECTOR = "kelab.tasks.registry:make_vector"
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _task_target(task: TaskSource) -> TaskSource:
    """What the entry points rebuild the task from: ``"module:Class"`` where possible."""
    if isinstance(task, str):
        if not _TARGET.match(task):
            raise UserError(
                f"task must name a Task class as 'module:Class', got {task!r}; "
                "e.g. 'my_project.tasks:ReachTask', or pass the class itself"
            )
        return task
    if isinstance(task, type):
        from kelab.rl.task import Task

        if not issubclass(task, Task):
            raise UserError(
                f"task must be a ke.Task subclass, got the class {task.__qualname__}; "
                "subclass ke.Task (docs/rl.md)"
            )
        name = f"{task.__module__}:{task.__qualname__}"
        # a class importable by name is stored by name (a plain, JSON-able EnvSpec that
        # subprocess workers can rebuild); others (defined in a function) as the object
        if task.__module__ != "__main__" and "<locals>" not in task.__qualname__:
            try:
                found = importlib.import_module(task.__module__)
                for part in task.__qualname__.split("."):
                    found = getattr(found, part)
            except (ImportError, AttributeError):
                found = None
            if found is task:
                return name
        return task
    if callable(task):
        return task
    raise UserError(
        f"task must be a ke.Task subclass, a 'module:Class' string or a function returning "
        f"a ke.Task, got {task!r}"
    )


def register_task(
    env_id: str, task: TaskSource, *, replace: bool = False, **env_kwargs: Any
) -> None:
    """Register a task with Gymnasium, like the built-in ``kelab/...`` ids.

    Afterwards ``gymnasium.make(env_id)`` returns a :class:`~kelab.rl.direct.DirectRLEnv`
    and ``gymnasium.make_vec(env_id, num_envs=N, vectorization_mode="vector_entry_point")``
    a :class:`~kelab.rl.env.LearningEnv`, each with a new task object. Registering the
    same id with the same task and keywords again does nothing.

    Args:
        env_id: A Gymnasium id, ``"namespace/Name-vN"`` (e.g. ``"me/Reach-v0"``).
        task: A ``ke.Task`` subclass, ``"module:Class"`` naming one (imported when the
            first environment is made), or a function with no arguments returning a task.
        replace: Replace an id that is registered to something else (otherwise an error).
        **env_kwargs: Default keywords of the environment (``seed``, ``run_config``,
            ``layout``...); keywords given to ``gymnasium.make`` / ``make_vec`` win.

    Raises:
        UserError: For a malformed id or task, or an id already registered to another
            task (unless ``replace``).

    Example:
        >>> import kelab as ke
        >>> from kelab.tasks.cartpole import CartPoleTask
        >>> ke.register_task("me/CartPole-v0", CartPoleTask, seed=3)
        >>> ke.register_task("me/CartPole-v0", CartPoleTask, seed=3)  # the same: no-op
        >>> import gymnasium
        >>> gymnasium.registry["me/CartPole-v0"].kwargs
        {'task': 'kelab.tasks.cartpole:CartPoleTask', 'seed': 3}
        >>> del gymnasium.registry["me/CartPole-v0"]
    """
    import gymnasium
    from gymnasium.envs.registration import parse_env_id

    if not isinstance(env_id, str) or ":" in env_id:
        raise UserError(
            f"env_id must be a Gymnasium id such as 'me/Reach-v0' (no ':'), got {env_id!r}"
        )
    try:
        parse_env_id(env_id)
    except gymnasium.error.Error as exc:
        raise UserError(
            f"env_id must be a Gymnasium id 'namespace/Name-vN' such as 'me/Reach-v0', got "
            f"{env_id!r} ({exc})"
        ) from None
    check_bool(replace, "replace")
    if "task" in env_kwargs:
        raise UserError("give the task as the second argument, not as a task= keyword")
    kwargs = {"task": _task_target(task), **env_kwargs}
    old = gymnasium.registry.get(env_id)
    if old is not None:
        if old.entry_point == _DIRECT and old.vector_entry_point == _VECTOR:
            if old.kwargs == kwargs:
                return
        if not replace:
            raise UserError(
                f"env_id {env_id!r} is already registered (to {old.kwargs.get('task', old)!r}); "
                "choose another id or version, or pass replace=True"
            )
        del gymnasium.registry[env_id]
    gymnasium.register(
        id=env_id,
        entry_point=_DIRECT,
        vector_entry_point=_VECTOR,
        kwargs=kwargs,
        nondeterministic=False,
    )


def register_tasks() -> list[str]:
    """Register every built-in task with Gymnasium (idempotent; importing this module does it).

    Returns:
        The ids registered by this call (empty when all were registered already).
    """
    import gymnasium

    added = [env_id for env_id in TASK_IDS if env_id not in gymnasium.registry]
    for env_id in added:
        register_task(env_id, TASK_IDS[env_id])
    return added


register_tasks()
