"""TimeTravel: the App's history of fixed steps, seek, redo and branches (docs/app.md).

The App owns one (``app.time_travel``; ``app.seek``, ``app.history`` and
``app.fixed_step`` are its face). While the App runs it keeps, in bounded memory:

- a **keyframe** every `keyframe_every` fixed steps (and wherever something changed
  between two steps, and after a step whose sync point ran calls, which re-runs skip:
  `note_unreplayed_code`): the World's exact snapshot, the timeline's and the clock's
  time, and the App subclass's ``state_dict()``;
- per fixed step, the **inputs** that step saw (held keys and buttons, the step's key
  and button edges, the pointer in the world, the body dragged and the drag target) and
  a **digest** of the state after it (bodies, held controls, the World's per-copy
  parameters, the subclass's state).

``seek(k)`` restores the newest keyframe at or before ``k`` (or, seeking forward at most
a second or from no older than that keyframe, with nothing changed since and no change
made in code on the way, stays put) and re-runs the steps from there with their logged
inputs (recorders and sync points muted), which is exact because the World, the
timeline and the App's callbacks are deterministic. A seek is all or nothing: where a
hook raises (``load_state_dict``, a re-run step) the App is put back as it was and the
error propagates. A World restore re-simulates the World's log since its last rebase, so
the App keeps that log short (`WORLD_LOG_STEPS`) where the World's rebases are warm.
Running on after a seek *redoes* the recorded future while nothing new
happens: the logged inputs are replayed and each step's digest is checked. The first new
input (a key or button pressed that the fixed steps read, a drag, a changed binding or
rate, a state changed in code between steps) starts a **branch**: the abandoned future
leaves the history and `branch` counts up. A replayed drag calls ``on_drag_begin`` and
``on_drag_end`` where it starts and ends; a branch lets its body go.
The subclass's state is compared by value (`kelab.app.state_values`). The history is
bounded by `history_s` seconds and by `history_mb` of memory.
It is given a `TimeTravelContext`, never the App: the World, the timeline, the clock and
the input it saves and re-runs, the user's drag, the drag hooks, the App's state hooks
(`StateHooks`), the recorders a re-run mutes, and ``on_branch``, which the App wires to
its recordings (their ``branch`` column).
"""

from __future__ import annotations

import copy
import hashlib
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import is_int, must
from kelab.app.config import check_history_mb, check_history_s
from kelab.app.dragging import DragHooks
from kelab.app.hooks import call_hook
from kelab.app.interaction import DragSpring, PickedBody
from kelab.app.state_values import state_digest
from kelab.timing.guard import ensure_not_in_fixed_step, fixed_step_scope

if TYPE_CHECKING:
    from kelab.app.dragging import Dragging
    from kelab.app.input import Input, StepView
    from kelab.sim.snapshot import Snapshot
    from kelab.sim.world import World
    from kelab.timing.clock import ClockState, FixedStepClock
    from kelab.timing.timeline import Binding, Timeline

__all__ = [
    "DEFAULT_HISTORY_MB",
    "DEFAULT_HISTORY_S",
    "DEFAULT_KEYFRAME_EVERY",
    "WORLD_LOG_STEPS",
    "TIME_TRAVEL_KEYS",
    "StateHooks",
    "TimeTravel",
    "TimeTravelContext",
]

#: Default `TimeTravel.history_s`: at least the last minute of simulated time.
DEFAULT_HISTORY_S = 60.0
#: Default `TimeTravel.history_mb`: the most memory the history takes (MB, 2**20 bytes).
DEFAULT_HISTORY_MB = 512.0
#: What one logged fixed step (its inputs and digest) counts for against `history_mb`.
STEP_BYTES = 512
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


def _no_state() -> None:
    """The default ``state_dict``: no state of its own."""
    return None


def _load_nothing(state: Any) -> None:
    """The default ``load_state_dict``: nothing to load."""


def _all_declared() -> None:
    """The default ``undeclared``: nothing to warn about."""


def _ignore(branch: int) -> None:
    """The default ``on_branch``: nobody to tell."""


@dataclass(frozen=True)
class StateHooks:
    """The App subclass's own state, as time travel keeps it (``App.state_dict`` hooks).

    ``state_dict()`` returns the state (None: no state of its own); keyframes keep a deep
    copy and a seek hands one to ``load_state_dict(state)``.
    """

    state_dict: Callable[[], Any] = _no_state
    """Returns the subclass's state (None: none)."""
    load_state_dict: Callable[[Any], None] = _load_nothing
    """Returns the subclass to a state ``state_dict`` returned."""
    undeclared: Callable[[], str | None] = _all_declared
    """Asked at the first seek: what the App lacks, for a warning (``"Counter does not
    define load_state_dict() (only state_dict())"``), or None: both hooks are there."""


def _copied(value: object) -> object:
    """A deep copy of a ``state_dict()`` value that `state_digest` accepted.

    Raises:
        ValueError: The copy failed all the same (a ``__deepcopy__`` or ``__reduce__`` of
            the user's that raises): one line.
    """
    try:
        return copy.deepcopy(value)
    except Exception as e:
        said = " ".join(str(e).split())
        raise ValueError(
            f"App.state_dict() must return values copy.deepcopy can copy, got one whose copy "
            f"raised {type(e).__name__}: {said}; leave that value out of state_dict(), or fix "
            "its __deepcopy__ / __reduce__"
        ) from e


@dataclass(frozen=True)
class TimeTravelContext:
    """What `TimeTravel` is given: what it saves, re-runs and tells (never the App)."""

    world: World | None
    """Snapshotted and restored; its bodies and controls are digested per step."""
    timeline: Timeline
    """Its time is saved; re-run steps run on it."""
    clock: FixedStepClock
    """Its simulated time is saved and restored (its step sets the history's length)."""
    input: Input
    """What each fixed step saw (`Input.step_view`), replayed."""
    dragging: Dragging
    """The user's drag: logged per step, released by a seek."""
    hooks: DragHooks = field(default_factory=DragHooks)
    """``on_drag_begin`` / ``on_drag_end`` where a replayed drag starts and ends."""
    state: StateHooks = field(default_factory=StateHooks)
    """The App subclass's own state."""
    recorders: Callable[[], Iterable[object]] = tuple
    """The attached recorders: their bindings are muted in a re-run and left out of the
    digest."""
    on_branch: Callable[[int], None] = _ignore
    """Called with the new branch number when a new input starts a branch."""


@dataclass(frozen=True)
class _Drag:
    """A drag as one fixed step saw it: the body, the spring's target and frequency."""

    picked: PickedBody
    target: tuple[float, float]
    frequency_hz: float


@dataclass(frozen=True)
class _Step:
    """What fixed step n+1 saw before it ran (logged at step n)."""

    view: StepView
    drag: _Drag | None


@dataclass(frozen=True)
class _Keyframe:
    """Everything needed to return exactly to one fixed step."""

    world: Snapshot | None
    max_log_steps: int | None  # the World's bound then: its snapshot needs it to replay
    timeline: tuple
    clock: ClockState
    app_state: Any
    drag: _Drag | None  # the drag whose spring was on then (the user's or a replayed one)
    held: tuple[float, float, float] | None  # the force its spring held on the body
    nbytes: int  # what it counts for against history_mb


@dataclass(frozen=True)
class _UserState:
    """The App subclass's ``state_dict()`` as returned, its value digest and size."""

    value: Any
    digest: bytes
    nbytes: int


@dataclass(frozen=True)
class _Undo:
    """The App as a seek found it: put back where the seek fails."""

    key: _Keyframe
    step: int
    view: StepView


def _feed_arrays(h: Any, *arrays: np.ndarray) -> None:
    """Hash arrays exactly: dtype, shape and bytes."""
    for a in arrays:
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(np.ascontiguousarray(a).tobytes())


class TimeTravel:
    """The App's history: keyframes, logged inputs, seek, redo and branches.

    Args:
        context: What it saves, re-runs and tells (`TimeTravelContext`).
        history_s: Simulated seconds one can always seek back (at least).
        history_mb: The most memory the history takes (MB, 2**20 bytes): past it the
            oldest steps are dropped first, even within ``history_s`` (a warning, once).
        keyframe_every: Fixed steps between keyframes: a seek re-runs fewer than this
            many steps after restoring a keyframe; more saves memory.
    """

    def __init__(
        self,
        context: TimeTravelContext,
        history_s: float = DEFAULT_HISTORY_S,
        history_mb: float = DEFAULT_HISTORY_MB,
        keyframe_every: int = DEFAULT_KEYFRAME_EVERY,
    ) -> None:
        self._ctx = context
        self._keys: dict[int, _Keyframe] = {}
        self._key_bytes = 0  # the keyframes' nbytes, summed
        self._bytes_trimmed = False  # history_mb shortened the history (warned once)
        self.history_s = history_s
        self.history_mb = history_mb
        self.keyframe_every = keyframe_every
        self._step = 0  # fixed steps run (the App's `fixed_step`)
        self._newest = 0  # newest step recorded (> _step after a seek: the future)
        self._abandoned = -1  # the newest step a branch has abandoned (for seek's errors)
        self._inputs: dict[int, _Step] = {}
        self._digests: dict[int, bytes] = {}
        self._open: _Step | None = None  # the step running now (between open and close)
        self._live_view: StepView | None = None  # the live input while a logged one replays
        self._spring: DragSpring | None = None  # a replayed drag's spring, while it is on
        self._branch = 0
        self._branch_points: list[int] = []
        #: step -> the digest before a change made in code at that step (a redo that
        #: arrives there with it makes the change again: the keyframe taken after it)
        self._changed: dict[int, bytes] = {}
        #: steps in which code ran that re-runs and redos skip (sync calls): each has a
        #: keyframe of its end state, which they restore rather than re-run past
        self._unreplayed: set[int] = set()
        self._ran_unreplayed = False  # such code ran in the step open now
        self._warned = False
        self._seeking = False
        self._closed = False

    # ------------------------------------------------------------------ settings
    @property
    def history_s(self) -> float:
        """Simulated seconds of history kept (settable; default 60)."""
        return self._history_s

    @history_s.setter
    def history_s(self, value: float) -> None:
        self._history_s = check_history_s(value, "TimeTravel.history_s")

    @property
    def history_mb(self) -> float:
        """The most memory the history takes, in MB of 2**20 bytes (settable; default 512).

        Past it the oldest keyframes and steps are dropped, even within `history_s`, and
        a `RuntimeWarning` says so once. Setting it trims the history now.
        """
        return self._history_mb

    @history_mb.setter
    def history_mb(self, value: float) -> None:
        self._history_mb = check_history_mb(value, "TimeTravel.history_mb")
        if self._keys:
            self._trim()

    @property
    def history_bytes(self) -> int:
        """Bytes the history holds now, as counted against `history_mb`.

        Its keyframes' World snapshots and ``state_dict()`` copies, and `STEP_BYTES` for
        each logged step.
        """
        return self._key_bytes + STEP_BYTES * len(self._inputs)

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
        self._ctx.input.drop_pending()  # the press was for time travel, not for a step
        return True

    def seek(self, step: int) -> None:
        """Return exactly to fixed step ``step`` (see the module doc); all or nothing.

        Before the first fixed step the history is ``range(0, 1)`` and ``seek(0)`` leaves
        the App as it stands. A drag in progress ends first (``on_drag_end``).

        Raises:
            TypeError: ``step`` is not an int.
            ValueError: ``step`` is outside `history`, or ``state_dict()`` returned a value
                that cannot be kept (`kelab.app.state_values`).
            RuntimeError: From inside a fixed step, or after the App closed.
            Exception: What a hook raised (``load_state_dict``, a re-run step): the App
                was put back as it was before the seek.
        """
        if not is_int(step):
            raise TypeError(must("App.seek(step)", "an int (a fixed step)", step))
        if self._closed:
            raise RuntimeError("this App was closed; seek() can no longer run")
        step = int(step)
        hist = self.history
        if step not in hist:
            raise ValueError(
                must(
                    "App.seek(step)",
                    f"a step in app.history = range({hist.start}, {hist.stop})",
                    step,
                )
                + self._why_not(step, hist)
            )
        ensure_not_in_fixed_step("App.seek()", "Seek from the top level or a frame hook.")
        if not self._keys:
            return  # nothing ran yet: the App stands at step 0 as it is
        self._warn_no_state()
        self._close_live_view()
        if self._ctx.dragging.dragged is not None:
            self._user_state()  # a state_dict() time travel cannot keep: refused first
            self._ctx.dragging.release()  # (on_drag_end may change the state: asked again)
        user = self._user_state()
        here, start = self._step, max(k for k in self._keys if k <= step)
        run_on = self._runs_on(here, step, start)
        run_on = run_on and self._digests.get(here) == self._digest(user)
        undo = _Undo(self._capture(None, user), here, self._ctx.input.step_view())
        self._seeking = True
        muted = self._mute()
        try:
            if run_on:
                start = here  # forward, unchanged since: run on from here (no World restore)
            else:
                self._restore(self._keys[start])
            for n in range(start, step):
                self._run_logged(n)
        except BaseException as exc:
            self._rollback(undo, exc)
            raise
        finally:
            self._seeking = False
            for b in muted:
                b.enabled = True
        self._ctx.input.set_step_view(undo.view)  # the live keys, buttons and pointer
        self._ctx.input.drop_pending()
        self._step = step

    def close(self) -> None:
        """Let the history go (the App closed): `seek` raises from now on."""
        self._closed = True
        self._spring = self._open = None
        for table in (self._keys, self._inputs, self._digests, self._changed):
            table.clear()
        self._unreplayed.clear()
        self._key_bytes = 0
        self._newest = self._step

    # ------------------------------------------------------------------ App hooks
    def before_step(self) -> None:
        """The App's before-step hook: close the last step, latch the input, open this one."""
        self.close_step()
        self._ctx.input.latch_fixed_step()
        self.open_step()

    def open_step(self) -> None:
        """Before a live fixed step (after the input latch): log it, or redo, or branch."""
        ctx, n = self._ctx, self._step
        if self._closed:
            return
        if not self._keys:
            self._keyframe(n, self._user_state())
        self._close_live_view()
        if n < self._newest:
            if not self._new_input() and self._redo(n):
                return
            self._cut(n)
        self._end_replayed_drag()  # the user's own input from here: a replayed drag lets go
        user = self._user_state()
        if self._digest(user) != self._digests[n]:
            self._changed[n] = self._digests[n]
            self._keyframe(n, user)  # changed between steps: re-runs start after the change
        self._open = _Step(ctx.input.step_view(), self._drag_now())
        self._inputs[n] = self._open

    def close_step(self) -> None:
        """After a live fixed step: count it, check or record its digest, keyframe."""
        if self._open is None:
            return
        self._open = None
        self._close_live_view()
        self._step += 1
        n = self._step
        ran, self._ran_unreplayed = self._ran_unreplayed, False
        user = self._user_state()
        digest = self._digest(user)
        if n <= self._newest:
            if digest in (self._digests.get(n), self._changed.get(n)):
                return  # redone (a change in code then: the next open_step makes it again)
            if n in self._unreplayed and not ran:
                # the recorded sync calls of this step, which a redo does not make again:
                # their keyframe holds the step's end state
                self._restore(self._keys[n])
                return
            self._cut(n)  # the future did not come back
            self._unreplayed.discard(n)
        self._newest = n
        self._digests[n] = digest
        if ran:
            self._unreplayed.add(n)
            self._keyframe(n, user)
        elif n % self._every == 0:
            self._keyframe(n, user)
        self._trim()

    def note_unreplayed_code(self) -> None:
        """Code that re-runs and redos skip ran in the step open now (a sync point's calls).

        The App calls it after a sync point ran calls. The step's end state is kept as a
        keyframe when it closes, so a seek to it or past it restores that state rather
        than re-running the step without the change, and a redo that reaches it restores
        it and goes on redoing.
        """
        if self._open is not None and not self._seeking:
            self._ran_unreplayed = True

    def drag_step(self, ts: float) -> None:
        """The drag spring of a replayed drag (the App calls it from its drag system)."""
        if self._spring is not None and self._spring.alive:
            self._spring.apply(ts)

    # ------------------------------------------------------------------ internals
    def _hz(self) -> float:
        """Fixed steps per second (the clock's main runner, whatever it is called now)."""
        return float(1 / self._ctx.clock.step_exact)

    def _runs_on(self, here: int, step: int, start: int) -> bool:
        """Whether a seek from ``here`` to ``step`` may run on instead of restoring ``start``.

        Forward, with no keyframe between or at most a second ahead, and no change made in
        code on the way (its keyframe holds what the logged inputs alone do not redo).
        """
        if not here <= step or not (start <= here or step - here <= self._hz()):
            return False
        crossed = (*self._changed, *self._unreplayed)
        return not any(here < c <= step for c in crossed)

    def _redo(self, n: int) -> bool:
        """Redo recorded step n+1 if the App stands where it stood; whether it does."""
        logged = self._inputs[n]
        before = self._digest(self._user_state())
        ran = self._replay_drag(logged.drag)
        now = self._digest(self._user_state()) if ran else before
        if now != self._digests[n] and self._changed.get(n) == before:
            key = self._keys[n]  # the change made in code here, redone from its keyframe
            self._restore(key)
            self._replay_drag(logged.drag)
            now = self._digest(self._user_state())
        if now != self._digests[n]:
            return False
        self._live_view = self._ctx.input.step_view()
        self._ctx.input.set_step_view(logged.view)
        self._open = logged
        return True

    def _new_input(self) -> bool:
        """Whether the live input is new: a drag of the user's, or a press the steps read.

        Keys and buttons no fixed step has asked about (F1, F2, a click on nothing) do not
        act on the simulation: they start no branch (`Input.key_read_in_steps`).
        """
        inp = self._ctx.input
        view = inp.step_view()
        if self._ctx.dragging.dragged is not None:
            return True
        if any(inp.button_read_in_steps(b) for b in view.buttons_pressed):
            return True
        return any(inp.key_read_in_steps(k) for k in view.keys_pressed - TIME_TRAVEL_KEYS)

    def _cut(self, n: int) -> None:
        """Start a branch at step n: the recorded future leaves the history."""
        for table in (self._keys, self._inputs, self._digests):
            for k in [k for k in table if k > n or (table is self._inputs and k >= n)]:
                if table is self._keys:
                    self._key_bytes -= self._keys[k].nbytes
                del table[k]
        self._changed = {k: d for k, d in self._changed.items() if k < n}  # n's is new
        self._unreplayed = {k for k in self._unreplayed if k <= n}
        self._abandoned = max(self._abandoned, self._newest)
        self._newest = n
        self._branch += 1
        self._branch_points.append(n)
        self._ctx.on_branch(self._branch)  # the App tells its data recorders

    def _trim(self) -> None:
        """Drop what the history no longer needs.

        Older than history_s plus a keyframe, then, past history_mb, the oldest keyframes
        first (the newest one stays).
        """
        keys = sorted(self._keys)
        keep = max(1, math.ceil(self._history_s * self._hz()))
        old = [k for k in keys if k <= self._newest - keep]
        if len(old) >= 2:
            self._drop_before(old[-1])  # the newest keyframe at or before the floor stays
            keys = keys[len(old) - 1 :]
        over = False
        while self.history_bytes > self._history_mb * 2**20 and len(keys) > 1:
            keys.pop(0)
            self._drop_before(keys[0])
            over = True
        if over and not self._bytes_trimmed:
            self._bytes_trimmed = True
            warnings.warn(
                f"the App's history holds more than history_mb = {self._history_mb:g} MB: "
                f"its oldest steps are dropped (it goes back {len(self.history) / self._hz():.1f}"
                f" s of the {self._history_s:g} s of history_s); raise App(history_mb=...) or "
                "keep state_dict() smaller",
                RuntimeWarning,
                stacklevel=2,
            )

    def _drop_before(self, oldest: int) -> None:
        """Forget every keyframe and step before keyframe ``oldest``."""
        for k in [k for k in self._keys if k < oldest]:
            self._key_bytes -= self._keys.pop(k).nbytes
        for table in (self._inputs, self._digests):
            for k in [k for k in table if k < oldest]:
                del table[k]
        self._branch_points = [s for s in self._branch_points if s >= oldest]
        self._changed = {k: d for k, d in self._changed.items() if k >= oldest}
        self._unreplayed = {k for k in self._unreplayed if k >= oldest}

    def _keyframe(self, n: int, user: _UserState | None) -> None:
        world = self._ctx.world
        if world is not None and world.warm_rebases and world.max_log_steps > WORLD_LOG_STEPS:
            world.max_log_steps = WORLD_LOG_STEPS  # rebases now if its log is longer
        if n in self._keys:
            self._key_bytes -= self._keys[n].nbytes
        key = self._keys[n] = self._capture(n, user)
        self._key_bytes += key.nbytes
        self._digests[n] = self._digest(user)

    def _capture(self, n: int | None, user: _UserState | None) -> _Keyframe:
        """The App now as a keyframe of step ``n`` (None: as it stands, for an undo)."""
        ctx = self._ctx
        world = ctx.world
        clock = ctx.clock.time_state()
        if n is not None:
            clock = replace(clock, steps=n)  # the clock counts a frame's steps ahead
        spring = self._spring if self._spring is not None else ctx.dragging.spring
        if spring is None or not spring.alive:
            spring = None
        snap = world.snapshot() if world is not None else None
        return _Keyframe(
            snap,
            world.max_log_steps if world is not None else None,
            ctx.timeline.time_state(),
            clock,
            _copied(user.value) if user is not None else None,
            None if spring is None else _Drag(spring.picked, spring.target, spring.frequency_hz),
            None if spring is None else spring.held,
            (snap.nbytes if snap is not None else 0) + (user.nbytes if user is not None else 0),
        )

    def _restore(self, key: _Keyframe, load: bool = True) -> None:
        """Put back ``key``: the World, the timeline, the clock, the state, a drag on then."""
        ctx = self._ctx
        self._spring = None  # a replayed drag of another time: the World restore replaces it
        if key.world is not None and ctx.world is not None:
            if key.max_log_steps not in (None, ctx.world.max_log_steps):
                # the bound in effect then (set in code since?): the snapshot replays under
                # it, and the re-run steps rebase where they did
                ctx.world.max_log_steps = key.max_log_steps
            ctx.world.restore(key.world)
        ctx.timeline.set_time_state(key.timeline)
        paused = ctx.clock.paused
        ctx.clock.set_time_state(key.clock)
        ctx.clock.paused = paused
        if key.drag is not None and ctx.world is not None:
            d = key.drag
            self._spring = DragSpring(ctx.world, d.picked, frequency_hz=d.frequency_hz)
            self._spring.set_target(d.target)
            if key.held is not None:
                self._spring.resume(key.held)
        if load and key.app_state is not None:
            load_fn = ctx.state.load_state_dict
            call_hook("load_state_dict", load_fn, copy.deepcopy(key.app_state))

    def _rollback(self, undo: _Undo, exc: BaseException) -> None:
        """Put the App back as a failed seek found it (``exc`` on its way out)."""
        self._restore(undo.key, load=False)
        self._step = undo.step
        self._ctx.input.set_step_view(undo.view)
        if undo.key.app_state is None:
            return
        try:
            self._ctx.state.load_state_dict(copy.deepcopy(undo.key.app_state))
        except Exception as again:
            exc.add_note(
                f"App.seek: the App subclass's own state could not be put back: its "
                f"load_state_dict raised {again!r} with the state from before the seek"
            )

    def _run_logged(self, n: int) -> None:
        """Re-run logged step n+1 (during a seek)."""
        ctx = self._ctx
        logged = self._inputs[n]
        self._step = n  # what the hooks and callbacks see as app.fixed_step
        ctx.input.set_step_view(logged.view)
        self._replay_drag(logged.drag)
        clock = ctx.clock
        start = clock.time_state().timeline_step_start
        end = start + clock.step_exact
        with fixed_step_scope():
            ctx.timeline.run_before(end)
        state = clock.time_state()
        clock.set_time_state(replace(state, timeline_step_start=end, steps=state.steps + 1))

    def _replay_drag(self, drag: _Drag | None) -> bool:
        """Make the replayed drag the logged one; whether a hook ran.

        ``on_drag_end`` where the one on ends, ``on_drag_begin`` where a new one starts.
        """
        ctx, spring = self._ctx, self._spring
        ran = False
        if spring is not None and (drag is None or drag.picked != spring.picked):
            self._end_replayed_drag()  # as the release did between those steps
            ran = True
        if drag is None:
            return ran
        if self._spring is None:
            world = ctx.world
            assert world is not None
            self._spring = DragSpring(world, drag.picked, frequency_hz=drag.frequency_hz)
            call_hook("on_drag_begin", ctx.hooks.on_drag_begin, drag.picked)
            ran = True
        self._spring.set_target(drag.target)
        return ran

    def _end_replayed_drag(self) -> None:
        """A replayed drag ends: its force leaves the body, then ``on_drag_end``."""
        spring, self._spring = self._spring, None
        if spring is not None:
            spring.remove()
            call_hook("on_drag_end", self._ctx.hooks.on_drag_end, spring.picked)

    def _drag_now(self) -> _Drag | None:
        d = self._ctx.dragging
        spring = d.spring
        if d.dragged is None or d.target is None or spring is None:
            return None
        return _Drag(d.dragged, d.target, float(spring.frequency_hz))

    def _close_live_view(self) -> None:
        if self._live_view is not None:
            self._ctx.input.set_step_view(self._live_view)
            self._live_view = None

    def _mute(self) -> list[Binding]:
        """Turn off the recorders' and sync points' bindings for a re-run."""
        ctx = self._ctx
        recorders = set(map(id, ctx.recorders()))
        out = []
        for b in ctx.timeline.bindings:
            owner = getattr(b.callback, "__self__", None)
            if b.enabled and (id(owner) in recorders or b.name == "sync_point"):
                b.enabled = False
                out.append(b)
        return out

    def _user_state(self) -> _UserState | None:
        """The subclass's ``state_dict()`` (None without one), checked and digested by value.

        Raises:
            ValueError: A value time travel cannot keep (`kelab.app.state_values`).
        """
        value = call_hook("state_dict", self._ctx.state.state_dict)
        if value is None:
            return None  # no state of its own
        found = state_digest(value, "App.state_dict()")
        return _UserState(value, found.digest, found.nbytes)

    def _why_not(self, step: int, hist: range) -> str:
        """Why ``step`` is outside the history, for the error of :meth:`seek`."""
        if step < 0:
            return "; fixed steps count from 0"
        if step < hist.start:
            mb = f", history_mb = {self._history_mb:g} MB" if self._bytes_trimmed else ""
            return (
                f"; steps before {hist.start} are older than the history keeps "
                f"(history_s = {self._history_s:g} s{mb})"
            )
        if step <= self._abandoned:
            return (
                f"; steps after {hist.stop - 1} were abandoned by branch {self._branch} "
                "(a new input after a seek starts a branch)"
            )
        return f"; the newest step run so far is {hist.stop - 1}"

    def _warn_no_state(self) -> None:
        if self._warned:
            return
        lacks = self._ctx.state.undeclared()
        if lacks is None:
            return
        self._warned = True
        warnings.warn(
            f"{lacks}: App.seek rewinds "
            "the World, the timeline, the clock and the inputs, but not the App subclass's "
            'own attributes; define both hooks to rewind them (docs/app.md, "Time travel")',
            RuntimeWarning,
            stacklevel=4,  # the user's app.seek(...): App.seek -> TimeTravel.seek -> here
        )

    def _digest(self, user: _UserState | None) -> bytes:
        """The state a fixed step starts from: bodies, controls, the App's state, bindings.

        The World's part: bodies, held controls, per-copy parameters, the rebase bound.

        ``user``: the subclass's state as `_user_state` found it just now.
        """
        ctx = self._ctx
        h = hashlib.blake2b(digest_size=16)
        w = ctx.world
        if w is not None:
            _feed_arrays(h, w.body_poses, w.body_velocities, w.external_forces)
            h.update(b"log%d" % w.max_log_steps)  # it decides where the World rebases
            if w.joint_names:
                _feed_arrays(h, w.joint_efforts, w.joint_position_targets)
            # per-copy parameters (docs/world.md): a set between two steps is a change too
            _feed_arrays(h, w.body_masses, w.body_friction, w.body_restitution, w.gravity)
            _feed_arrays(h, w.actuator_strength, w.sensor_noise_scale)
        h.update(b"-" if user is None else b"u" + user.digest)
        rows = [(r.name, r.hz) for r in ctx.timeline]
        rows += [(b.name, b.runner, b.phase, b.priority, b.enabled) for b in self._plan()]
        # names (str), rates (int or Fraction), Phase members, priorities (int), enabled
        # (bool): their repr is exact and tells any two apart, and costs a few us where
        # state_digest's walk took ~0.5 ms a step
        h.update(repr(rows).encode())
        return h.digest()

    def _plan(self) -> list[Binding]:
        recorders = set(map(id, self._ctx.recorders()))
        return [
            b
            for b in self._ctx.timeline.bindings
            if id(getattr(b.callback, "__self__", None)) not in recorders
        ]
