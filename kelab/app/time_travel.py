"""TimeTravel: the App's history of fixed steps, seek, redo and branches (docs/app.md).

The App owns one (``app.time_travel``; ``app.seek``, ``app.history`` and
``app.fixed_step`` are its face). While the App runs it keeps, in bounded memory:

- a **keyframe** every `keyframe_every` fixed steps (and wherever something changed
  between two steps): the World's exact snapshot, the timeline's and the clock's time,
  and the App subclass's ``state_dict()``;
- per fixed step, the **inputs** that step saw (held keys and buttons, the step's key
  and button edges, the pointer in the world, the body dragged and the drag target) and
  a **digest** of the state after it (bodies, held controls, the subclass's state).

``seek(k)`` restores the newest keyframe at or before ``k`` (or, seeking forward at most
a second or from no older than that keyframe, with nothing changed, stays put) and
re-runs the steps from there with their logged inputs (recorders and sync points muted),
which is exact because the World, the timeline and the App's callbacks are
deterministic. A World restore re-simulates the World's log since its last rebase, so the
App keeps that log short (`WORLD_LOG_STEPS`) where the World's rebases are warm.
Running on after a seek *redoes* the recorded future while nothing new
happens: the logged inputs are replayed and each step's digest is checked. The first new
input (a key or button pressed, a drag, a changed binding or rate, a state changed in
code between steps) starts a **branch**: the abandoned future leaves the history and
`branch` counts up.
It sees the App only as a `kelab.app.ports.TimeTravelHost`.
"""

from __future__ import annotations

import copy
import hashlib
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import is_int, must
from kelab.app.config import check_history_s
from kelab.app.interaction import DragSpring, PickedBody
from kelab.timing.guard import ensure_not_in_fixed_step, fixed_step_scope

if TYPE_CHECKING:
    from kelab.app.ports import TimeTravelHost
    from kelab.sim.snapshot import Snapshot
    from kelab.timing.timeline import Binding

__all__ = [
    "DEFAULT_HISTORY_S",
    "DEFAULT_KEYFRAME_EVERY",
    "WORLD_LOG_STEPS",
    "TIME_TRAVEL_KEYS",
    "TimeTravel",
    "TimeTravelControls",
]

#: Default `TimeTravel.history_s`: at least the last minute of simulated time.
DEFAULT_HISTORY_S = 60.0
#: Default `TimeTravel.keyframe_every` (fixed steps between keyframes).
DEFAULT_KEYFRAME_EVERY = 8
#: The App's World is rebased at least this often (``World.max_log_steps``, physics steps)
#: where its rebases keep the warm starts (the isolated layout): a backward seek restores a
#: keyframe's World snapshot, which re-simulates its log since the last rebase, so this
#: bounds a seek's cost (benchmarks/time_travel.py). Such rebases leave the motion as it
#: was up to the solver's contact order (docs/world.md, "Snapshots").
WORLD_LOG_STEPS = 32
#: Keys whose presses start no branch: pause and step, and Shift (held for Shift+Left).
#: The arrows and Home seek only while paused, where their presses are dropped; while
#: running they are the App's keys like any other (the Cartpole demo moves its cart).
TIME_TRAVEL_KEYS = frozenset({"left shift", "right shift", "return", "space"})


@dataclass(frozen=True)
class _Drag:
    """A drag as one fixed step saw it: the body, the spring's target and frequency."""

    picked: PickedBody
    target: tuple[float, float]
    frequency_hz: float


@dataclass(frozen=True)
class _Step:
    """What fixed step n+1 saw before it ran (logged at step n)."""

    view: tuple
    drag: _Drag | None


@dataclass(frozen=True)
class _Keyframe:
    """Everything needed to return exactly to one fixed step."""

    world: Snapshot | None
    max_log_steps: int | None  # the World's bound then: its snapshot needs it to replay
    timeline: tuple
    clock: tuple
    app_state: Any


def _feed(h: Any, value: object) -> None:
    """Hash ``value`` exactly (arrays by their bytes, containers by their items)."""
    if isinstance(value, np.ndarray):
        h.update(str((value.dtype.str, value.shape)).encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, dict):
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed(h, value[key])
    elif isinstance(value, list | tuple):
        h.update(b"[%d" % len(value))
        for item in value:
            _feed(h, item)
    elif isinstance(value, np.random.Generator):
        _feed(h, value.bit_generator.state)
    elif isinstance(value, float):
        h.update(np.float64(value).tobytes())
    else:
        h.update(repr(value).encode())


class TimeTravel:
    """The App's history: keyframes, logged inputs, seek, redo and branches.

    Args:
        app: The App (as a `TimeTravelHost`).
        history_s: Simulated seconds one can always seek back (at least).
        keyframe_every: Fixed steps between keyframes: a seek re-runs fewer than this
            many steps after restoring a keyframe; more saves memory.
    """

    def __init__(
        self,
        app: TimeTravelHost,
        history_s: float = DEFAULT_HISTORY_S,
        keyframe_every: int = DEFAULT_KEYFRAME_EVERY,
    ) -> None:
        self._app = app
        self.history_s = history_s
        self.keyframe_every = keyframe_every
        self._step = 0  # fixed steps run (the App's `fixed_step`)
        self._newest = 0  # newest step recorded (> _step after a seek: the future)
        self._abandoned = -1  # the newest step a branch has abandoned (for seek's errors)
        self._keys: dict[int, _Keyframe] = {}
        self._inputs: dict[int, _Step] = {}
        self._digests: dict[int, bytes] = {}
        self._open: _Step | None = None  # the step running now (between open and close)
        self._live_view: tuple | None = None  # the live input while a logged one replays
        self._spring: DragSpring | None = None  # the replayed drag
        self._branch = 0
        self._branch_points: list[int] = []
        #: step -> the digest before a change made in code at that step (a redo that
        #: arrives there with it makes the change again: the keyframe taken after it)
        self._changed: dict[int, bytes] = {}
        self._warned = False
        self._seeking = False
        self._base = 0  # step of the first keyframe taken (the history starts there)

    # ------------------------------------------------------------------ settings
    @property
    def history_s(self) -> float:
        """Simulated seconds of history kept (settable; default 60)."""
        return self._history_s

    @history_s.setter
    def history_s(self, value: float) -> None:
        self._history_s = check_history_s(value, "TimeTravel.history_s")

    @property
    def keyframe_every(self) -> int:
        """Fixed steps between keyframes (settable, >= 1; default 8)."""
        return self._every

    @keyframe_every.setter
    def keyframe_every(self, value: int) -> None:
        if not is_int(value) or not 1 <= value <= 10_000:
            raise ValueError(must("TimeTravel.keyframe_every", "an int from 1 to 10000", value))
        self._every = int(value)

    # ------------------------------------------------------------------ the face
    @property
    def fixed_step(self) -> int:
        """Fixed steps run since the start (after a seek: the step sought)."""
        return self._step

    @property
    def newest(self) -> int:
        """The newest step recorded (the end of the recorded future after a seek)."""
        return self._newest

    @property
    def history(self) -> range:
        """The fixed steps one can seek to: oldest keyframe to the newest step recorded."""
        oldest = min(self._keys) if self._keys else self._step
        return range(oldest, self._newest + 1)

    @property
    def branch(self) -> int:
        """The current branch: 0 for the first timeline, +1 at each branch."""
        return self._branch

    @property
    def branch_points(self) -> tuple[int, ...]:
        """The steps where branches started that are still in the history."""
        lo = self.history.start
        return tuple(s for s in self._branch_points if s >= lo)

    @property
    def replaying(self) -> bool:
        """Whether a seek is re-running logged steps now (recorders are muted then).

        An App's hooks can skip side effects that should happen once (a message, a
        callback): the steps re-run already happened.
        """
        return self._seeking

    @property
    def rewound(self) -> bool:
        """Whether the App stands before the newest step recorded (a future to redo)."""
        return self._step < self._newest

    @property
    def rewound_at(self) -> tuple[int, int] | None:
        """``(fixed_step, newest)`` while rewound (what the HUD shows), else None."""
        return (self._step, self._newest) if self.rewound else None

    def hotkey(self, key: str | None, shift: bool) -> bool:
        """The paused App's time keys: Left / Right one step (with Shift one second), Home.

        Returns:
            Whether ``key`` was one of them (then it moved, within the history).
        """
        if key not in ("left", "right", "home"):
            return False
        hist = self.history
        if key == "home":
            target = hist.start
        else:
            hz = self._hz()
            jump = max(1, round(hz)) if shift else 1
            target = self._step + (jump if key == "right" else -jump)
            target = min(max(target, hist.start), hist.stop - 1)
        if target != self._step:
            self.seek(target)
        self._app.input.drop_pending()  # the press was for time travel, not for a step
        return True

    def seek(self, step: int) -> None:
        """Return exactly to fixed step ``step`` (see the module doc).

        Raises:
            TypeError: ``step`` is not an int.
            ValueError: ``step`` is outside `history`.
        """
        if not is_int(step):
            raise TypeError(must("App.seek(step)", "an int (a fixed step)", step))
        hist = self.history
        if int(step) not in hist:
            raise ValueError(
                must(
                    "App.seek(step)",
                    f"a step in app.history = range({hist.start}, {hist.stop})",
                    step,
                )
                + self._why_not(int(step), hist)
            )
        ensure_not_in_fixed_step("App.seek()", "Seek from the top level or a frame hook.")
        self._warn_no_state()
        self._close_live_view()
        if self._app.dragging.dragged is not None:
            self._app.dragging.release()
        step = int(step)
        start = max(k for k in self._keys if k <= step)
        here, hz = self._step, self._hz()
        near = start <= here or step - here <= hz  # no keyframe between, or a second at most
        if here <= step and near and self._digests.get(here) == self._digest():
            start = here  # forward, unchanged since: run on from here (no World restore)
        else:
            self._restore(self._keys[start])
            self._drop_spring()
        self._seeking = True
        muted = self._mute()
        try:
            for n in range(start, step):
                self._run_logged(n)
        finally:
            self._seeking = False
            for b in muted:
                b.enabled = True
        self._drop_spring_quietly()
        self._app.input.drop_pending()
        self._step = step

    # ------------------------------------------------------------------ App hooks
    def before_step(self) -> None:
        """The App's before-step hook: close the last step, latch the input, open this one."""
        self.close_step()
        self._app.input.latch_fixed_step()
        self.open_step()

    def open_step(self) -> None:
        """Before a live fixed step (after the input latch): log it, or redo, or branch."""
        app, n = self._app, self._step
        if not self._keys:
            self._keyframe(n)
        self._close_live_view()
        if n < self._newest:
            if not self._new_input():
                if n in self._changed and self._digest() == self._changed[n]:
                    self._restore(self._keys[n])  # the change made in code here, redone
                logged = self._inputs[n]
                self._replay_drag(logged.drag)  # a drag's end came between the steps
                if self._digest() == self._digests.get(n):
                    self._live_view = app.input.step_view()
                    app.input.set_step_view(logged.view)
                    self._open = logged
                    return
            self._cut(n)
        if self._digest() != self._digests[n]:
            self._changed[n] = self._digests[n]
            self._keyframe(n)  # changed between steps: re-runs start after the change
        self._drop_spring()
        self._open = _Step(app.input.step_view(), self._drag_now())
        self._inputs[n] = self._open

    def close_step(self) -> None:
        """After a live fixed step: count it, check or record its digest, keyframe."""
        if self._open is None:
            return
        self._open = None
        self._close_live_view()
        self._step += 1
        n = self._step
        digest = self._digest()
        if n <= self._newest:
            # the future did not come back (nor the state a change in code then changed)
            if digest not in (self._digests.get(n), self._changed.get(n)):
                self._cut(n)
            else:
                return
        self._newest = n
        self._digests[n] = digest
        if n % self._every == 0:
            self._keyframe(n)
        self._trim()

    def drag_step(self, ts: float) -> None:
        """The drag spring of a replayed drag (the App calls it from its drag system)."""
        if self._spring is not None and self._spring.alive:
            self._spring.apply(ts)

    # ------------------------------------------------------------------ internals
    def _hz(self) -> float:
        """Fixed steps per second (the clock's main runner, whatever it is called now)."""
        return float(1 / self._app.clock.step_exact)

    def _new_input(self) -> bool:
        """Whether the live input is new: a press, a held key or a drag of the user's."""
        view = self._app.input.step_view()
        if self._app.dragging.dragged is not None or view[4]:
            return True
        return bool(set(view[2]) - TIME_TRAVEL_KEYS)

    def _cut(self, n: int) -> None:
        """Start a branch at step n: the recorded future leaves the history."""
        self._drop_spring()
        for table in (self._keys, self._inputs, self._digests):
            for k in [k for k in table if k > n or (table is self._inputs and k >= n)]:
                del table[k]
        self._changed = {k: d for k, d in self._changed.items() if k < n}  # n's is new
        self._abandoned = max(self._abandoned, self._newest)
        self._newest = n
        self._branch += 1
        self._branch_points.append(n)
        self._app.recordings.branch = self._branch  # the data recorders' branch column

    def _trim(self) -> None:
        """Drop what the history no longer needs (older than history_s plus a keyframe)."""
        hz = self._hz()
        keep = max(1, math.ceil(self._history_s * hz))
        floor = self._newest - keep
        old = [k for k in self._keys if k <= floor]
        if len(old) < 2:
            return
        oldest = max(old)  # the newest keyframe at or before the floor stays
        for k in old:
            if k < oldest:
                del self._keys[k]
        for table in (self._inputs, self._digests):
            for k in [k for k in table if k < oldest]:
                del table[k]
        self._branch_points = [s for s in self._branch_points if s >= oldest]
        self._changed = {k: d for k, d in self._changed.items() if k >= oldest}

    def _keyframe(self, n: int) -> None:
        app = self._app
        world = app.world
        if world is not None and world.warm_rebases and world.max_log_steps > WORLD_LOG_STEPS:
            world.max_log_steps = WORLD_LOG_STEPS  # rebases now if its log is longer
        clock = list(app.clock.time_state())
        clock[4] = n  # the clock counts a frame's steps ahead; this is the step's own count
        self._keys[n] = _Keyframe(
            world.snapshot() if world is not None else None,
            world.max_log_steps if world is not None else None,
            app.timeline.time_state(),
            tuple(clock),
            self._app_state(),
        )
        self._digests[n] = self._digest()

    def _restore(self, key: _Keyframe) -> None:
        app = self._app
        if key.world is not None and app.world is not None:
            if key.max_log_steps not in (None, app.world.max_log_steps):
                # the bound in effect then (set in code since?): the snapshot replays under
                # it, and the re-run steps rebase where they did
                app.world.max_log_steps = key.max_log_steps
            app.world.restore(key.world)
        app.timeline.set_time_state(key.timeline)
        paused = app.clock.paused
        app.clock.set_time_state(key.clock)
        app.clock.paused = paused
        load = getattr(app, "load_state_dict", None)
        if key.app_state is not None and load is not None:
            load(copy.deepcopy(key.app_state))

    def _run_logged(self, n: int) -> None:
        """Re-run logged step n+1 (during a seek)."""
        app = self._app
        logged = self._inputs[n]
        app.input.set_step_view(logged.view)
        self._replay_drag(logged.drag)
        clock = app.clock
        end = self._keys_clock_start() + clock.step_exact
        with fixed_step_scope():
            app.timeline.run_before(end)
        state = list(clock.time_state())
        state[3], state[4] = end, state[4] + 1  # _timeline_step_start, _steps
        clock.set_time_state(tuple(state))

    def _keys_clock_start(self) -> Any:
        return self._app.clock.time_state()[3]

    def _replay_drag(self, drag: _Drag | None) -> None:
        spring = self._spring
        if drag is None:
            if spring is not None:
                self._spring = None
                spring.remove()  # as the release did between those steps
            return
        if spring is None or spring.picked != drag.picked:
            if spring is not None:
                spring.remove()
            world = self._app.world
            assert world is not None
            spring = DragSpring(world, drag.picked, frequency_hz=drag.frequency_hz)
            self._spring = spring
        spring.set_target(drag.target)

    def _drop_spring(self) -> None:
        """Forget the replayed drag (its force stays held, as the World has it)."""
        self._spring = None

    _drop_spring_quietly = _drop_spring

    def _drag_now(self) -> _Drag | None:
        d = self._app.dragging
        if d.dragged is None or d.target is None:
            return None
        return _Drag(d.dragged, d.target, float(self._app.live.drag_frequency_hz))

    def _close_live_view(self) -> None:
        if self._live_view is not None:
            self._app.input.set_step_view(self._live_view)
            self._live_view = None

    def _mute(self) -> list[Binding]:
        """Turn off the recorders' and sync points' bindings for a re-run."""
        app = self._app
        recorders = set(map(id, app.recordings.recorders))
        out = []
        for b in app.timeline.bindings:
            owner = getattr(b.callback, "__self__", None)
            if b.enabled and (id(owner) in recorders or b.name == "sync_point"):
                b.enabled = False
                out.append(b)
        return out

    def _app_state(self) -> Any:
        fn = getattr(self._app, "state_dict", None)
        return copy.deepcopy(fn()) if fn is not None else None

    def _why_not(self, step: int, hist: range) -> str:
        """Why ``step`` is outside the history, for the error of :meth:`seek`."""
        if step < 0:
            return "; fixed steps count from 0"
        if step < hist.start:
            return (
                f"; steps before {hist.start} are older than the history keeps "
                f"(history_s = {self._history_s:g} s)"
            )
        if step <= self._abandoned:
            return (
                f"; steps after {hist.stop - 1} were abandoned by branch {self._branch} "
                "(a new input after a seek starts a branch)"
            )
        return f"; the newest step run so far is {hist.stop - 1}"

    def _warn_no_state(self) -> None:
        app = self._app
        if self._warned or hasattr(app, "state_dict") and hasattr(app, "load_state_dict"):
            return
        if type(app).__module__.startswith("kelab."):
            return  # KELab's own App keeps no state of its own outside what seek restores
        self._warned = True
        warnings.warn(
            f"{type(app).__name__} has no state_dict()/load_state_dict(): App.seek rewinds "
            "the World, the timeline, the clock and the inputs, but not the App subclass's "
            'own attributes; define both hooks to rewind them (docs/app.md, "Time travel")',
            RuntimeWarning,
            stacklevel=4,  # the user's app.seek(...): App.seek -> TimeTravel.seek -> here
        )

    def _digest(self) -> bytes:
        """The state a fixed step starts from: bodies, controls, the App's state, bindings."""
        app = self._app
        h = hashlib.blake2b(digest_size=16)
        w = app.world
        if w is not None:
            for a in (w.body_poses, w.body_velocities, w.external_forces):
                _feed(h, a)
            _feed(h, w.max_log_steps)  # it decides where the World rebases
            if w.joint_names:
                _feed(h, w.joint_efforts)
                _feed(h, w.joint_position_targets)
        _feed(h, self._app_state())
        rows = [(r.name, r.hz) for r in app.timeline]
        rows += [(b.name, b.runner, b.phase, b.priority, b.enabled) for b in self._plan()]
        _feed(h, rows)
        return h.digest()

    def _plan(self) -> list[Binding]:
        recorders = set(map(id, self._app.recordings.recorders))
        return [
            b
            for b in self._app.timeline.bindings
            if id(getattr(b.callback, "__self__", None)) not in recorders
        ]


class TimeTravelControls:
    """The App's time-travel face (a base class of the App; all delegate to ``time_travel``)."""

    time_travel: TimeTravel

    @property
    def fixed_step(self) -> int:
        """Fixed steps run since the start (after a `seek`: the step sought)."""
        return self.time_travel.fixed_step

    @property
    def history(self) -> range:
        """The fixed steps `seek` can return to (at least the last ``history_s`` seconds)."""
        return self.time_travel.history

    def seek(self, step: int) -> None:
        """Return exactly to fixed step ``step``: World, timeline, clock, inputs, state.

        The App subclass's own attributes come back through its ``state_dict()`` /
        ``load_state_dict(state)`` hooks (without them, a warning, once). Running on
        redoes the recorded future until a new input starts a branch (docs/app.md,
        "Time travel").

        Raises:
            TypeError: ``step`` is not an int.
            ValueError: ``step`` is not in `history`.
            RuntimeError: Called from inside a fixed step.
        """
        self.time_travel.seek(step)
