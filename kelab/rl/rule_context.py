"""What a success rule's helpers know while a finished episode is judged (`RuleContext`).

It sits below ``task.py`` (whose ``survived()``, ``ended_by()`` and ``check()`` read it)
and ``success.py`` (whose ``judge`` makes one), so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kelab.rl.errors import describe_array
from kelab.rl.terminations import CUT_SHORT, TIME_LIMIT

__all__ = ["RULE_CONTEXT_KEY", "RuleContext"]

RULE_CONTEXT_KEY = "_ke_rule_context"
"""Where `kelab.rl.success.judge` puts the `RuleContext` in a task's ``__dict__`` while
its success rule runs (read by ``task.survived()``, ``task.ended_by()`` and
``task.check()``; never a name a task would use)."""


class RuleContext:
    """What the rule helpers know while a finished episode is judged.

    Args:
        num_envs: Number of copies.
        names: Termination condition names in ``get_dones()`` order.
        conditions: bool ``(len(names), num_envs)``: each condition on the final step.
        time_up: bool ``(num_envs,)``: the episode reached its real time limit.
        truncated: bool ``(num_envs,)``: the final truncation flags (task or time limit).
        any_condition: bool ``(num_envs,)``: some condition was true (the step's
            ``terminated``, computed once by the env); None computes it from ``conditions``.
    """

    def __init__(
        self,
        num_envs: int,
        names: Sequence[str],
        conditions: np.ndarray,
        time_up: np.ndarray,
        truncated: np.ndarray,
        any_condition: np.ndarray | None = None,
    ) -> None:
        self.num_envs = int(num_envs)
        self.names = tuple(names)
        self.conditions = conditions
        self.time_up = time_up
        self.truncated = truncated
        if any_condition is None:
            any_condition = (
                conditions.any(axis=0) if len(self.names) else np.zeros(self.num_envs, dtype=bool)
            )
        self.any_condition = any_condition
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
