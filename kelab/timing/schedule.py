"""The order of a timeline's step: phases, priorities, and what a step reports.

Every step of a `kelab.timing.timeline.Timeline` runs its callbacks phase by phase
(`Phase`), lower priority first inside a phase; `ExecutionOrder` is that order as a
table and `StepResult` one executed boundary. See docs/timing.md.
"""

from __future__ import annotations

import enum
from fractions import Fraction
from typing import NamedTuple

from kelab._validate import check_int, must

__all__ = [
    "DEFAULT_PRIORITY",
    "ON_UPDATE_PRIORITY",
    "ExecutionOrder",
    "ExecutionOrderRow",
    "Phase",
    "StepResult",
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
