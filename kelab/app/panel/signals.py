"""The Settings panel's signals: what the Plots page can show, and their sample rings.

A signal is a frame statistic (`FRAME_SIGNALS`), a World value (``Body.x``, ``joint.pos``,
``sensor[k]``: `world_signals`, read by `read_signal`) or a value a script publishes
with ``App.plot`` (``app.NAME``). Each plotted one keeps its last `HISTORY` samples in
a `SignalHistory`. The panel's model (`kelab.app.panel.model.PanelModel`) owns them.

Example:
    >>> h = SignalHistory(capacity=3)
    >>> for k in range(5):
    ...     h.add(float(k), 10.0 * k)
    >>> h.arrays()[1].tolist(), len(h)
    ([20.0, 30.0, 40.0], 3)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kelab.sim.world import World

__all__ = [
    "FRAME_SIGNALS",
    "HISTORY",
    "MAX_PUBLISHED",
    "SignalHistory",
    "read_signal",
    "signal_groups",
    "world_signals",
]

#: Frame statistics always sampled while the panel exists.
FRAME_SIGNALS = ("frame.time_ms", "frame.steps_per_frame", "frame.real_time_factor")
HISTORY = 1200  # samples kept per signal
MAX_PUBLISHED = 64  # app.plot() names kept


class SignalHistory:
    """A fixed-size ring of ``(x, y)`` samples (flat memory over long runs).

    ``x`` is simulated time: a sample earlier than the newest (the App went back in
    time, a seek or a branch) first drops the samples after it, so the ring holds the
    past of the moment shown, never an abandoned future.

    >>> h = SignalHistory()
    >>> for t in (0.0, 0.5, 1.0, 0.25):
    ...     h.add(t, t)
    >>> h.arrays()[0].tolist()
    [0.0, 0.25]
    """

    __slots__ = ("_n", "_x", "_y")

    def __init__(self, capacity: int = HISTORY) -> None:
        self._x = np.zeros(capacity)
        self._y = np.zeros(capacity)
        self._n = 0

    def add(self, x: float, y: float) -> None:
        """Append one sample (the oldest is dropped when full; later ones when x went back)."""
        if self._n and x < self._x[(self._n - 1) % self._x.size]:
            self._drop_after(x)
        i = self._n % self._x.size
        self._x[i] = x
        self._y[i] = y
        self._n += 1

    def __len__(self) -> int:
        return min(self._n, self._x.size)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The samples oldest first, as two new float64 arrays."""
        n, cap = self._n, self._x.size
        if n <= cap:
            return self._x[:n].copy(), self._y[:n].copy()
        k = n % cap
        return np.roll(self._x, -k), np.roll(self._y, -k)

    def last(self) -> float:
        """The newest value (nan when empty)."""
        return float(self._y[(self._n - 1) % self._x.size]) if self._n else math.nan

    def _drop_after(self, x: float) -> None:
        """Keep only the samples at ``x`` or before it, oldest first from index 0."""
        xs, ys = self.arrays()
        keep = xs <= x
        k = int(keep.sum())
        self._x[:k], self._y[:k] = xs[keep], ys[keep]
        self._n = k


def world_signals(world: World) -> list[str]:
    """Every World signal: each body's pose and velocity, joint states, sensor values.

    Args:
        world: The App's World.

    Returns:
        Names such as ``"/World/Ball.x"``, ``"/World/Robot/hinge.pos"``, ``"lidar[3]"``.
    """
    out: list[str] = []
    for b in world.body_names:
        out += [f"{b}.{f}" for f in ("x", "y", "angle", "vx", "vy", "omega")]
    for j in world.joint_names:
        out += [f"{j}.pos", f"{j}.vel"]
    for s in world.scene.sensors:
        width = int(np.asarray(world.read_sensor(s.name)).shape[1])
        out += [f"{s.name}[{k}]" for k in range(width)]
    return out


def read_signal(world: World, sig: str, cache: dict[str, np.ndarray]) -> float | None:
    """The current value of a World signal in copy 0 (None for a name it is not).

    Args:
        world: The App's World.
        sig: A name from `world_signals`.
        cache: Batch reads shared by the signals of one frame (filled here).
    """
    if sig.endswith("]") and "[" in sig:
        name, k = sig[:-1].rsplit("[", 1)
        return float(np.asarray(world.read_sensor(name))[0, int(k)])
    base, field = sig.rsplit(".", 1)
    if field in ("x", "y", "angle", "vx", "vy", "omega"):
        key = "poses" if field in ("x", "y", "angle") else "vel"
        if key not in cache:
            cache[key] = world.body_poses if key == "poses" else world.body_velocities
        col = ("x", "y", "angle", "vx", "vy", "omega").index(field) % 3
        return float(cache[key][0, world.body_names.index(base), col])
    if field in ("pos", "vel"):
        key = "jpos" if field == "pos" else "jvel"
        if key not in cache:
            cache[key] = world.joint_positions if field == "pos" else world.joint_velocities
        return float(cache[key][0, world.joint_names.index(base)])
    return None


def signal_groups(signals: Sequence[str]) -> dict[str, list[str]]:
    """Group signal names for the Plots page's picker (frame, bodies, joints, sensors, app)."""
    groups: dict[str, list[str]] = {}
    for s in signals:
        if s.startswith("frame."):
            g = "Frame"
        elif s.startswith("app."):
            g = "Published (app.plot)"
        elif s.endswith("]"):
            g = "Sensors"
        elif s.endswith((".pos", ".vel")):
            g = "Joints"
        else:
            g = "Bodies"
        groups.setdefault(g, []).append(s)
    return groups
