"""Success rules (``@ke.success``), the rule helpers' context, and ``DwellTimer``.

A success rule is a function ``rule(task) -> bool (num_envs,)`` marked with
:func:`success`. The environment runs it on the final step of every finished episode,
before that copy resets; inside it ``task.survived()``, ``task.ended_by(name)`` and
``task.check(name, value)`` describe how the episode ended. See docs/rl.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from kelab._validate import check_int, check_positive
from kelab.rl.errors import TaskError, describe_array
from kelab.rl.rule_context import RULE_CONTEXT_KEY, RuleContext

if TYPE_CHECKING:
    from kelab.rl.task import Task

__all__ = ["DwellTimer", "RuleContext", "SuccessRule", "judge", "success"]


class SuccessRule:
    """A function marked with ``@ke.success``: ``rule(task) -> bool (num_envs,)``.

    Args:
        fn: The rule function. It receives the running task; leave it unannotated.
    """

    def __init__(self, fn: Callable[[Task], np.ndarray]) -> None:
        if isinstance(fn, SuccessRule):
            fn = fn.fn
        if not callable(fn):
            raise ValueError(f"@ke.success must decorate a function rule(task), got {fn!r}")
        self.fn = fn
        self.name: str = getattr(fn, "__name__", type(fn).__name__)
        functools.update_wrapper(self, fn)

    def __call__(self, task: Task) -> np.ndarray:
        """Run the rule (only meaningful while the environment judges an episode)."""
        return self.fn(task)

    def __repr__(self) -> str:
        return f"<success rule {self.name}>"


def success(fn: Callable[[Task], np.ndarray]) -> SuccessRule:
    """Mark ``fn(task) -> bool (num_envs,)`` as a success rule.

    Args:
        fn: The rule. Inside it use ``task.survived()``, ``task.ended_by(name)`` and
            ``task.check(name, value)``; read public task and robot state only.

    Returns:
        A :class:`SuccessRule`, usable as ``ke.evaluate(..., success=rule)``, as a
        ``Task.success_rule`` class attribute, or as ``LearningEnv(..., success=rule)``.

    Example:
        >>> import kelab as ke
        >>> @ke.success
        ... def balanced(task):
        ...     return task.survived()
        >>> balanced
        <success rule balanced>
    """
    return SuccessRule(fn)


def judge(rule: SuccessRule, task: Task, ctx: RuleContext) -> tuple[np.ndarray, dict]:
    """Run ``rule`` on ``task`` with the helpers enabled.

    Args:
        rule: The success rule.
        task: The running task (bound to an environment).
        ctx: How each copy's episode ended.

    Returns:
        ``(success, checks)``: bool ``(num_envs,)`` and ``{check name: bool (num_envs,)}``.

    Raises:
        TaskError: If the rule does not return a bool ``(num_envs,)`` array.
    """
    task.__dict__[RULE_CONTEXT_KEY] = ctx
    try:
        result = rule(task)
    finally:
        task.__dict__.pop(RULE_CONTEXT_KEY, None)
    n = ctx.num_envs
    if not isinstance(result, np.ndarray) or result.dtype != np.bool_ or result.shape != (n,):
        got = describe_array(result)
        raise TaskError(
            f"success rule {getattr(rule, 'name', rule)!r} must return a numpy bool array of "
            f"shape ({n},), got {got}"
        )
    return result.copy(), ctx.checks


class DwellTimer:
    """Per-copy "arrive and stay" timer: true once a condition has held long enough.

    ``update(condition)`` is called once per env step; a copy's count grows while its
    condition holds and drops to zero the moment it does not, so flying through a goal
    never counts. ``progress`` (0..1) is a shaped reward for staying.

    Args:
        num_envs: Number of copies.
        hold_s: Seconds the condition must hold without a break (> 0).
        dt: Seconds per update (the env's ``step_dt``).

    Example:
        >>> import numpy as np
        >>> timer = DwellTimer(num_envs=2, hold_s=0.03, dt=0.01)
        >>> [timer.update(np.array([True, i != 1])).tolist() for i in range(4)]
        [[False, False], [False, False], [True, False], [True, False]]
        >>> timer.hold_steps, timer.count.tolist()
        (3, [4, 2])
    """

    def __init__(self, num_envs: int, hold_s: float, dt: float) -> None:
        self.num_envs = check_int(num_envs, "DwellTimer.num_envs", low=1)
        self.hold_s = check_positive(hold_s, "DwellTimer.hold_s", unit="seconds")
        self.dt = check_positive(dt, "DwellTimer.dt", unit="seconds")
        ratio = self.hold_s / self.dt
        nearest = round(ratio)
        steps = nearest if abs(ratio - nearest) <= 1e-9 * max(1.0, nearest) else math.ceil(ratio)
        self.hold_steps = max(1, int(steps))
        self.count = np.zeros(self.num_envs, dtype=np.int64)

    def update(self, condition: np.ndarray) -> np.ndarray:
        """Advance one step.

        Args:
            condition: bool ``(num_envs,)``: inside the goal and slow enough, this step.

        Returns:
            bool ``(num_envs,)``: the condition has now held for ``hold_s`` or longer.
        """
        cond = np.asarray(condition)
        if cond.dtype != np.bool_ or cond.shape != (self.num_envs,):
            raise ValueError(
                f"DwellTimer.update(condition) needs a bool array of shape ({self.num_envs},), "
                f"got {cond.dtype} {cond.shape}"
            )
        self.count += 1
        self.count[~cond] = 0
        return self.count >= self.hold_steps

    @property
    def done(self) -> np.ndarray:
        """Bool ``(num_envs,)``: held for at least ``hold_s`` as of the last update."""
        return self.count >= self.hold_steps

    @property
    def progress(self) -> np.ndarray:
        """Float ``(num_envs,)`` in [0, 1]: fraction of ``hold_s`` held so far."""
        return np.minimum(self.count / self.hold_steps, 1.0)

    @property
    def held_s(self) -> np.ndarray:
        """Float ``(num_envs,)``: seconds the condition has held without a break."""
        return self.count * self.dt

    def reset(self, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Zero the timer of some copies (all when None).

        Args:
            env_ids: Copies whose episode restarts.
        """
        if env_ids is None:
            self.count[:] = 0
        else:
            self.count[np.asarray(env_ids, dtype=np.int64)] = 0

    def state_dict(self) -> dict[str, np.ndarray]:
        """Return a copy of the timer state (for environment snapshots)."""
        return {"count": self.count.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state_dict` output in place."""
        self.count[...] = state["count"]
