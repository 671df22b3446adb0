"""Several fixed-rate time runners on one exact timeline, with phases and priorities.

Every runner fires on the multiples of its period, starting at t = 0. Where runners
coincide they run as one shared step, interleaved by phase: all ACQUISITION callbacks of
every stepping runner, then all CONTROL ones, and so on; inside a phase lower priority runs
first and equal priorities run in binding order. Each callback receives its own runner's
step ``ts`` in seconds.

Time is exact: it is counted in integer ticks of a common base of ``tick_hz`` ticks per
second (the least common multiple of the runners' rates, as fractions), so a 50 Hz and a
30 Hz runner share a boundary every 100 ms forever. See docs/timing.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from fractions import Fraction

from kelab._validate import check_bool, is_int, is_number, must
from kelab.errors import UserError
from kelab.timing.schedule import (
    DEFAULT_PRIORITY,
    ON_UPDATE_PRIORITY,
    ExecutionOrder,
    ExecutionOrderRow,
    Phase,
    StepResult,
    check_callable,
    check_phase,
    check_priority,
)

__all__ = [
    "ON_UPDATE_PRIORITY",
    "Binding",
    "ExecutionOrder",
    "ExecutionOrderRow",
    "Phase",
    "StepResult",
    "TimeRunner",
    "Timeline",
    "to_fraction",
]

MAX_RUNNERS = 8
MIN_HZ = Fraction(1, 100)
MAX_HZ = Fraction(1000)
DEFAULT_NEW_RUNNER_HZ = 60.0


def to_fraction(value: float | int | Fraction | str, field: str = "value") -> Fraction:
    """Convert a number to an exact Fraction the way a person reads it.

    Floats go through their shortest decimal repr, so ``0.1`` is exactly 1/10 and ``1/30``
    (a float) is its 17-digit decimal; pass a `Fraction` for exact thirds.

    Raises:
        ValueError: For NaN, infinities, booleans and non-numbers.
    """
    if isinstance(value, Fraction):
        return value
    if is_int(value):
        return Fraction(int(value))  # type: ignore[call-overload]
    if isinstance(value, str):
        try:
            return Fraction(value)
        except (ValueError, ZeroDivisionError):
            pass
    elif is_number(value):
        number = float(value)  # type: ignore[arg-type]
        if math.isfinite(number):
            return Fraction(repr(number))
    raise ValueError(must(field, "a finite number", value))


class TimeRunner:
    """A fixed-rate clock on the timeline. Created by `Timeline.add_runner`.

    Setting `hz` changes the rate live (validated like `Timeline.add_runner`): the
    runner's boundary already scheduled still runs when it was due, and from that
    boundary on the runner steps every ``1/hz`` seconds and its callbacks receive the new
    ``ts``. The timeline stays exact (the change only rebases its integer ticks).

    Setting `name` renames the runner (validated: a non-empty string that no other
    runner of its timeline has); every binding on it follows, and so do the rename hooks
    of its timeline (`Timeline.add_rename_hook`: the App's clock, recorders and panel).

    Attributes:
        name: Unique runner name (settable).
        hz: Exact rate as a Fraction (settable: a float, int or Fraction, 0.01 to 1000).
        ts: The runner's own step in float seconds (what its callbacks receive).
        steps: How many times this runner has fired.
    """

    __slots__ = (
        "_hz",
        "_name",
        "_next_tick",
        "_origin",
        "_period_ticks",
        "_steps",
        "_timeline",
        "_ts",
    )

    def __init__(self, name: str, hz: Fraction) -> None:
        self._name = _check_name(name)
        self._hz = hz
        self._ts = float(1 / hz)
        self._steps = 0
        self._period_ticks = 0
        self._next_tick = 0
        # exact time (s) of one boundary: boundaries are origin + k / hz
        self._origin = Fraction(0)
        self._timeline: Timeline | None = None

    @property
    def name(self) -> str:
        """The runner's unique name; set it to rename the runner (bindings follow)."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        new = _check_name(value)
        if self._timeline is None:
            self._name = new
        else:
            self._timeline._rename(self, new)

    @property
    def ts(self) -> float:
        """The runner's own step in float seconds (read-only: set `hz`)."""
        return self._ts

    @property
    def steps(self) -> int:
        """How many times this runner has fired (read-only)."""
        return self._steps

    @property
    def hz(self) -> Fraction:
        """The exact rate in Hz (a Fraction); set it to change the rate at the next boundary."""
        return self._hz

    @hz.setter
    def hz(self, value: float | int | Fraction) -> None:
        rate = _check_rate(self.name, value)
        if self._timeline is None:
            self._hz = rate
            self._ts = float(1 / rate)
        else:
            self._timeline._set_rate(self, rate)

    @property
    def hz_float(self) -> float:
        """The rate in float Hz."""
        return float(self._hz)

    @property
    def period(self) -> Fraction:
        """The exact step in seconds (``1 / hz``)."""
        return 1 / self._hz

    def __repr__(self) -> str:
        return f"TimeRunner({self.name!r}, hz={float(self._hz):g})"


def _check_name(name: object) -> str:
    """Validate a runner name: a non-empty string."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(must("runner name", "a non-empty string", name, "e.g. 'Camera'"))
    return name


def _check_rate(name: str, hz: object) -> Fraction:
    """Validate a runner rate: a finite number from 0.01 to 1000 Hz."""
    field = f"runner {name!r} hz"
    if not (isinstance(hz, Fraction) or is_number(hz)):
        raise ValueError(must(field, "a number from 0.01 to 1000 Hz", hz, "pass e.g. 50 or 12.5"))
    rate = to_fraction(hz, field)
    if not MIN_HZ <= rate <= MAX_HZ:
        raise ValueError(must(field, "from 0.01 to 1000 Hz", hz))
    return rate


class Binding:
    """A callback bound to a runner and phase at a priority.

    ``runner``, ``phase``, ``priority`` and ``enabled`` can be changed while the timeline
    runs (the setters and `rebind` validate like `Timeline.bind`); the change applies
    from the next boundary, and ``ts`` follows the new runner. A disabled binding stays
    bound (its runner cannot be removed) but is not called and not listed by
    `Timeline.execution_order`. `unbind()` removes it.
    """

    __slots__ = (
        "_callback",
        "_enabled",
        "_name",
        "_order",
        "_phase",
        "_priority",
        "_runner",
        "_timeline",
    )

    def __init__(
        self,
        callback: Callable[[float], object],
        runner: str,
        phase: Phase,
        priority: int,
        name: str,
        order: int,
        _timeline: Timeline | None = None,
    ) -> None:
        self._callback = callback
        self._runner = runner
        self._phase = phase
        self._priority = priority
        self._name = name
        self._order = order
        self._timeline = _timeline
        self._enabled = True

    @property
    def callback(self) -> Callable[[float], object]:
        """The function called with ``ts`` (settable: another callable, from the next step)."""
        return self._callback

    @callback.setter
    def callback(self, value: Callable[[float], object]) -> None:
        check_callable(
            value,
            f"binding {self._name!r} callback",
            ("ts",),
            "set a function of the step in seconds, e.g. def control(ts): ...",
        )
        self._callback = value
        if self._timeline is not None:
            self._timeline._plans.clear()

    @property
    def name(self) -> str:
        """The name shown in `Timeline.execution_order` and errors (settable, non-empty)."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if self._timeline is not None:
            self._timeline._check_new_name(value, "binding name", self)
        elif not isinstance(value, str) or not value.strip():
            raise ValueError(must("binding name", "a non-empty string", value))
        self._name = value

    @property
    def order(self) -> int:
        """The binding's rank among equal priorities (read-only: binding order)."""
        return self._order

    def __repr__(self) -> str:
        state = "" if self._enabled else ", disabled"
        return (
            f"Binding({self.name!r}, runner={self._runner!r}, phase={self._phase.name}, "
            f"priority={self._priority}{state})"
        )

    @property
    def runner(self) -> str:
        """The runner's name (settable)."""
        return self._runner

    @runner.setter
    def runner(self, value: str) -> None:
        self.rebind(runner=value)

    @property
    def phase(self) -> Phase:
        """The phase (settable: a Phase or its name)."""
        return self._phase

    @phase.setter
    def phase(self, value: Phase | str) -> None:
        self.rebind(phase=value)

    @property
    def priority(self) -> int:
        """The priority inside the phase, lower first (settable)."""
        return self._priority

    @priority.setter
    def priority(self, value: int) -> None:
        self.rebind(priority=value)

    @property
    def enabled(self) -> bool:
        """Whether the callback runs (settable)."""
        return self._enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        check_bool(value, f"binding {self.name!r} enabled")
        if value != self._enabled:
            self._enabled = value
            if self._timeline is not None:
                self._timeline._plans.clear()

    def rebind(
        self,
        runner: str | None = None,
        phase: Phase | str | None = None,
        priority: int | None = None,
    ) -> None:
        """Move the callback to another runner, phase and/or priority (None: unchanged).

        All-or-nothing: every argument is validated first, as `Timeline.bind` does.

        Raises:
            KeyError: For an unknown runner (naming the runners).
            ValueError: For a bad phase or priority.
            RuntimeError: When the binding was unbound.
        """
        timeline = self._timeline
        if timeline is None:
            raise RuntimeError(f"binding {self.name!r} was unbound; bind the callback again")
        new_runner = self._runner if runner is None else runner
        timeline.runner(new_runner)
        new_phase = self._phase if phase is None else check_phase(phase)
        new_priority = self._priority if priority is None else check_priority(priority)
        self._runner, self._phase, self._priority = new_runner, new_phase, new_priority
        timeline._plans.clear()

    def unbind(self) -> None:
        """Remove this binding from its timeline (idempotent)."""
        if self._timeline is not None:
            self._timeline._unbind(self)
            self._timeline = None

    @property
    def bound(self) -> bool:
        """Whether the binding is still active."""
        return self._timeline is not None


class Timeline:
    """Fixed-rate runners on one exact timeline.

    A new timeline has the runners ``"Robot"`` (50 Hz) and ``"Capture"`` (30 Hz).

    Example:
        >>> tl = Timeline()
        >>> calls = []
        >>> _ = tl.bind(lambda ts: calls.append(("robot", ts)), runner="Robot")
        >>> _ = tl.bind(lambda ts: calls.append(("capture", ts)), runner="Capture")
        >>> _ = tl.advance(0.1)  # boundaries at 0, 20, 33, 40, 60, 67, 80, 100 ms
        >>> len(calls), tl.time
        (10, Fraction(1, 10))
    """

    def __init__(self, *, default_runners: bool = True) -> None:
        self._runners: dict[str, TimeRunner] = {}
        self._bindings: list[Binding] = []
        self._next_order = 0
        self._tick_hz = 1  # ticks per second: lcm of the runners' rate numerators
        self._time_ticks = 0  # current time
        self._done_ticks = -1  # last executed boundary (-1: none yet)
        self._plans: dict[tuple[str, ...], tuple[tuple[Callable, float, Binding], ...]] = {}
        self._current: Binding | None = None
        self._rename_hooks: list[Callable[[str, str], object]] = []
        if default_runners:
            self.add_runner("Robot", 50)
            self.add_runner("Capture", 30)

    # -- runners ---------------------------------------------------------------------------
    @property
    def runners(self) -> dict[str, TimeRunner]:
        """The runners by name, in the order they were added (a copy)."""
        return dict(self._runners)

    def runner(self, name: str) -> TimeRunner:
        """Return the runner called ``name``.

        Raises:
            KeyError: Naming the known runners.
        """
        try:
            return self._runners[name]
        except KeyError:
            raise KeyError(
                f"no time runner named {name!r}; the runners are {list(self._runners)}"
            ) from None

    def add_runner(self, name: str, hz: float | Fraction = DEFAULT_NEW_RUNNER_HZ) -> TimeRunner:
        """Add a runner that fires every ``1/hz`` seconds from the next of its boundaries.

        Args:
            name: Unique, non-empty name.
            hz: Rate from 0.01 to 1000 Hz (a float, int or Fraction).

        Raises:
            ValueError: When there are already 8 runners, the name is taken or empty, or
                ``hz`` is out of range.
        """
        _check_name(name)
        if name in self._runners:
            raise ValueError(f"runner names must be unique: {name!r} already exists")
        if len(self._runners) >= MAX_RUNNERS:
            raise ValueError(
                f"a timeline holds at most {MAX_RUNNERS} runners; remove one before adding {name!r}"
            )
        rate = _check_rate(name, hz)
        runner = TimeRunner(name, rate)
        runner._timeline = self
        self._runners[name] = runner
        self._rebase()
        # First boundary: the first multiple of the period after the last executed one.
        runner._next_tick = self._first_after(runner, self._done_ticks, inclusive=False)
        self._plans.clear()
        return runner

    def remove_runner(self, name: str) -> None:
        """Remove a runner that has no bound callbacks.

        Raises:
            ValueError: For the last runner, or one that still has callbacks bound.
            KeyError: For an unknown name.
        """
        self.runner(name)
        if len(self._runners) == 1:
            raise ValueError(f"the last runner cannot be removed ({name!r} is the only one)")
        bound = [b.name for b in self._bindings if b.runner == name]
        if bound:
            raise ValueError(
                f"runner {name!r} still has callbacks bound ({', '.join(bound)}); unbind them "
                f"or bind them to another runner first"
            )
        self._runners.pop(name)._timeline = None
        self._rebase()
        self._plans.clear()

    def add_rename_hook(self, hook: Callable[[str, str], object]) -> None:
        """Call ``hook(old, new)`` after each rename, for names kept outside the bindings."""
        if not callable(hook):
            raise ValueError(must("rename hook", "callable", hook))
        self._rename_hooks.append(hook)

    def _rename(self, runner: TimeRunner, new: str) -> None:
        """Rename ``runner`` in place (its position kept), moving its bindings with it."""
        old = runner._name
        if new == old:
            return
        if new in self._runners:
            raise ValueError(
                f"runner names must be unique: cannot rename {old!r} to {new!r}, another "
                f"runner is called {new!r}; choose another name"
            )
        self._runners = {(new if n == old else n): r for n, r in self._runners.items()}
        runner._name = new
        for b in self._bindings:
            if b._runner == old:
                b._runner = new
        self._plans.clear()
        for hook in list(self._rename_hooks):
            hook(old, new)

    def _set_rate(self, runner: TimeRunner, rate: Fraction) -> None:
        """Change ``runner``'s rate: its scheduled boundary stays, then the new period."""
        if rate == runner._hz:
            return
        # the scheduled boundary becomes the runner's origin: boundaries are origin + k/hz
        runner._origin = Fraction(runner._next_tick, self._tick_hz)
        runner._hz = rate
        runner._ts = float(1 / rate)
        self._rebase()
        self._plans.clear()

    def _rebase(self) -> None:
        """Recompute the tick base and rescale every tick count to it.

        The base is the least common multiple of the rates' numerators and the
        denominators of the runners' origins, so every boundary is a whole tick.
        """
        new_hz = 1
        for runner in self._runners.values():
            new_hz = math.lcm(new_hz, runner._hz.numerator, runner._origin.denominator)
        old_hz = self._tick_hz
        if new_hz != old_hz:
            # Boundaries of the remaining runners stay whole ticks in the new base; the
            # current time may be any exact fraction.
            scale = Fraction(new_hz, old_hz)
            self._time_ticks = _int_or_fraction(self._time_ticks * scale)
            if self._done_ticks != -1:
                self._done_ticks = _int_or_fraction(self._done_ticks * scale)
            for runner in self._runners.values():
                runner._next_tick = int(runner._next_tick * scale)
            self._tick_hz = new_hz
        for runner in self._runners.values():
            runner._period_ticks = int(Fraction(new_hz) / runner._hz)

    def _first_after(self, runner: TimeRunner, ticks: int | Fraction, inclusive: bool) -> int:
        """The runner's first boundary after ``ticks`` (at or after it when ``inclusive``)."""
        period = runner._period_ticks
        origin = runner._origin * self._tick_hz  # whole ticks
        k = Fraction(ticks - origin) / period
        n = math.ceil(k) if inclusive else math.floor(k) + 1
        return int(origin + n * period)

    @property
    def tick_hz(self) -> int:
        """Ticks per second of the common base (every boundary is a whole tick)."""
        return self._tick_hz

    # -- binding ---------------------------------------------------------------------------
    def bind(
        self,
        callback: Callable[[float], object],
        runner: str = "Robot",
        phase: Phase = Phase.CONTROL,
        priority: int = DEFAULT_PRIORITY,
        *,
        name: str | None = None,
    ) -> Binding:
        """Bind ``callback(ts)`` to run on ``runner``'s steps in ``phase`` at ``priority``.

        Args:
            callback: Called with the runner's own step in seconds.
            runner: The runner's name.
            phase: The phase of the step.
            priority: Lower runs first inside the phase; ties run in binding order.
                An "OnUpdate"-style callback uses -200 (``ON_UPDATE_PRIORITY``).
            name: Shown in `execution_order()` and error messages; defaults to the
                callback's qualified name.

        Returns:
            A `Binding` whose ``unbind()`` removes it.
        """
        check_callable(
            callback,
            "Timeline.bind(callback)",
            ("ts",),
            "bind a function of the step in seconds, e.g. def control(ts): ... (more "
            "arguments: bind functools.partial(f, ...) or a lambda ts: f(ts, ...))",
        )
        self.runner(runner)
        phase = check_phase(phase)
        priority = check_priority(priority)
        if name is not None:
            self._check_new_name(name, "Timeline.bind(name)")
        qualname = getattr(callback, "__qualname__", None)
        label = name or (qualname.split("<locals>.")[-1] if qualname else repr(callback))
        binding = Binding(callback, runner, phase, priority, label, self._next_order, self)
        self._next_order += 1
        self._bindings.append(binding)
        self._plans.clear()
        return binding

    def _check_new_name(self, name: object, field: str, binding: Binding | None = None) -> None:
        """Refuse a binding name that is empty or another binding's (names pick bindings)."""
        if not isinstance(name, str) or not name.strip():
            raise UserError(must(field, "a non-empty str", name))
        if any(b.name == name for b in self._bindings if b is not binding):
            raise UserError(
                must(
                    field,
                    "a name no other binding of this timeline has",
                    name,
                    fix="pick another (the panel's set_binding(name) and execution_order "
                    "tell bindings apart by name)",
                )
            )

    def _unbind(self, binding: Binding) -> None:
        self._bindings.remove(binding)
        self._plans.clear()

    def _plan(self, stepping: tuple[str, ...]) -> tuple[tuple[Callable, float, Binding], ...]:
        """Return the calls of a step where ``stepping`` runners fire (cached per runner set)."""
        plan = self._plans.get(stepping)
        if plan is None:
            chosen = [b for b in self._bindings if b._enabled and b._runner in stepping]
            chosen.sort(key=lambda b: (b.phase, b.priority, b.order))
            plan = tuple((b.callback, self._runners[b.runner].ts, b) for b in chosen)
            self._plans[stepping] = plan
        return plan

    @property
    def bindings(self) -> tuple[Binding, ...]:
        """Every binding (enabled or not), in binding order."""
        return tuple(self._bindings)

    def execution_order(self) -> ExecutionOrder:
        """Every enabled callback grouped by phase and sorted by priority, as a table."""
        enabled = [b for b in self._bindings if b._enabled]
        rows = sorted(enabled, key=lambda b: (b.phase, b.priority, b.order))
        return ExecutionOrder(
            ExecutionOrderRow(
                b.phase, b.priority, b.name, b.runner, self._runners[b.runner].hz_float
            )
            for b in rows
        )

    # -- time ------------------------------------------------------------------------------
    @property
    def time(self) -> Fraction:
        """Current time in exact seconds (a callback sees its boundary's time)."""
        return Fraction(self._time_ticks, self._tick_hz)

    @property
    def time_s(self) -> float:
        """Current time in float seconds."""
        return float(self.time)

    @property
    def current_binding(self) -> Binding | None:
        """The binding whose callback is running now, or None."""
        return self._current

    def time_state(self) -> tuple:
        """Where the timeline is in time (opaque, immutable): `set_time_state` returns here.

        Holds the time, the last boundary run and each runner's rate, step count and next
        boundary; not the bindings. Used by the App's time travel (docs/app.md).
        """
        rs = tuple((r._name, r._hz, r._steps, r._next_tick, r._origin) for r in self)
        return (self._tick_hz, self._time_ticks, self._done_ticks, rs)

    def set_time_state(self, state: tuple) -> None:
        """Return to a `time_state` of this timeline (its runners must be the same).

        Raises:
            ValueError: The runners (names and rates) differ from the state's.
        """
        if tuple((r[0], r[1]) for r in state[3]) != tuple((r._name, r._hz) for r in self):
            raise ValueError(must("Timeline.set_time_state: the runners", "as saved", state[3]))
        self._tick_hz, self._time_ticks, self._done_ticks = state[0], state[1], state[2]
        for runner, (_, _, steps, nxt, origin) in zip(self, state[3], strict=True):
            runner._steps, runner._next_tick, runner._origin = steps, nxt, origin
        self._rebase()
        self._plans.clear()

    def next_boundary(self) -> Fraction:
        """Exact time of the next boundary that has not run yet."""
        return Fraction(self._next_boundary_ticks(), self._tick_hz)

    def _next_boundary_ticks(self) -> int:
        return min(r._next_tick for r in self._runners.values())

    def step(self) -> StepResult:
        """Execute the next boundary, set `time` to it and return what ran."""
        return self._execute(self._next_boundary_ticks())

    def advance(self, seconds: float | Fraction) -> list[StepResult]:
        """Move `time` forward by exactly ``seconds``, executing every boundary up to it.

        The same total duration gives the same boundaries however it is chopped.

        Returns:
            The executed boundaries, in order.

        Raises:
            ValueError: For negative or non-finite ``seconds``.
        """
        delta = to_fraction(seconds, "seconds")
        if delta < 0:
            raise ValueError(must("seconds", ">= 0", seconds, "time only moves forward"))
        target = self._time_ticks + delta * self._tick_hz
        return self._advance_to_ticks(_int_or_fraction(target))

    def advance_to(self, time: float | Fraction) -> list[StepResult]:
        """Advance to the absolute ``time`` (exact seconds), executing every boundary up to it."""
        target = _int_or_fraction(to_fraction(time, "time") * self._tick_hz)
        if target < self._time_ticks:
            raise ValueError(f"time {time!r} is before the current time {self.time_s:g} s")
        return self._advance_to_ticks(target)

    def skip(self, seconds: float | Fraction) -> None:
        """Jump `time` forward by ``seconds`` without running the boundaries skipped over.

        Used when simulated time must keep up with wall time under load
        (`TimeMode.GAME_REALTIME`). Each runner next fires at its first boundary after the
        new time.
        """
        delta = to_fraction(seconds, "seconds")
        if delta < 0:
            raise ValueError(must("seconds", ">= 0", seconds, "time only moves forward"))
        target = _int_or_fraction(self._time_ticks + delta * self._tick_hz)
        for runner in self._runners.values():
            if runner._next_tick <= target:
                runner._next_tick = self._first_after(runner, target, inclusive=False)
        self._time_ticks = target
        self._done_ticks = target

    def run_before(self, end: float | Fraction) -> int:
        """Run every boundary strictly before the exact time ``end`` (a half-open step).

        `time` is left at the last boundary run. This is how a fixed step of the App runs:
        the main runner's boundary at its start and every other boundary before the next
        one, so each main-runner boundary belongs to exactly one fixed step.

        Returns:
            How many boundaries ran.

        """
        base = self._tick_hz
        target = to_fraction(end, "end") * base
        count = 0
        runners = self._runners.values()
        while True:
            nxt = min(r._next_tick for r in runners)
            if nxt >= target:
                return count
            self._execute_ticks(nxt)
            count += 1
            if self._tick_hz != base:  # a callback changed a rate or added a runner
                target, base = target * Fraction(self._tick_hz, base), self._tick_hz

    def skip_before(self, end: float | Fraction) -> None:
        """Drop every boundary strictly before the exact time ``end`` without running it.

        `time` jumps to ``end`` if it was earlier; the boundaries at ``end`` still run.
        """
        target = _int_or_fraction(to_fraction(end, "end") * self._tick_hz)
        for runner in self._runners.values():
            if runner._next_tick < target:
                runner._next_tick = self._first_after(runner, target, inclusive=True)
        if target > self._time_ticks:
            self._time_ticks = target

    def advance_ticks(self, ticks: int) -> None:
        """Advance by a whole number of ticks (1/`tick_hz` s each), running every boundary.

        The fast path the `FixedStepClock` uses: no results are collected.
        """
        self._advance_to_ticks(self._time_ticks + ticks, collect=False)

    def _advance_to_ticks(self, target: int | Fraction, collect: bool = True) -> list[StepResult]:
        results = []
        runners = self._runners.values()
        base = self._tick_hz
        while True:
            nxt = min(r._next_tick for r in runners)
            if nxt > target:
                break
            names = self._execute_ticks(nxt)
            if collect:
                results.append(StepResult(Fraction(nxt, base), names))
            if self._tick_hz != base:  # a callback changed a rate or added a runner
                target = _int_or_fraction(target * Fraction(self._tick_hz, base))
                base = self._tick_hz
        self._time_ticks = target
        return results

    def _execute(self, tick: int) -> StepResult:
        return StepResult(Fraction(tick, self._tick_hz), self._execute_ticks(tick))

    def _execute_ticks(self, tick: int) -> tuple[str, ...]:
        stepping = tuple(r for r in self._runners.values() if r._next_tick == tick)
        self._time_ticks = tick
        self._done_ticks = tick
        for r in stepping:
            r._next_tick += r._period_ticks
            r._steps += 1
        names = tuple(r.name for r in stepping)
        plan = self._plans.get(names)
        if plan is None:
            plan = self._plan(names)
        for callback, ts, binding in plan:
            self._current = binding
            try:
                callback(ts)
            except Exception as exc:
                _annotate(exc, binding, self.time_s)
                raise
            finally:
                self._current = None
        return names

    def __iter__(self) -> Iterator[TimeRunner]:
        return iter(self._runners.values())


def _int_or_fraction(value: int | Fraction) -> int | Fraction:
    if isinstance(value, Fraction) and value.denominator == 1:
        return value.numerator
    return value


def _annotate(exc: Exception, binding: Binding, time_s: float) -> None:
    """Name the failing callback in the exception's message (PEP 678 note where available)."""
    note = (
        f"raised in callback {binding.name!r} (runner {binding.runner!r}, phase "
        f"{binding.phase.name}, priority {binding.priority}) at t = {time_s:.6g} s"
    )
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    elif exc.args and isinstance(exc.args[0], str):
        exc.args = (f"{exc.args[0]} [{note}]", *exc.args[1:])
    else:
        exc.args = (*exc.args, note)
