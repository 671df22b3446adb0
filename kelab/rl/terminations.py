"""Named episode endings: validation of ``get_dones()`` results and ``TerminationSet``.

``get_dones()`` returns ``(terminated, truncated)``: a dictionary of named early-end
conditions and one truncation flag per copy. The environment checks the dictionary on
every step (see :class:`TerminationValidator`) and names the first true condition of
each finished episode in reports. See docs/rl.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from kelab.rl.errors import TaskError, describe_array

__all__ = [
    "CUT_SHORT",
    "MAX_CONDITIONS",
    "MAX_NAME_LENGTH",
    "RESERVED_NAMES",
    "TIME_LIMIT",
    "TerminationSet",
    "TerminationValidator",
    "check_condition_name",
    "describe_array",
]

TIME_LIMIT = "time limit"
"""What reports call an episode that reached its real time limit."""
CUT_SHORT = "cut short by the task"
"""What reports call an episode the task truncated before its time limit."""
RESERVED_NAMES = (TIME_LIMIT, CUT_SHORT)
MAX_CONDITIONS = 32
MAX_NAME_LENGTH = 64


def check_condition_name(name: object, where: str = "get_dones()") -> str:
    """Validate one termination condition name.

    Args:
        name: The dictionary key.
        where: Who returned it, for the message.

    Returns:
        The name.

    Raises:
        TaskError: For a non-string, empty, too long, space-padded or reserved name, or
            one with a newline, tab, non-breaking space or other non-printable character.
    """
    if not isinstance(name, str):
        raise TaskError(
            f"{where}: termination condition name {name!r} must be a str such as "
            f"'pole fell', got {type(name).__name__}"
        )
    if not name.strip():
        raise TaskError(
            f"{where}: termination condition name {name!r} is empty; use a short past-tense "
            "phrase such as 'pole fell'"
        )
    if len(name) > MAX_NAME_LENGTH:
        raise TaskError(
            f"{where}: termination condition name {name!r} has {len(name)} characters; the "
            f"limit is {MAX_NAME_LENGTH}"
        )
    if not name.isprintable() or any(c.isspace() and c != " " for c in name):
        odd = sorted({c for c in name if not c.isprintable() or (c.isspace() and c != " ")})
        raise TaskError(
            f"{where}: termination condition name {name!r} contains "
            f"{', '.join(repr(c) for c in odd)}; names are one line of printable text with "
            f"plain spaces, e.g. {' '.join(name.split())!r}"
        )
    if name != name.strip():
        raise TaskError(
            f"{where}: termination condition name {name!r} has surrounding spaces; use "
            f"{name.strip()!r}"
        )
    if name.casefold() in RESERVED_NAMES:
        raise TaskError(
            f"{where}: termination condition name {name!r} is reserved (in any letter case: "
            f"{TIME_LIMIT!r} and {CUT_SHORT!r} are what reports call time-limit and "
            "task-truncated endings); return time limits in `truncated` and rename the "
            "condition"
        )
    return name


class TerminationValidator:
    """Checks every step's ``(terminated, truncated)`` and stacks the conditions.

    The first valid dictionary fixes the names (and their order); later steps must
    return the same names in the same order.

    Args:
        num_envs: Number of environment copies.
        where: The method name used in messages.
    """

    def __init__(self, num_envs: int, where: str = "get_dones()") -> None:
        self.num_envs = int(num_envs)
        self.where = where
        self.names: tuple[str, ...] | None = None

    def __call__(self, result: object) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        """Validate one ``get_dones()`` result.

        Args:
            result: What the task returned.

        Returns:
            ``(names, conditions, truncated)``: the names in dictionary order, a new bool
            array ``(len(names), num_envs)`` and the task's own bool array ``(num_envs,)``
            (the caller copies it before keeping it: the env ORs it with the time limit).

        Raises:
            TaskError: Naming the offending condition and what was wrong.
        """
        where, n = self.where, self.num_envs
        if not isinstance(result, tuple) or len(result) != 2:
            raise TaskError(
                f"{where} must return (terminated, truncated): a dict of named bool arrays and "
                f"one bool array, got {describe_array(result)}"
            )
        terminated, truncated = result
        # a dict (the usual) skips the ABC's isinstance (#40: ~3 us a step)
        if type(terminated) is not dict and not isinstance(terminated, Mapping):
            raise TaskError(
                f"{where}: terminated must be a dict mapping condition names to bool arrays "
                f"(return {{}} when episodes never end early), got {describe_array(terminated)}"
            )
        names = tuple(terminated.keys())
        if names != self.names:
            self._check_names(names)
        conditions = np.empty((len(names), n), dtype=bool)
        for k, name in enumerate(names):
            value = terminated[name]
            if not isinstance(value, np.ndarray) or value.dtype != np.bool_ or value.shape != (n,):
                raise TaskError(
                    f"{where}: termination condition {name!r} must be a numpy bool array of "
                    f"shape ({n},) (one flag per copy), got {describe_array(value)}"
                )
            conditions[k] = value
        if (
            not isinstance(truncated, np.ndarray)
            or truncated.dtype != np.bool_
            or truncated.shape != (n,)
        ):
            raise TaskError(
                f"{where}: truncated must be a numpy bool array of shape ({n},) (one flag per "
                f"copy), got {describe_array(truncated)}"
            )
        return names, conditions, truncated

    def _check_names(self, names: tuple[Any, ...]) -> None:
        where = self.where
        if len(names) > MAX_CONDITIONS:
            raise TaskError(
                f"{where}: terminated has {len(names)} conditions; at most {MAX_CONDITIONS} "
                f"are allowed (names: {list(names)})"
            )
        for name in names:
            check_condition_name(name, where)
        if self.names is None:
            self.names = names
            return
        before, now = self.names, names
        missing = [x for x in before if x not in now]
        added = [x for x in now if x not in before]
        if missing or added:
            detail = []
            if added:
                detail.append(f"new condition(s) {added}")
            if missing:
                detail.append(f"missing condition(s) {missing}")
            raise TaskError(
                f"{where}: terminated must name the same conditions on every step; this step "
                f"has {' and '.join(detail)} (first step: {list(before)}). Return every "
                "condition every step, False where it does not apply"
            )
        raise TaskError(
            f"{where}: terminated must list its conditions in the same order on every step "
            f"(reports name the first true one); first step: {list(before)}, this step: "
            f"{list(now)}"
        )


Condition = Callable[[], np.ndarray]


class TimeLimited(Protocol):
    """What `TerminationSet` reads of its task: the time limit (a bound ``ke.Task``)."""

    episode_length_buf: np.ndarray
    max_episode_length: int


class TerminationSet:
    """Named early-end conditions, evaluated together by :meth:`check`.

    Give every condition a short past-tense name and return ``self.terminations.check()``
    directly from ``get_dones()``. The truncation flag is the task's time limit
    (``episode_length_buf >= max_episode_length - 1``) when a task is given, or-ed with an
    optional ``truncate`` condition.

    Args:
        task: The task whose time limit gives ``truncated`` (None: only ``truncate``).
        conditions: Optional ``{name: callable}``; each callable returns bool ``(num_envs,)``.
        truncate: Optional callable returning bool ``(num_envs,)`` for task truncations.

    Raises:
        TaskError: For an invalid or repeated name, or more than 32 conditions.

    Example:
        >>> import numpy as np
        >>> terms = TerminationSet(conditions={"pole fell": lambda: np.array([True, False])})
        >>> terms.add("cart left the track", lambda: np.array([False, False]))
        TerminationSet(['pole fell', 'cart left the track'])
        >>> terminated, truncated = terms.check()
        >>> terminated["pole fell"], truncated
        (array([ True, False]), array([False, False]))
    """

    def __init__(
        self,
        task: TimeLimited | None = None,
        conditions: Mapping[str, Condition] | None = None,
        truncate: Condition | None = None,
    ) -> None:
        self._task = task
        self._conditions: dict[str, Condition] = {}
        self._truncate = truncate
        if truncate is not None and not callable(truncate):
            raise TaskError(f"TerminationSet truncate must be callable, got {truncate!r}")
        for name, fn in (conditions or {}).items():
            self.add(name, fn)

    def add(self, name: str, condition: Condition) -> TerminationSet:
        """Add a named condition; returns the set, so calls can be chained.

        Args:
            name: Short past-tense phrase ("pole fell"); unique; not a reserved name.
            condition: Callable returning a bool ``(num_envs,)`` array.

        Raises:
            TaskError: For an invalid, reserved or repeated name, or too many conditions.
        """
        check_condition_name(name, "TerminationSet.add()")
        if name in self._conditions:
            raise TaskError(f"TerminationSet already has a condition named {name!r}")
        if len(self._conditions) >= MAX_CONDITIONS:
            raise TaskError(f"TerminationSet holds at most {MAX_CONDITIONS} conditions")
        if not callable(condition):
            raise TaskError(
                f"TerminationSet condition {name!r} must be callable, got {condition!r}"
            )
        self._conditions[name] = condition
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """The condition names in the order they were added."""
        return tuple(self._conditions)

    def check(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Evaluate every condition and the truncation flag.

        Returns:
            ``(terminated, truncated)`` ready to return from ``get_dones()``.

        Raises:
            TaskError: If no task is given and no condition shows the number of copies.
        """
        terminated = {name: np.asarray(fn()) for name, fn in self._conditions.items()}
        if self._task is not None:
            task = self._task
            truncated = task.episode_length_buf >= task.max_episode_length - 1
        else:
            truncated = None
        if self._truncate is not None:
            extra = np.asarray(self._truncate())
            truncated = extra.copy() if truncated is None else (truncated | extra)
        if truncated is None:
            if not terminated:
                raise TaskError(
                    "TerminationSet.check(): with no task, no conditions and no truncate there "
                    "is no way to know the number of copies; pass task=self"
                )
            first = next(iter(terminated.values()))
            truncated = np.zeros(first.shape, dtype=bool)
        return terminated, truncated

    def __repr__(self) -> str:
        return f"TerminationSet({list(self._conditions)})"
