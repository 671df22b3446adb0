"""The variable ``dt`` of each frame, for the App's free-step scripts (``free_update``).

Fixed-step callbacks (``fixed_update``) receive their runner's constant ``ts``; a
free-step script runs once per frame and receives that frame's own duration, which
varies with the frame rate. Imports nothing of KELab.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["FrameDelta"]


class _Clock(Protocol):
    @property
    def paused(self) -> bool: ...

    @property
    def max_frame_delta(self) -> float | None: ...

    @property
    def time_scale(self) -> float: ...


class FrameDelta:
    """Measures each frame's ``dt``: its wall time, clamped and scaled like simulated time.

    Example:
        >>> from types import SimpleNamespace
        >>> clock = SimpleNamespace(paused=False, max_frame_delta=0.25, time_scale=0.5)
        >>> d = FrameDelta()
        >>> d.next(10.0, clock), d.next(10.04, clock), d.next(11.0, clock)
        (0.0, 0.02, 0.125)
    """

    def __init__(self) -> None:
        self._last: float | None = None

    def next(self, now: float, clock: _Clock) -> float:
        """The ``dt`` of the frame ending at wall time ``now`` (seconds).

        Returns:
            ``now`` minus the previous frame's time, at most ``clock.max_frame_delta``,
            times ``clock.time_scale``; 0.0 for the first frame and while paused.
        """
        last, self._last = self._last, now
        if last is None or clock.paused:
            return 0.0
        dt = max(0.0, now - last)
        limit = clock.max_frame_delta
        if limit is not None:
            dt = min(dt, limit)
        return round(dt * clock.time_scale, 12)
