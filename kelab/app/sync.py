"""Sync points: the door between the App's thread and the outside world (``app.sync``).

Other threads (a notebook, a socket server, a bridge to other processes) never touch
the App directly. They call ``app.sync.submit(fn)``, which returns a
`concurrent.futures.Future` at once; at the next sync point, on the App's thread,
``fn(app)`` runs and its result (or its exception: never raised into the App's loop)
goes to the future. At every sync point the App also publishes a read-only
`SyncState` (time, step, body states) that any thread reads with `SyncPoints.latest`,
without locks: each state is a new immutable object swapped in by one assignment.

Sync points are a system on the timeline like any other: by default the ``Sync``
runner at 10 Hz, EXPORT phase (after the step's physics and checks), named
``sync_point`` (the panel's Subsystems page rebinds it).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from kelab.app.ports import SyncHost

__all__ = ["SYNC_HZ", "SYNC_RUNNER", "SyncPoints", "SyncState"]

SYNC_RUNNER = "Sync"
SYNC_HZ = 10


class SyncState(NamedTuple):
    """What the App published at one sync point (arrays are read-only copies).

    Attributes:
        time: The timeline's time at the sync point (seconds).
        step: Fixed steps the App had run (``app.clock.steps``).
        body_poses: ``(num_envs, num_bodies, 3)`` x, y, angle, or None without a World.
        body_velocities: ``(num_envs, num_bodies, 3)`` vx, vy, omega, or None.
        body_names: The bodies' paths (columns of the arrays).
    """

    time: float
    step: int
    body_poses: np.ndarray | None
    body_velocities: np.ndarray | None
    body_names: tuple[str, ...]


def _frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, copy=True)
    out.flags.writeable = False
    return out


class SyncPoints:
    """Calls from other threads, run on the App's thread at its sync points.

    Args:
        app: The App (as a `kelab.app.ports.SyncHost`).

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

    def __init__(self, app: SyncHost) -> None:
        self._app = app
        self._calls: queue.SimpleQueue[tuple[Callable[[Any], Any], Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._latest: SyncState | None = None
        self._closed = False

    def submit(self, fn: Callable[[Any], Any]) -> Future[Any]:
        """Run ``fn(app)`` on the App's thread at the next sync point (thread-safe).

        Returns:
            A Future with ``fn``'s result, or the exception it raised.

        Raises:
            ValueError: ``fn`` is not callable.
            RuntimeError: The App is closed.
        """
        if not callable(fn):
            raise ValueError(f"app.sync.submit(fn): fn must be callable, got {fn!r}")
        if self._closed:
            raise RuntimeError("app.sync.submit: the App is closed; nothing would run fn")
        future: Future[Any] = Future()
        self._calls.put((fn, future))
        return future

    def latest(self) -> SyncState | None:
        """The state published at the last sync point (None before the first one)."""
        return self._latest

    @property
    def pending(self) -> int:
        """Calls waiting for the next sync point."""
        return self._calls.qsize()

    def run(self, ts: float) -> None:
        """One sync point (the timeline calls it): run the calls waiting, then publish."""
        del ts
        while True:
            try:
                fn, future = self._calls.get_nowait()
            except queue.Empty:
                break
            if not future.set_running_or_notify_cancel():
                continue  # cancelled by its submitter
            try:
                result = fn(self._app)
            except BaseException as exc:  # the caller's error: to its future, never the loop
                future.set_exception(exc)
            else:
                future.set_result(result)
        self._publish()

    def _publish(self) -> None:
        app = self._app
        world = app.world
        if world is None:
            poses = vels = None
            names: tuple[str, ...] = ()
        else:
            poses, vels = _frozen(world.body_poses), _frozen(world.body_velocities)
            names = tuple(world.body_names)
        self._latest = SyncState(app.timeline.time_s, app.clock.steps, poses, vels, names)

    def close(self) -> None:
        """Refuse new calls and fail the waiting ones (the App closed)."""
        self._closed = True
        while True:
            try:
                _, future = self._calls.get_nowait()
            except queue.Empty:
                return
            if future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError("the App closed before the sync point"))
