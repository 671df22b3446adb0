"""Wall-clock pacing for externally stepped loops (PACED run mode).

`SimulationPacer.wait()` is called once per environment step. It waits only when the step
finished ahead of its deadline, and then until exactly that deadline; it never catches up
after a late step. Deadlines are absolute (``start + n * step_dt``) so rounding never drifts
the rate. A clock that jumps backwards re-anchors the schedule, so no wait is ever longer
than one step; a clock reading that is not a finite number is a ValueError. See
docs/timing.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from kelab._validate import check_number, check_positive
from kelab.timing.guard import ensure_not_in_fixed_step

__all__ = ["SimulationPacer", "precise_sleep", "read_clock"]

# time.sleep on Linux overshoots by ~50-100 us; sleeping coarsely until this margin before
# the deadline and spinning for the rest lands within a few microseconds of it.
_SPIN_MARGIN_S = 0.0008


def precise_sleep(seconds: float) -> None:
    """Sleep for ``seconds`` precisely: a coarse `time.sleep`, then a short spin.

    The spin covers only the last fraction of a millisecond, so the CPU cost is small
    while the wake-up error is microseconds instead of the scheduler's ~0.1 ms.

    Args:
        seconds: How long to sleep; zero or negative returns at once.

    Raises:
        ValueError: For NaN, an infinity or a non-number (a sleep must be finite).
    """
    seconds = check_number(
        seconds,
        "precise_sleep: seconds",
        fix="a wait that long is a bug in the caller's clock arithmetic",
    )
    if not seconds > 0:
        return
    deadline = time.perf_counter() + seconds
    coarse = seconds - _SPIN_MARGIN_S
    if coarse > 0:
        time.sleep(coarse)
    while time.perf_counter() < deadline:
        pass


def read_clock(clock: Callable[[], float], owner: str) -> float:
    """Call ``clock`` and return its reading, refusing anything but a finite number.

    Args:
        clock: Returns the current time in seconds.
        owner: Who reads it, for the message (``"SimulationPacer"``).

    Returns:
        The reading as a float.

    Raises:
        ValueError: For NaN, an infinity, a bool or a non-number, naming the value.
    """
    return check_number(
        clock(),
        f"{owner} clock reading",
        unit="seconds",
        fix="the clock is broken (pass a clock like time.perf_counter)",
    )


class SimulationPacer:
    """Waits so that environment steps happen at ``step_dt`` intervals of wall time.

    A reading earlier than the previous one (a wall clock set back, an injected clock
    restarted) re-anchors the schedule at that reading, like a late step: no wait is ever
    longer than ``step_dt`` and the rate is kept from there on (`clock_jumps` counts
    them). A clock that returns NaN, an infinity or a non-number is a ValueError.

    Args:
        step_dt: Wall seconds per environment step (> 0).
        clock: Returns the current time in seconds (inject a fake clock in tests).
        sleep: Sleeps for the given seconds (inject a fake in tests).

    Example:
        >>> pacer = SimulationPacer(1 / 60)
        >>> for _ in range(3):
        ...     waited = pacer.wait()  # at most 1/60 s each
        >>> pacer.steps
        3
    """

    def __init__(
        self,
        step_dt: float,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = precise_sleep,
    ) -> None:
        self.step_dt = check_positive(step_dt, "SimulationPacer.step_dt", unit="seconds")
        self._clock = clock
        self._sleep = sleep
        self.reset()

    def reset(self) -> None:
        """Start a new schedule now: the next deadline is one ``step_dt`` from now.

        Raises:
            ValueError: When the clock returns NaN, an infinity or a non-number.
        """
        self._anchor = self._last = read_clock(self._clock, "SimulationPacer")
        self._index = 1  # the next deadline is anchor + index * step_dt
        self.steps = 0
        self.late_steps = 0
        self.clock_jumps = 0

    @property
    def next_deadline(self) -> float:
        """The clock time at which the next step is due."""
        return self._anchor + self._index * self.step_dt

    def wait(self) -> float:
        """Wait until the current step's deadline if ahead of it; never catch up if late.

        Returns:
            The seconds waited (0.0 for a late step).

        Raises:
            RuntimeError: When called from inside an App fixed step.
            ValueError: When the clock returns NaN, an infinity or a non-number.
        """
        ensure_not_in_fixed_step(
            "SimulationPacer.wait()",
            "Keep App physics in fixed_update() and let the App's FixedStepClock schedule "
            "it; SimulationPacer is for externally stepped loops such as RL environments.",
        )
        deadline = self.next_deadline
        now = read_clock(self._clock, "SimulationPacer")
        last, self._last = self._last, now
        self.steps += 1
        remaining = deadline - now
        # the deadline is at most one step ahead of any reading on the same time line (a
        # few ulps of float rounding aside)
        if now < last or remaining > self.step_dt + 8 * math.ulp(abs(now) + abs(deadline)):
            # The clock went backwards: the old deadlines mean nothing on the new time
            # line. Re-anchor at now (no wait: the step's own duration is unknown).
            self.clock_jumps += 1
            self._anchor = now
            self._index = 1
            return 0.0
        if remaining > 0:
            remaining = min(remaining, self.step_dt)
            self._sleep(remaining)
            self._index += 1
            return remaining
        # Late: no wait and no catch-up burst; the schedule restarts from now.
        self.late_steps += 1
        self._anchor = now
        self._index = 1
        return 0.0
