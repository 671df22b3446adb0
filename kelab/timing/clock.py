"""FixedStepClock: the App's wall-time accumulator for fixed-step simulation.

`tick(fixed_update)` is called once per rendered frame. It adds the wall time since the
previous tick (times `time_scale`) to an accumulator and calls ``fixed_update(step_dt)``
once per whole step accumulated, so physics runs at a fixed rate whatever the frame rate.
Time is accumulated in exact integer nanoseconds and `fractions.Fraction` steps, so ten
0.05 s frames at a 0.02 s step run exactly 25 steps.

Driving a `Timeline`: `FixedStepClock.for_timeline(timeline)` makes a clock whose step is
the timeline's tick (the grid every runner boundary lies on, 1/150 s for 50 Hz + 30 Hz);
`tick_timeline(timeline)` then runs every boundary up to the accumulated time, so each
runner fires at its own rate and the frame loop never sees uneven steps. See
docs/timing.md.

The main runner's rate is followed: a clock made by `for_timeline` checks that runner's
``hz`` at each fixed-step boundary and, when it changed (``runner.hz = 25`` from code or
the Settings panel), its step becomes the new period from that boundary on, so `alpha`
stays the fraction of the runner's real step. `max_frame_delta` clamps one frame's wall
time (a window drag, a debugger stop): the cut time goes to `dropped_wall_time` and is
never simulated.

Clock readings must be finite numbers within +-1e12 s (31,700 years; a NaN, an infinity
or a larger value is a ValueError naming it). A clock that goes backwards adds no time;
a long frame inside that range is handled by the time mode (at most
``max_steps_per_frame`` steps run, the rest is dropped or skipped).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from fractions import Fraction

from kelab._validate import (
    check_bool,
    check_int,
    check_number,
    check_number_or_none,
    is_number,
    must,
)
from kelab.timing.config import TimeMode
from kelab.timing.guard import fixed_step_scope
from kelab.timing.timeline import Timeline, to_fraction

__all__ = ["MAX_CLOCK_S", "MAX_TIME_SCALE", "ClockState", "FixedStepClock"]

_NS_PER_S = 1_000_000_000
#: Clock readings beyond +-this many seconds are refused (no wall clock reads that much).
MAX_CLOCK_S = 1e12
#: The largest time_scale accepted (simulated seconds per wall second).
MAX_TIME_SCALE = 1e6


@dataclass(frozen=True, slots=True)
class ClockState:
    """Where a `FixedStepClock` stands in simulated time (`FixedStepClock.time_state`).

    A frozen record: `FixedStepClock.set_time_state` returns the clock to it, and
    ``dataclasses.replace(state, steps=n)`` makes an edited copy (the App's time travel
    keeps one per keyframe and moves its step count). Not in it: the wall-time reference,
    the time mode and the pause.

    Example:
        >>> import dataclasses
        >>> clock = FixedStepClock(0.02)
        >>> state = clock.time_state()
        >>> clock.set_time_state(dataclasses.replace(state, steps=5))
        >>> clock.steps, clock.sim_time
        (5, 0.1)
    """

    step: Fraction
    """The fixed step in seconds (exact)."""
    acc: int
    """Simulated time accumulated but not stepped yet, in the clock's integer units."""
    scale: Fraction
    """The time scale (exact)."""
    timeline_step_start: Fraction | None
    """The start of the driven timeline's next fixed step (None: not driving one yet)."""
    steps: int
    """Fixed steps run (`FixedStepClock.steps`)."""
    alpha: float
    """The interpolation fraction of the last tick."""
    time0: Fraction
    """Simulated time at the last change of the step."""
    steps0: int
    """Fixed steps run at the last change of the step."""
    skipped0: Fraction
    """Time skipped (GAME_REALTIME) before the last change of the step."""
    dropped0: Fraction
    """Time dropped (SIM_REALTIME) before the last change of the step."""
    skipped_steps: int
    """Whole steps skipped since the last change of the step."""
    dropped_steps: int
    """Whole steps dropped since the last change of the step."""
    pending_single_steps: int
    """Single steps asked for while paused (`FixedStepClock.step_once`) not run yet."""


def _check_exact_number(value: object, field: str, example: str) -> None:
    """Refuse strings, bools and other non-numbers (to_fraction would parse a string)."""
    if not (isinstance(value, Fraction) or is_number(value)):
        raise ValueError(
            must(
                f"FixedStepClock.{field}",
                "a number (int, float or Fraction)",
                value,
                f"pass e.g. {example}",
            )
        )


def _check_step(value: object) -> Fraction:
    _check_exact_number(value, "step_dt", "0.02 or Fraction(1, 50)")
    step = to_fraction(value, "FixedStepClock.step_dt")  # type: ignore[arg-type]
    if step <= 0:
        raise ValueError(must("FixedStepClock.step_dt", "a number of seconds > 0", value))
    return step


class FixedStepClock:
    """Accumulates wall time and runs zero or more fixed steps per rendered frame.

    Args:
        step_dt: Seconds per fixed step (float, or a Fraction for exact thirds).
        time_mode: How simulated time follows wall time under load (see `TimeMode`).
        max_steps_per_frame: The most steps one tick runs in the real-time modes.
        clock: Returns the current wall time in seconds (inject a fake one in tests).
        steps_per_frame: Steps per tick in `TimeMode.SIM_HIGH_PERF`.
        time_scale: Simulated seconds per wall second (> 0).
        max_frame_delta: Longest wall time one tick may add in the real-time modes, in
            seconds (None: no clamp); the rest goes to `dropped_wall_time`.

    Example:
        >>> t = iter([0.0, 0.05, 0.10])
        >>> clock = FixedStepClock(0.02, clock=lambda: next(t))
        >>> [clock.tick(lambda dt: None) for _ in range(3)], clock.alpha
        ([0, 2, 3], 0.0)
    """

    def __init__(
        self,
        step_dt: float | Fraction,
        *,
        time_mode: TimeMode = TimeMode.SIM_REALTIME,
        max_steps_per_frame: int = 8,
        clock: Callable[[], float] = time.perf_counter,
        steps_per_frame: int = 1,
        time_scale: float = 1.0,
        max_frame_delta: float | None = None,
    ) -> None:
        self._step = _check_step(step_dt)
        self.time_mode = time_mode
        self.max_steps_per_frame = max_steps_per_frame
        self.steps_per_frame = steps_per_frame
        self.max_frame_delta = max_frame_delta
        self._clock = clock
        self._acc = 0  # simulated time not yet stepped, in integer units (see _set_units)
        self._scale = Fraction(1)
        self.time_scale = time_scale
        self._last_ns: int | None = None
        self._cut_ns = 0  # wall time cut by max_frame_delta
        self._driven: Timeline | None = None  # the timeline tick_timeline drives
        self._timeline_step_start: Fraction | None = None  # its next fixed step's start
        self._follow_runner: str | None = None  # for_timeline: the runner whose rate we follow
        self._pending_single_steps = 0
        self._paused = False
        self._steps = 0
        self._ahead = 0  # inside tick_timeline: the tick's steps after the one running
        self._frames = 0
        self._alpha = 0.0
        self._last_frame_steps = 0
        # Times before the last step change, and the step count then (the step can change).
        self._time0 = Fraction(0)
        self._steps0 = 0
        self._skipped0 = Fraction(0)
        self._dropped0 = Fraction(0)
        self._skipped_steps = 0  # GAME_REALTIME: whole steps jumped over (since then)
        self._dropped_steps = 0  # SIM_REALTIME: whole steps of backlog dropped (since then)

    @classmethod
    def for_timeline(
        cls, timeline: Timeline, runner: str = "Robot", **kwargs: object
    ) -> FixedStepClock:
        """Make a clock whose fixed step is ``runner``'s period, to drive ``timeline``.

        Use it with `tick_timeline`: each fixed step advances the timeline by exactly one
        period of ``runner`` (the App's main runner), running every boundary of every
        runner inside it; `alpha` is the fraction of that runner's step.
        """
        clock = cls(1 / timeline.runner(runner).hz, **kwargs)  # type: ignore[arg-type]
        clock._follow_runner = runner
        timeline.add_rename_hook(clock._runner_renamed)
        return clock

    def _runner_renamed(self, old: str, new: str) -> None:
        if self._follow_runner == old:
            self._follow_runner = new

    @property
    def runner(self) -> str | None:
        """The runner whose period is the fixed step (`for_timeline`; follows renames)."""
        return self._follow_runner

    # -- outputs (read-only: the clock counts them) -----------------------------------------
    @property
    def paused(self) -> bool:
        """Whether simulated time is stopped (settable: True pauses, False resumes)."""
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        if check_bool(value, "FixedStepClock.paused"):
            self.pause()
        else:
            self.resume()

    @property
    def steps(self) -> int:
        """Fixed steps run so far."""
        return self._steps

    @property
    def current_step(self) -> int:
        """The fixed step running now, counted like `steps` (the first step is 1).

        A tick counts all of its steps in `steps` before running them; inside `tick` or
        `tick_timeline` this is the step whose callbacks run now (between two steps: the
        last one done). Outside a tick it equals `steps`.
        """
        return self._steps - self._ahead

    @property
    def frames(self) -> int:
        """Ticks (frames) so far."""
        return self._frames

    @property
    def alpha(self) -> float:
        """The leftover fraction of a step after the last tick (interpolation), in [0, 1)."""
        return self._alpha

    @property
    def last_frame_steps(self) -> int:
        """Fixed steps the last tick ran."""
        return self._last_frame_steps

    # -- settings (each validated by its setter) --------------------------------------------
    @property
    def step_dt(self) -> float:
        """Seconds per fixed step (settable: a float, int or Fraction > 0).

        A new step applies from the next tick; the time already accumulated is kept (as
        simulated seconds), and `sim_time` stays continuous.
        """
        return float(self._step)

    @step_dt.setter
    def step_dt(self, value: float | Fraction) -> None:
        self._set_step(_check_step(value))

    @property
    def step_exact(self) -> Fraction:
        """`step_dt` as an exact Fraction."""
        return self._step

    @property
    def time_mode(self) -> TimeMode:
        """How simulated time follows wall time under load (a `TimeMode`)."""
        return self._time_mode

    @time_mode.setter
    def time_mode(self, mode: TimeMode) -> None:
        if not isinstance(mode, TimeMode):
            modes = ", ".join(m.name for m in TimeMode)
            raise ValueError(must("FixedStepClock.time_mode", f"a ke.TimeMode ({modes})", mode))
        self._time_mode = mode

    @property
    def max_steps_per_frame(self) -> int:
        """The most steps one tick runs in the real-time modes (an int >= 1)."""
        return self._max_steps

    @max_steps_per_frame.setter
    def max_steps_per_frame(self, value: int) -> None:
        self._max_steps = check_int(value, "FixedStepClock.max_steps_per_frame", low=1)

    @property
    def steps_per_frame(self) -> int:
        """Steps per tick in `TimeMode.SIM_HIGH_PERF` (an int >= 1)."""
        return self._steps_per_frame

    @steps_per_frame.setter
    def steps_per_frame(self, value: int) -> None:
        self._steps_per_frame = check_int(value, "FixedStepClock.steps_per_frame", low=1)

    @property
    def max_frame_delta(self) -> float | None:
        """Longest wall time one tick may add, in seconds (None: no clamp).

        Applies in the real-time modes; the cut wall time goes to `dropped_wall_time`.
        """
        return None if self._max_delta_ns is None else self._max_delta_ns / _NS_PER_S

    @max_frame_delta.setter
    def max_frame_delta(self, value: float | None) -> None:
        seconds = check_number_or_none(
            value,
            "FixedStepClock.max_frame_delta",
            low=0.0,
            low_open=True,
            unit="seconds",
            fix="None turns the clamp off",
        )
        if seconds is None:
            self._max_delta_ns: int | None = None
            return
        self._max_delta_ns = max(1, round(min(seconds, MAX_CLOCK_S) * _NS_PER_S))

    @property
    def dropped_wall_time(self) -> float:
        """Wall seconds cut from over-long ticks by `max_frame_delta` (never simulated)."""
        return self._cut_ns / _NS_PER_S

    # -- controls --------------------------------------------------------------------------
    @property
    def time_scale(self) -> float:
        """Simulated seconds per wall second (> 0); 0.5 runs at half speed."""
        return float(self._scale)

    @time_scale.setter
    def time_scale(self, value: float) -> None:
        _check_exact_number(value, "time_scale", "2.0")
        scale = to_fraction(value, "FixedStepClock.time_scale")
        if scale <= 0 or scale > MAX_TIME_SCALE:
            raise ValueError(
                must(
                    "FixedStepClock.time_scale",
                    f"a number > 0 and <= {MAX_TIME_SCALE:g}",
                    value,
                    "use pause() to stop time",
                )
            )
        old_denominator = self._scale.denominator
        self._scale = scale
        self._set_units()
        self._acc = self._acc * scale.denominator // old_denominator

    def _set_units(self) -> None:
        # Integer units: one wall nanosecond scaled is `_elapsed_factor` units and one step
        # is `_step_units`, so the accumulator never rounds (one unit is
        # 1 / (1e9 * scale.denominator * step.denominator) simulated seconds).
        self._elapsed_factor = self._scale.numerator * self._step.denominator
        self._step_units = self._step.numerator * _NS_PER_S * self._scale.denominator

    def _set_step(self, step: Fraction) -> None:
        """Change the fixed step, keeping the accumulated time and `sim_time` continuous."""
        old = self._step
        if step == old:
            return
        self._time0 = self.sim_time_exact
        self._steps0 = self.steps
        self._skipped0 += self._skipped_steps * old
        self._dropped0 += self._dropped_steps * old
        self._skipped_steps = self._dropped_steps = 0
        self._step = step
        self._set_units()
        self._acc = self._acc * step.denominator // old.denominator
        if not (self.paused or self._time_mode is TimeMode.SIM_HIGH_PERF):
            self._alpha = min(1.0, self._acc / self._step_units)

    def pause(self) -> None:
        """Stop simulated time: ticks run no steps until `resume()` (or `step_once()`)."""
        self._paused = True

    def resume(self) -> None:
        """Resume simulated time from now; the paused wall time is not simulated."""
        self._paused = False
        self._last_ns = None  # the next tick restarts the wall-time reference

    def step_once(self) -> None:
        """While paused, make the next tick run exactly one step."""
        self._pending_single_steps += 1

    def reset(self) -> None:
        """Forget accumulated wall time; the next tick starts the clock again."""
        self._last_ns = None
        self._acc = 0
        self._alpha = 0.0

    def time_state(self) -> ClockState:
        """Where the clock is in simulated time (a frozen `ClockState`): see `set_time_state`.

        The step, fixed steps run, the timeline step start and the counted time; not the
        wall-time reference, the mode or the pause. Used by the App's time travel.
        """
        return ClockState(*(getattr(self, "_" + f.name) for f in fields(ClockState)))

    def set_time_state(self, state: ClockState) -> None:
        """Return to a `time_state`; the next tick restarts the wall-time reference.

        Raises:
            ValueError: ``state`` is not a `ClockState` (nothing changed).
        """
        if not isinstance(state, ClockState):
            raise ValueError(
                must(
                    "FixedStepClock.set_time_state(state)",
                    "a ClockState",
                    state,
                    fix="pass what time_state() returned, or a dataclasses.replace() of it",
                )
            )
        for f in fields(ClockState):
            setattr(self, "_" + f.name, getattr(state, f.name))
        self._set_units()
        self._last_ns = None

    @property
    def sim_time(self) -> float:
        """Simulated seconds: ``steps * step_dt`` plus any time skipped in GAME_REALTIME."""
        return float(self.sim_time_exact)

    @property
    def sim_time_exact(self) -> Fraction:
        """`sim_time` as an exact Fraction."""
        return self._time0 + (self.steps - self._steps0 + self._skipped_steps) * self._step

    @property
    def skipped_time(self) -> float:
        """GAME_REALTIME: simulated seconds jumped over under load (not simulated)."""
        return float(self._skipped0 + self._skipped_steps * self._step)

    @property
    def dropped_time(self) -> float:
        """SIM_REALTIME: seconds of backlog dropped under load (the simulation slowed)."""
        return float(self._dropped0 + self._dropped_steps * self._step)

    # -- the frame tick --------------------------------------------------------------------
    def steps_due(self) -> int:
        """Read the wall clock and return how many steps this frame runs (consumes time).

        Most users call `tick`; the App uses this to interleave its own work per step.

        Raises:
            ValueError: When the clock returns NaN, an infinity, a non-number or a value
                beyond +-`MAX_CLOCK_S` (nothing is counted then).
        """
        now_ns = self._read_ns()
        self._frames += 1
        if self._last_ns is None:  # the first tick only starts the clock
            self._last_ns = now_ns
            elapsed = 0
        else:
            elapsed = max(0, now_ns - self._last_ns)
            self._last_ns = now_ns

        if self.paused:
            single = self._pending_single_steps
            self._pending_single_steps = 0
            return self._finish(single)
        if self._time_mode is TimeMode.SIM_HIGH_PERF:
            return self._finish(self._steps_per_frame)

        limit = self._max_delta_ns
        if limit is not None and elapsed > limit:
            self._cut_ns += elapsed - limit  # a long frame: the rest is never simulated
            elapsed = limit
        self._acc += elapsed * self._elapsed_factor
        due, self._acc = divmod(self._acc, self._step_units)
        run = min(due, self._max_steps)
        if due > run:
            if self._time_mode is TimeMode.GAME_REALTIME:
                self._skipped_steps += due - run  # simulated time jumps over them
            else:
                self._dropped_steps += due - run  # the simulation slows down instead
        return self._finish(run)

    def _read_ns(self) -> int:
        value = check_number(
            self._clock(),
            "FixedStepClock clock reading",
            low=-MAX_CLOCK_S,
            high=MAX_CLOCK_S,
            unit="seconds",
            fix="the clock is broken (pass a clock like time.perf_counter)",
        )
        return round(value * _NS_PER_S)

    def _finish(self, run: int) -> int:
        self._steps += run
        self._last_frame_steps = run
        if self.paused or self._time_mode is TimeMode.SIM_HIGH_PERF:
            self._alpha = 0.0
        else:
            self._alpha = self._acc / self._step_units
        return run

    def tick(self, fixed_update: Callable[[float], object]) -> int:
        """Run this frame's fixed steps: ``fixed_update(step_dt)`` zero or more times.

        Returns:
            How many steps ran.
        """
        run = self.steps_due()
        dt = self.step_dt
        try:
            for done in range(run):
                self._ahead = run - done - 1
                fixed_update(dt)
        finally:
            self._ahead = 0
        return run

    def tick_timeline(
        self, timeline: Timeline, before_step: Callable[[], object] | None = None
    ) -> int:
        """Run this frame's fixed steps on ``timeline``, each one main-runner period long.

        With a clock made by `for_timeline`, fixed step k covers the half-open interval
        [t0 + k*step, t0 + (k+1)*step) where t0 is the timeline's first boundary not yet
        run at the first tick: the main runner's boundary at its start, and every other
        runner's boundaries before the next main boundary (`Timeline.run_before`). Each
        step runs inside `fixed_step_scope()`, so pacing or rendering a frame from a
        callback is refused. Time that GAME_REALTIME skips is skipped on the timeline
        too: those boundaries never run.

        Args:
            timeline: The timeline to drive.
            before_step: Called before each fixed step (the App latches input here).

        Returns:
            How many fixed steps ran.

        """
        self._follow(timeline, 0)
        skipped_before = self._skipped_steps
        run = self.steps_due()
        if self._timeline_step_start is None or self._driven is not timeline:
            self._driven = timeline
            self._timeline_step_start = timeline.next_boundary()
        skipped = self._skipped_steps - skipped_before
        if skipped:
            self._timeline_step_start += skipped * self._step
            timeline.skip_before(self._timeline_step_start)
        done = 0
        self._ahead = run  # between steps: the last step done
        try:
            while done < run:
                if before_step is not None:
                    before_step()
                end = self._timeline_step_start + self._step
                self._ahead = run - done - 1
                with fixed_step_scope():
                    timeline.run_before(end)
                self._timeline_step_start = end
                done += 1
                if self._follow(timeline, run - done):
                    run = min(run, self.last_frame_steps)
        finally:
            self._ahead = 0
        return run

    def _follow(self, timeline: Timeline, left: int) -> bool:
        """Take the followed runner's new period as the step (at a fixed-step boundary).

        ``left`` steps of this tick are still to run; in the real-time modes they go back
        to the accumulator as simulated time (and run from the next tick, in new steps),
        so the tick stops here. Returns whether the step changed.
        """
        name = self._follow_runner
        if name is None:
            return False
        try:
            hz = timeline.runner(name).hz
        except KeyError:  # the runner was removed: keep the last step
            return False
        if hz * self._step == 1:
            return False
        if left and not (self.paused or self._time_mode is TimeMode.SIM_HIGH_PERF):
            self._acc += left * self._step_units
            self._steps -= left
            self._last_frame_steps -= left
        self._set_step(1 / hz)
        return True
