"""LidarRecorder: every rangefinder's reading, one scan per runner step.

A 2D lidar in KELab is the set of rangefinder sensors of a scene (each a beam with its
own angle and range). The recorder reads all of them on each step of its runner (by
default ``Capture``, ``ACQUISITION`` phase, like the other recorders) and writes one
scan per step:

- ``.npz``: ``time`` (steps,), ``step`` (steps,), ``ranges`` (steps, copies, beams),
  ``beams`` (names), ``angles`` (radians, NaN when a beam has no angle), ``max_range``;
- ``.csv``: a header ``time,step,<beam>`` (``env<i>:<beam>`` with several copies) and one
  line per scan, 17 significant digits.

Scans stream to ``<path>.partial`` as they come, like a `DataRecorder`'s rows (memory
stays flat over long runs): CSV text, or for ``.npz`` a row spool whose columns are
``time``, ``step`` and the beam names. They are handed to the operating system every
``flush_every`` scans and at least every ``flush_interval_s`` seconds of wall time, so a
kill (SIGKILL) loses at most the last ``flush_every - 1`` scans and `load_recording`
reads what it left (``complete=False``). `close` fsyncs the file and publishes it at its
path (renamed; for ``.npz`` rewritten into the layout above). `load_recording` reads a
closed recording too (its columns ``time``, ``step``, then one per beam and copy).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._files import atomic_file
from kelab._validate import check_int, check_number
from kelab.app.recorders import FrameSource, Recorder, check_copy_indices
from kelab.app.recording_files import SPOOL_MAGIC, load_partial, open_partial, write_rows
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
        flush_every: Scans buffered at most before they are written (an int >= 1).
        flush_interval_s: Wall seconds a buffered scan waits at most (> 0).

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
        flush_every: int = 16,
        flush_interval_s: float = 0.5,
    ) -> None:
        check_int(flush_every, "LidarRecorder.flush_every", low=1)
        check_number(
            flush_interval_s,
            "LidarRecorder.flush_interval_s",
            low=0.0,
            low_open=True,
            unit="seconds",
        )
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
        self.flush_every = flush_every
        self.flush_interval_s = float(flush_interval_s)
        self._world: World | None = None
        self._file: Any = None  # the open <path>.partial the scans stream into
        self._pending: list[np.ndarray] = []
        self._last_flush = time.monotonic()
        self._csv = self.path.suffix.lower() == ".csv"

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
        many = self.env_ids.size > 1
        columns = ["time", "step"] + [
            f"env{e}:{b}" if many else b for e in self.env_ids.tolist() for b in names
        ]
        self._file = open_partial(self.partial_path, "LidarRecorder", text=self._csv)
        if self._csv:
            self._file.write(",".join(columns) + "\n")
        else:
            header = {"columns": columns, "dtype": "<f8"}
            self._file.write(SPOOL_MAGIC + json.dumps(header).encode("utf-8") + b"\n")
        self._file.flush()  # a kill before the first scan still leaves the beam names
        self._last_flush = time.monotonic()

    def record(self, ts: float) -> None:
        """Read every beam and append one scan (the timeline calls this)."""
        if self._closed or self._file is None:
            return
        w, ids = self._world, self.env_ids
        scan = np.empty((ids.size, len(self.beams)))
        for k, name in enumerate(self.beams):
            scan[:, k] = np.asarray(w.read_sensor(name), dtype=np.float64)[ids, 0]
        now = self._timeline.time_s if self._timeline is not None else 0.0
        self._pending.append(np.concatenate(([now, float(self.scans)], scan.reshape(-1))))
        self.scans += 1
        if (
            len(self._pending) >= self.flush_every
            or time.monotonic() - self._last_flush >= self.flush_interval_s
        ):
            self.flush()

    def flush(self) -> None:
        """Hand buffered scans to the operating system now (they survive a process kill)."""
        if self._file is not None:
            write_rows(self._file, self._pending, self._csv)
            self._file.flush()
        self._last_flush = time.monotonic()

    def _finish(self) -> None:
        if self._file is None:
            return
        try:
            self.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()
            self._file = None
        if self._csv:
            self._publish()
            return
        rows = load_partial(self.path).data
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
        self.partial_path.unlink()
