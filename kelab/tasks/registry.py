"""Gymnasium entry points of the registered tasks (see :mod:`kelab.tasks`)."""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from kelab.errors import UserError
from kelab.rl.direct import DirectRLEnv
from kelab.rl.env import LearningEnv
from kelab.rl.task import Task

__all__ = ["build_task", "make_direct", "make_vector", "resolve_task", "task_class"]


def _import_task_module(module: str, target: str) -> Any:
    """Import ``module`` like ``python -m`` would, for a ``module:TaskClass`` spec.

    The ``kelab`` console script does not put the current folder on ``sys.path`` (``python
    -m kelab`` does). When ``module`` (or its top-level package) is not found on
    ``sys.path``, the current folder is appended to ``sys.path`` and the import tried
    again; it stays there, so the task's module can import its neighbours. Being last, it
    never shadows a module found elsewhere (the standard library or an installed package)
    with a file of the same name in the current folder.
    """
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        missing_self = err.name is not None and (
            err.name == top or module.startswith(f"{err.name}.")
        )
        cwd = os.getcwd()
        on_path = any(os.path.abspath(entry or os.curdir) == cwd for entry in sys.path)
        if not missing_self or on_path:
            raise UserError(_import_error(module, target, err, cwd)) from err
        sys.path.append(cwd)  # last: a file here never shadows what is installed
        importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ImportError as err:
        if err.name is not None and (err.name == top or module.startswith(f"{err.name}.")):
            sys.path.remove(cwd)  # nothing of the task there: leave sys.path as it was
        raise UserError(_import_error(module, target, err, cwd)) from err


def _import_error(module: str, target: str, err: ImportError, cwd: str) -> str:
    top = module.split(".")[0]
    if (
        isinstance(err, ModuleNotFoundError)
        and err.name is not None
        and (err.name == top or module.startswith(f"{err.name}."))
    ):
        return (
            f"cannot import module {module!r} of task {target!r}: no {err.name!r} in the "
            f"current folder ({cwd}) or on sys.path; run from the folder that contains "
            f"{top}.py (or the {top} package) or add that folder to PYTHONPATH"
        )
    return f"cannot import module {module!r} of task {target!r}: {err}"


def task_class(target: str) -> type[Task]:
    """Return the Task class named by ``"module:Class"`` (``Class`` may be dotted).

    ``module`` is imported from ``sys.path`` or, when it is not found there, from the
    current folder (as ``python -m`` would find it).

    Raises:
        UserError: For a malformed name, a module that does not import, a missing class
            or something that is not a ``ke.Task`` subclass; the message says what to fix.
    """
    module, _, name = target.partition(":")
    parts = name.split(".")
    if not module or not all(part.isidentifier() for part in parts):
        raise UserError(
            f"task {target!r} must be a built-in id or 'package.module:TaskClass' with a "
            "class name after the colon"
        )
    cls: Any = _import_task_module(module, target)
    for part in parts:
        owner, cls = cls, getattr(cls, part, None)
        if cls is None:
            tasks = [
                k for k, v in vars(owner).items() if isinstance(v, type) and issubclass(v, Task)
            ]
            close = difflib.get_close_matches(part, tasks, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "check the name after ':'"
            raise UserError(f"module {module!r} has no class {name!r}; {hint}")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise UserError(f"{target!r} is not a ke.Task subclass; subclass ke.Task")
    return cls


def resolve_task(spec: str) -> tuple[str | None, str]:
    """Return ``(Gymnasium id or None, "module:TaskClass")`` of a task named on a command line.

    Args:
        spec: A built-in id with or without ``kelab/`` (``"CartPole-v0"``,
            ``"kelab/CartPole-v0"``) or ``"package.module:TaskClass"`` of your own task.

    Raises:
        UserError: For an unknown id, listing the built-in ones and the closest id
            (``cartpole-v0`` -> "did you mean CartPole-v0?").

    Example:
        >>> resolve_task("CartPole-v0")
        ('kelab/CartPole-v0', 'kelab.tasks.cartpole:CartPoleTask')
        >>> resolve_task("my_project.tasks:Reach")
        (None, 'my_project.tasks:Reach')
    """
    from kelab.tasks import TASK_IDS

    for env_id in (spec, f"kelab/{spec}"):
        if env_id in TASK_IDS:
            return env_id, TASK_IDS[env_id]
    if ":" in spec and "/" not in spec.split(":", 1)[0]:
        return None, spec  # "package.module:TaskClass" of your own task
    names = [t.split("/", 1)[1] for t in TASK_IDS]
    by_lower = {name.lower(): name for name in names}
    wanted = spec.lower().removeprefix("kelab/")
    close = difflib.get_close_matches(wanted, list(by_lower), n=1, cutoff=0.6)
    hint = f"did you mean {by_lower[close[0]]}? " if close else ""
    namespace, _, name = spec.partition("/")
    if name and namespace != "kelab" and not close:  # "me/Reach-v0": a registered id
        cls = name.split("-")[0] if name.split("-")[0].isidentifier() else "MyTask"
        raise UserError(
            f"unknown task {spec!r}; an id from ke.register_task is for gymnasium.make: name "
            f"its class as module:TaskClass instead (for class {cls} in mytask.py: "
            f"mytask:{cls}, imported from the current folder), or use a built-in task"
        )
    raise UserError(
        f"unknown task {spec!r}; {hint}use a built-in task ({', '.join(names)}) or module:TaskClass"
    )


def build_task(task: str | type[Task] | Callable[[], Task]) -> Task:
    """Make a new task object from what :func:`kelab.tasks.register_task` stored.

    Args:
        task: ``"module:TaskClass"``, a Task subclass, or a function returning a task.

    Raises:
        UserError: If the result is not a ``ke.Task``.
    """
    made = task_class(task)() if isinstance(task, str) else task()
    if not isinstance(made, Task):
        raise UserError(f"the registered task {task!r} made {made!r}, not a ke.Task")
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
