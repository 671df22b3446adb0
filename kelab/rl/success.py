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
from kelab.rl.task import TaskError
from kelab.rl.terminations import CUT_SHORT, TIME_LIMIT, describe_array

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


class RuleContext:
    """What the rule helpers know while a finished episode is judged.

    Args:
        num_envs: Number of copies.
        names: Termination condition names in ``get_dones()`` order.
        conditions: bool ``(len(names), num_envs)``: each condition on the final step.
        time_up: bool ``(num_envs,)``: the episode reached its real time limit.
        truncated: bool ``(num_envs,)``: the final truncation flags (task or time limit).
    """

    def __init__(
        self,
        num_envs: int,
        names: Sequence[str],
        conditions: np.ndarray,
        time_up: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        self.num_envs = int(num_envs)
        self.names = tuple(names)
        self.conditions = conditions
        self.time_up = time_up
        self.truncated = truncated
        self.any_condition = (
            conditions.any(axis=0) if len(self.names) else np.zeros(self.num_envs, dtype=bool)
        )
        self.checks: dict[str, np.ndarray] = {}

    def survived(self) -> np.ndarray:
        """No named condition fired and the real time limit was reached."""
        return ~self.any_condition & self.time_up

    def ended_by(self, name: str) -> np.ndarray:
        """The named condition was true on the final step."""
        if isinstance(name, str):
            if name in self.names:
                return self.conditions[self.names.index(name)].copy()
            folded = name.casefold()
            if folded == TIME_LIMIT:
                return ~self.any_condition & self.time_up
            if folded == CUT_SHORT:
                return ~self.any_condition & self.truncated & ~self.time_up
        raise ValueError(
            f"task.ended_by({name!r}): unknown condition; get_dones() returns "
            f"{list(self.names)} (plus {TIME_LIMIT!r} and {CUT_SHORT!r})"
        )

    def check(self, name: str, value: np.ndarray) -> np.ndarray:
        """Record a named per-copy bool for the report and return it unchanged."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"task.check(name, value): name must be a non-empty str, got {name!r}")
        if name in self.checks:
            raise ValueError(
                f"task.check({name!r}, ...) was called twice in one rule; every check needs a "
                "unique name"
            )
        n = self.num_envs
        if not isinstance(value, np.ndarray) or value.dtype != np.bool_ or value.shape != (n,):
            got = describe_array(value)
            raise ValueError(
                f"task.check({name!r}, value): value must be a numpy bool array of shape ({n},), "
                f"got {got}"
            )
        self.checks[name] = value.copy()
        return value


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
    task.__dict__["_ke_rule_context"] = ctx
    try:
        result = rule(task)
    finally:
        task.__dict__.pop("_ke_rule_context", None)
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
