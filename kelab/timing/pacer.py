"""Wall-clock pacing for externally stepped loops (PACED run mode).

`SimulationPacer.wait()` is called once per environment step. It waits only when the step
finished ahead of its deadline, and then until exactly that deadline; it never catches up
after a late step. Deadlines are absolute (``start + n * step_dt``) so rounding never drifts
the rate. See docs/timing.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from kelab.timing.guard import ensure_not_in_fixed_step

__all__ = ["SimulationPacer", "precise_sleep"]

# time.sleep on Linux overshoots by ~50-100 us; sleeping coarsely until this margin before
# the deadline and spinning for the rest lands within a few microseconds of it.
_SPIN_MARGIN_S = 0.0008


def precise_sleep(seconds: float) -> None:
    """Sleep for ``seconds`` precisely: a coarse `time.sleep`, then a short spin.

    The spin covers only the last fraction of a millisecond, so the CPU cost is small
    while the wake-up error is microseconds instead of the scheduler's ~0.1 ms.

    Args:
        seconds: How long to sleep; zero or negative returns at once.
    """
    if not seconds > 0:
        return
    deadline = time.perf_counter() + seconds
    coarse = seconds - _SPIN_MARGIN_S
    if coarse > 0:
        time.sleep(coarse)
    while time.perf_counter() < deadline:
        pass


class SimulationPacer:
    """Waits so that environment steps happen at ``step_dt`` intervals of wall time.

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
        if (
            not isinstance(step_dt, (int, float))
            or isinstance(step_dt, bool)
            or not math.isfinite(step_dt)
            or step_dt <= 0
        ):
            raise ValueError(
                f"SimulationPacer.step_dt must be a finite number of seconds > 0, got {step_dt!r}"
            )
        self.step_dt = float(step_dt)
        self._clock = clock
        self._sleep = sleep
        self.reset()

    def reset(self) -> None:
        """Start a new schedule now: the next deadline is one ``step_dt`` from now."""
        self._anchor = self._clock()
        self._index = 1  # the next deadline is anchor + index * step_dt
        self.steps = 0
        self.late_steps = 0

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
        """
        ensure_not_in_fixed_step(
            "SimulationPacer.wait()",
            "Keep App physics in fixed_update() and let the App's FixedStepClock schedule "
            "it; SimulationPacer is for externally stepped loops such as RL environments.",
        )
        deadline = self.next_deadline
        now = self._clock()
        self.steps += 1
        if now < deadline:
            remaining = deadline - now
            self._sleep(remaining)
            self._index += 1
            return remaining
        # Late: no wait and no catch-up burst; the schedule restarts from now.
        self.late_steps += 1
        self._anchor = now
        self._index = 1
        return 0.0
