"""LidarRecorder: every rangefinder's reading, one scan per runner step.

A 2D lidar in KELab is the set of rangefinder sensors of a scene (each a beam with its
own angle and range). The recorder reads all of them on each step of its runner (by
default ``Capture``, ``ACQUISITION`` phase, like the other recorders) and writes one
scan per step:

- ``.npz``: ``time`` (steps,), ``step`` (steps,), ``ranges`` (steps, copies, beams),
  ``beams`` (names), ``angles`` (radians, NaN when a beam has no angle), ``max_range``;
- ``.csv``: a header ``time,step,<beam>`` (``env<i>:<beam>`` with several copies) and one
  line per scan, 17 significant digits.

Scans stream to disk as they come (memory stays flat over long runs); the file appears
complete at its path when the recorder closes (written next to it, then renamed).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._files import atomic_file, fsync_dir, temp_beside
from kelab.app.recorders import FrameSource, Recorder, check_copy_indices
from kelab.timing.timeline import Phase

if TYPE_CHECKING:
    from kelab.sim.world import World

__all__ = ["LidarRecorder"]


class LidarRecorder(Recorder):
    """Records every rangefinder's scan on each step of its runner.

    Args:
        path: ``*.npz`` or ``*.csv``.
        sensors: Rangefinder names to record (None: every rangefinder of the scene).
        env_ids: The environment copies to record.
        runner: The runner whose steps are recorded (default ``"Capture"``).
        phase: The phase (default ``ACQUISITION``).
        priority: Order inside the phase.

    Example:
        >>> import kelab as ke, tempfile, os
        >>> from kelab.app.lidar_recorder import LidarRecorder
        >>> b = ke.SceneBuilder()
        >>> _ = b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
        >>> world = ke.World(b.build())
        >>> rec = LidarRecorder(os.path.join(tempfile.mkdtemp(), "scan.npz"))
        >>> rec.attach(ke.Timeline(), world=world)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: LidarRecorder: the scene has no rangefinder sensors...
    """

    suffixes = (".npz", ".csv")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sensors: Sequence[str] | None = None,
        env_ids: Sequence[int] = (0,),
        runner: str = "Capture",
        phase: Phase | str = Phase.ACQUISITION,
        priority: int = 0,
    ) -> None:
        super().__init__(path, runner=runner, phase=phase, priority=priority)
        if sensors is not None and (
            isinstance(sensors, str) or not all(isinstance(s, str) for s in sensors)
        ):
            raise ValueError(
                f"LidarRecorder.sensors must be None or a list of rangefinder names, "
                f"got {sensors!r}"
            )
        self.sensors = None if sensors is None else tuple(sensors)
        self.env_ids = check_copy_indices(env_ids, "LidarRecorder.env_ids")
        self.scans = 0
        """Scans recorded so far."""
        self.beams: tuple[str, ...] = ()
        self.angles = np.zeros(0)
        self.max_range = np.zeros(0)
        self._world: World | None = None
        self._tmp: Any = None  # open temp file the scans stream into
        self._tmp_path: Path | None = None

    def _prepare(self, world: World | None, frame_source: FrameSource | None) -> None:
        if world is None:
            raise ValueError("LidarRecorder needs a World: attach with world= (App does)")
        finders = {s.name: s for s in world.scene.sensors if s.kind == "rangefinder"}
        if not finders:
            raise ValueError(
                "LidarRecorder: the scene has no rangefinder sensors; add one with a "
                "SensorSpec(kind='rangefinder') or record with a DataRecorder instead"
            )
        names = tuple(finders) if self.sensors is None else self.sensors
        unknown = [n for n in names if n not in finders]
        if unknown or not names:
            raise ValueError(
                f"LidarRecorder.sensors must name rangefinders, got {list(unknown or names)}; "
                f"the scene's rangefinders are {list(finders)}"
            )
        if int(self.env_ids.max()) >= int(world.num_envs):
            raise ValueError(
                f"LidarRecorder.env_ids {self.env_ids.tolist()} must be < num_envs {world.num_envs}"
            )
        self.beams = names

        def param(name: str, key: str) -> float:
            try:
                return float(finders[name].param(key))
            except (KeyError, TypeError, ValueError):
                return float("nan")

        self.angles = np.array([param(n, "angle") for n in names])
        self.max_range = np.array([param(n, "max_range") for n in names])
        self._world = world
        self._tmp_path = temp_beside(self.path, suffix=".part")
        if self.path.suffix.lower() == ".csv":
            self._tmp = open(self._tmp_path, "w", encoding="utf-8", newline="")
            many = self.env_ids.size > 1
            cols = ["time", "step"] + [
                f"env{e}:{b}" if many else b for e in self.env_ids.tolist() for b in names
            ]
            self._tmp.write(",".join(cols) + "\n")
        else:
            self._tmp = open(self._tmp_path, "wb")

    def record(self, ts: float) -> None:
        """Read every beam and append one scan (the timeline calls this)."""
        if self._closed or self._tmp is None:
            return
        w, ids = self._world, self.env_ids
        scan = np.empty((ids.size, len(self.beams)))
        for k, name in enumerate(self.beams):
            scan[:, k] = np.asarray(w.read_sensor(name), dtype=np.float64)[ids, 0]
        now = self._timeline.time_s if self._timeline is not None else 0.0
        row = np.concatenate(([now, float(self.scans)], scan.reshape(-1)))
        if self.path.suffix.lower() == ".csv":
            np.savetxt(self._tmp, row[None], fmt="%.17g", delimiter=",")
        else:
            self._tmp.write(row.astype("<f8").tobytes())
        self.scans += 1

    def _finish(self) -> None:
        tmp, self._tmp = self._tmp, None
        if tmp is None or self._tmp_path is None:
            return
        part = self._tmp_path
        try:
            tmp.flush()
            os.fsync(tmp.fileno())
            tmp.close()
            if self.path.suffix.lower() == ".csv":
                os.replace(part, self.path)
                fsync_dir(self.path.parent)
                return
            width = 2 + self.env_ids.size * len(self.beams)
            rows = np.fromfile(part, dtype="<f8").reshape(-1, width)
            with atomic_file(self.path) as fh:
                np.savez(
                    fh,
                    time=rows[:, 0].copy(),
                    step=rows[:, 1].astype(np.int64),
                    ranges=rows[:, 2:].reshape(-1, self.env_ids.size, len(self.beams)),
                    beams=np.array(self.beams, dtype=str),
                    angles=self.angles,
                    max_range=self.max_range,
                    env_ids=self.env_ids.astype(np.int64),
                )
        finally:
            if part.exists():
                part.unlink()
