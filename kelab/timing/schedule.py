"""The order of a timeline's step: phases, priorities, and what a step reports.

Every step of a `kelab.timing.timeline.Timeline` runs its callbacks phase by phase
(`Phase`), lower priority first inside a phase; `ExecutionOrder` is that order as a
table and `StepResult` one executed boundary. See docs/timing.md.
"""

from __future__ import annotations

import enum
import inspect
from fractions import Fraction
from typing import NamedTuple

from kelab._validate import check_int, must, show
from kelab.errors import UserError

__all__ = [
    "DEFAULT_PRIORITY",
    "ON_UPDATE_PRIORITY",
    "ExecutionOrder",
    "ExecutionOrderRow",
    "Phase",
    "StepResult",
    "check_callable",
    "check_phase",
    "check_priority",
]

#: Default priority of an "OnUpdate"-style callback: before controllers at 0.
ON_UPDATE_PRIORITY = -200
DEFAULT_PRIORITY = 0


class Phase(enum.IntEnum):
    """The five phases of every step, in execution order."""

    ACQUISITION = 0
    CONTROL = 1
    PHYSICS = 2
    VALIDATION = 3
    EXPORT = 4


def check_phase(phase: object) -> Phase:
    """Validate a phase: a `Phase`, its name (any case) or its number."""
    if isinstance(phase, Phase):
        return phase
    try:
        return Phase[str(phase).upper()] if isinstance(phase, str) else Phase(phase)
    except (KeyError, ValueError):
        names = ", ".join(p.name for p in Phase)
        raise ValueError(must("phase", f"a Phase ({names})", phase)) from None


def check_priority(priority: object) -> int:
    """Validate a priority: an int (lower runs first)."""
    return check_int(priority, "priority", fix="lower runs first")


def check_callable(fn: object, name: str, args: tuple[str, ...], fix: str) -> None:
    """Refuse ``fn`` unless it is callable with the positional arguments ``args``.

    Checked where ``fn`` is handed over (bound, assigned), not where it is first called:
    ``inspect.signature(fn).bind(*args)`` must succeed. A callable whose signature Python
    cannot read (some builtins) is taken as it is.

    Args:
        fn: The callable.
        name: Where it goes, for the message (``"Timeline.bind(callback)"``).
        args: The names of the arguments it will be called with (``("ts",)``).
        fix: What to do instead, for the message.

    Raises:
        UserError: One line, e.g. ``"Timeline.bind(callback) must be a callable taking
            (ts), got control(ts, gain); ..."``.

    Example:
        >>> check_callable(lambda ts: None, "callback", ("ts",), "")
        >>> check_callable(print, "callback", ("ts",), "")  # no readable signature: taken
        >>> try:
        ...     check_callable(lambda: None, "callback", ("ts",), "take ts")
        ... except ValueError as e:
        ...     print(e)
        callback must be a callable taking (ts), got <lambda>(); take ts
    """
    wanted = f"a callable taking ({', '.join(args)})"
    if not callable(fn):
        raise UserError(must(name, wanted, fn, fix))
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # no signature to read: the call itself will tell
    try:
        signature.bind(*args)
    except TypeError:
        label = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        label = label.split("<locals>.")[-1]
        got = f"{label}{signature}" if len(label) + len(str(signature)) < 80 else show(fn)
        raise UserError(
            f"{name} must be {wanted}, got {got}" + (f"; {fix}" if fix else "")
        ) from None


class StepResult(NamedTuple):
    """One executed boundary: its exact time and the runners that stepped."""

    time: Fraction
    runners: tuple[str, ...]


class ExecutionOrderRow(NamedTuple):
    """One bound callback in execution order."""

    phase: Phase
    priority: int
    name: str
    runner: str
    hz: float


class ExecutionOrder(tuple):
    """Every bound callback grouped by phase and sorted by priority; `str` is a table."""

    def __str__(self) -> str:
        header = ("phase", "priority", "callback", "runner", "Hz")
        rows = [(r.phase.name, str(r.priority), r.name, r.runner, f"{r.hz:g}") for r in self]
        widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(header)]
        line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False))
        out = [line, "  ".join("-" * w for w in widths)]
        out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) for row in rows]
        return "\n".join(out)
