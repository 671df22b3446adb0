"""Sync points: the door between the App's thread and the outside world (``app.sync``).

Other threads (a notebook, a socket server, a bridge to other processes) never touch
the App directly. They call ``app.sync.submit(fn)``, which returns a
`concurrent.futures.Future` at once; at the next sync point, on the App's thread,
``fn(app)`` runs and its result (or its exception: never raised into the App's loop)
goes to the future. A sync point runs only the calls submitted before it began (one
submitted meanwhile waits for the next), and every future ends done: once the App
closes, or is garbage-collected unclosed, the calls still waiting fail with a
`RuntimeError`. The App's time travel keeps a keyframe after a sync point that ran
calls (``on_calls_ran``): re-runs skip the calls, so a seek restores what they left.
At every sync point the App also publishes a read-only `SyncState` (time, step, body
states) that any thread reads with `SyncPoints.latest`, without locks: each state is a
new immutable object swapped in by one assignment.

Sync points are a system on the timeline like any other: by default the ``Sync``
runner at 10 Hz, EXPORT phase (after the step's physics and checks), named
``sync_point`` (the panel's Subsystems page rebinds it). They are given a `SyncContext`,
never the App: the timeline, the clock and the World they publish, and the object each
call gets (the App: ``fn(app)``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from kelab.timing.timeline import MAX_RUNNERS, Binding, Phase

if TYPE_CHECKING:
    from kelab.app.systems import EngineSystems
    from kelab.sim.world import World
    from kelab.timing.clock import FixedStepClock
    from kelab.timing.timeline import Timeline

__all__ = ["SYNC_HZ", "SYNC_RUNNER", "SyncContext", "SyncPoints", "SyncState"]

SYNC_RUNNER = "Sync"
SYNC_HZ = 10


class SyncState(NamedTuple):
    """What the App published at one sync point (arrays are read-only copies).

    Attributes:
        time: The simulated time at the end of ``step`` (what ``app.sim_time`` reads once
            that step is done), the time of the body states.
        step: The fixed step whose end state this is, counted like ``app.clock.steps``:
            the step the sync point ran in (while it is in ``app.history``,
            ``app.seek(step)`` returns to this state). A frame that catches up several
            steps publishes, at each sync point, the step that point ran in, not the
            frame's total.
        body_poses: ``(num_envs, num_bodies, 3)`` x, y, angle, or None without a World.
        body_velocities: ``(num_envs, num_bodies, 3)`` vx, vy, omega, or None.
        body_names: The bodies' paths (columns of the arrays).
    """

    time: float
    step: int
    body_poses: np.ndarray | None
    body_velocities: np.ndarray | None
    body_names: tuple[str, ...]


def _nobody() -> None:
    """The default ``on_calls_ran``: nobody to tell."""


@dataclass(frozen=True)
class SyncContext:
    """What `SyncPoints` is given: where they bind, what they publish, what calls get."""

    timeline: Timeline
    """Where the sync points bind (the ``Sync`` runner)."""
    clock: FixedStepClock
    """``current_step`` and the time at its end (what a published state names)."""
    world: World | None
    """The body states published (None: none)."""
    owner: object
    """What each submitted call gets: ``fn(owner)`` (the App)."""
    on_calls_ran: Callable[[], None] = _nobody
    """Called after a sync point ran calls (the App's time travel keeps a keyframe there:
    re-runs skip the calls, so the state they left is kept)."""


def _frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, copy=True)
    out.flags.writeable = False
    return out


class SyncPoints:
    """Calls from other threads, run on the App's thread at its sync points.

    Args:
        context: The timeline, clock and World, and what calls get (`SyncContext`).

    Example:
        >>> import threading, kelab as ke
        >>> app = ke.App(headless=True, size=(64, 48), render_hz=None,
        ...              time_mode=ke.TimeMode.SIM_HIGH_PERF, settings="/nonexistent.json")
        >>> answer = []
        >>> t = threading.Thread(target=lambda: answer.append(
        ...     app.sync.submit(lambda a: a.clock.steps).result(timeout=10)))
        >>> t.start()
        >>> while t.is_alive():
        ...     _ = app.renderFrameOnce()
        >>> answer[0] % 5, app.sync.latest().step % 5   # on sync points: every 5th step
        (1, 1)
        >>> app.close()
    """

    def __init__(self, context: SyncContext) -> None:
        self._ctx = context
        # guards _calls, _waiting and _closed (never held while fn runs)
        self._lock = threading.Lock()
        self._calls: list[tuple[Callable[[Any], Any], Future[Any]]] = []
        # the futures of _calls alone: what the finalizer fails if the App is dropped
        # unclosed (it holds no fn, which may hold the App, and so never keeps it alive)
        self._waiting: list[Future[Any]] = []
        self._latest: SyncState | None = None
        self._closed = False
        self._added_runner = False  # bind() added the Sync runner to the timeline
        weakref.finalize(self, _fail_dropped, self._lock, self._waiting)

    def bind(self, systems: EngineSystems, main_runner: str) -> Binding:
        """Bind the sync points as the ``sync_point`` system (EXPORT phase); its binding.

        They run on the ``Sync`` runner, added at `SYNC_HZ` when the timeline has none
        and has room for it, else on ``main_runner``.
        """
        timeline = self._ctx.timeline
        if SYNC_RUNNER not in timeline.runners and len(timeline.runners) < MAX_RUNNERS:
            timeline.add_runner(SYNC_RUNNER, SYNC_HZ)
            self._added_runner = True
        runner = SYNC_RUNNER if SYNC_RUNNER in timeline.runners else main_runner
        label = "Sync points (app.sync)"
        return systems.add("sync_point", label, self.run, runner, Phase.EXPORT, 0)

    def remove_runner(self) -> None:
        """Remove the ``Sync`` runner `bind` added (a caller's timeline outlives the App)."""
        timeline = self._ctx.timeline
        if self._added_runner and SYNC_RUNNER in timeline.runners:
            timeline.remove_runner(SYNC_RUNNER)
        self._added_runner = False

    def submit(self, fn: Callable[[Any], Any]) -> Future[Any]:
        """Run ``fn(app)`` on the App's thread at the next sync point (thread-safe).

        A call submitted while a sync point runs (also by one of its calls) waits for
        the next sync point. Every future ends done: with ``fn``'s result or exception,
        or, if the App closes (or is garbage-collected unclosed) first, with a
        `RuntimeError` saying so.

        Returns:
            A Future with ``fn``'s result, or the exception it raised.

        Raises:
            ValueError: ``fn`` is not callable.
            RuntimeError: The App is closed.
        """
        if not callable(fn):
            raise ValueError(f"app.sync.submit(fn): fn must be callable, got {fn!r}")
        future: Future[Any] = Future()
        with self._lock:  # close() cannot slip in between the check and the append
            if self._closed:
                raise RuntimeError("app.sync.submit: the App is closed; nothing would run fn")
            self._calls.append((fn, future))
            self._waiting.append(future)
        return future

    def latest(self) -> SyncState | None:
        """The state published at the last sync point (None before the first one)."""
        return self._latest

    @property
    def pending(self) -> int:
        """Calls waiting for the next sync point."""
        return len(self._calls)

    def run(self, ts: float) -> None:
        """One sync point (the timeline calls it): run the calls waiting, then publish.

        Only the calls submitted before it started run; once the App closes (a call
        may close it), the rest fail with a `RuntimeError`.
        """
        del ts
        with self._lock:
            calls, self._calls = self._calls, []
            self._waiting.clear()
        ran = False
        for fn, future in calls:
            if self._closed:
                _fail(future)
            elif future.set_running_or_notify_cancel():  # False: cancelled by its submitter
                ran = True
                try:
                    result = fn(self._ctx.owner)
                except BaseException as exc:  # the caller's error: to its future, never the loop
                    future.set_exception(exc)
                else:
                    future.set_result(result)
        if ran:
            self._ctx.on_calls_ran()
        self._publish()

    def _publish(self) -> None:
        ctx = self._ctx
        world = ctx.world
        if world is None:
            poses = vels = None
            names: tuple[str, ...] = ()
        else:
            poses, vels = _frozen(world.body_poses), _frozen(world.body_velocities)
            names = tuple(world.body_names)
        clock = ctx.clock
        step = clock.current_step  # clock.steps already counts the frame's later steps
        time = clock.sim_time_exact - (clock.steps - step) * clock.step_exact
        self._latest = SyncState(float(time), step, poses, vels, names)

    def close(self) -> None:
        """Refuse new calls and fail the waiting ones (the App closed; thread-safe)."""
        with self._lock:
            self._closed = True
            calls, self._calls = self._calls, []
            self._waiting.clear()
        for _, future in calls:
            _fail(future)


def _fail(future: Future[Any], why: str = "the App closed before the sync point") -> None:
    if future.set_running_or_notify_cancel():
        future.set_exception(RuntimeError(why))


def _fail_dropped(lock: threading.Lock, waiting: list[Future[Any]]) -> None:
    """The SyncPoints were garbage-collected: fail the calls still waiting (never run)."""
    with lock:
        futures = waiting[:]
        waiting.clear()
    for future in futures:
        _fail(
            future,
            "the App was garbage-collected, unclosed, before the sync point ran this call; "
            "keep a reference to the App and run its frames (or close() it) while calls wait",
        )
