"""Recorders: body states and sensor readings to CSV/.npz, and frames to .mp4/.gif.

A recorder is bound to one time runner and phase of a `Timeline`, by default the
``Capture`` runner (30 Hz) in the ``ACQUISITION`` phase, so it records the state the
controller is about to react to. It writes one row (or one frame) per step of its runner.
`App.add_recorder` attaches a recorder and closes it when the App stops, also when a
callback raised, so nothing recorded is lost. Recorders also work without an App:
``recorder.attach(timeline, world=world)`` and ``recorder.close()``.

Streaming: the destination is checked when a recorder is created (the directory is made
and a probe file written), and nothing grows in memory while recording. CSV, ``.npz`` and
``.gif`` recordings are written as they go to ``<path>.partial`` and renamed to ``<path>``
(fsynced) by `Recorder.close`, so ``<path>`` only ever holds a complete recording. After a
crash or SIGKILL the ``.partial`` file holds every row up to the last flush (CSV and
``.npz``: at most ``flush_every - 1`` rows and at most ``flush_interval_s`` seconds of
wall time are lost) and every GIF frame already appended (at most the frame being written);
`load_recording` reads a data recording either way. See docs/recorders.md.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import check_int, check_number, is_int, must
from kelab.app.recording_files import (
    SPOOL_MAGIC,
    GifStream,
    Recording,
    check_destination,
    fsync_dir,
    load_recording,
    open_partial,
    partial_path,
    spool_to_npz,
    write_rows,
)
from kelab.timing.timeline import Binding, Phase, Timeline

if TYPE_CHECKING:
    from kelab.sim.world import World

FrameSource = Callable[[], "np.ndarray | None"]

__all__ = ["DataRecorder", "Recorder", "Recording", "VideoRecorder", "load_recording"]


def check_phase(phase: Phase | str, name: str = "phase") -> Phase:
    """Return ``phase`` as a `Phase` (a Phase, or its name in any case).

    Raises:
        ValueError: ``"phase must be a Phase (ACQUISITION, ...), got 'x'"``.
    """
    if isinstance(phase, Phase):
        return phase
    if isinstance(phase, str) and phase.upper() in Phase.__members__:
        return Phase[phase.upper()]
    raise ValueError(must(name, f"a Phase ({', '.join(p.name for p in Phase)})", phase))


def check_copy_indices(env_ids: Sequence[int], name: str, *, distinct: bool = False) -> np.ndarray:
    """Return ``env_ids`` as an ``intp`` array: a non-empty sequence of copy indices >= 0.

    Args:
        env_ids: The copies to record (ints or numpy integers; not bools).
        name: The field, for the message (``"DataRecorder.env_ids"``).
        distinct: Refuse repeated indices.

    Raises:
        ValueError: ``"<name> must be copy indices >= 0, got [-1]"``.
    """
    allowed = "distinct copy indices >= 0" if distinct else "copy indices >= 0"
    if isinstance(env_ids, (str, bytes)):
        raise ValueError(must(name, allowed, env_ids))
    try:
        ids = list(env_ids)
    except TypeError:
        raise ValueError(must(name, allowed, env_ids)) from None
    if not ids or not all(is_int(e) and int(e) >= 0 for e in ids):
        raise ValueError(must(name, allowed, env_ids))
    out = np.array([int(e) for e in ids], dtype=np.intp)
    if distinct and np.unique(out).size != out.size:
        raise ValueError(must(name, allowed, env_ids))
    return out


class Recorder(ABC):
    """Base of the recorders: a callback bound to a runner and phase, and a file.

    Args:
        path: The output file.
        runner: The time runner whose steps are recorded.
        phase: The phase of the step the recorder runs in.
        priority: Order inside the phase (lower first).
    """

    #: Suffixes this recorder writes, lowercase with the dot.
    suffixes: tuple[str, ...] = ()

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        runner: str = "Capture",
        phase: Phase | str = Phase.ACQUISITION,
        priority: int = 0,
    ) -> None:
        self._path = Path(path)
        if self.path.suffix.lower() not in self.suffixes:
            raise ValueError(
                f"{type(self).__name__}: path must end in one of {list(self.suffixes)}, "
                f"got {str(path)!r}; name the file with one of them, e.g. "
                f"{str(Path(path).with_suffix(self.suffixes[0]))!r}"
            )
        if not isinstance(runner, str) or not runner:
            raise ValueError(f"{type(self).__name__}: runner must be a runner name, got {runner!r}")
        check_int(priority, f"{type(self).__name__}.priority")
        self._runner = runner
        self._phase = check_phase(phase)
        self._priority = priority
        check_destination(self.path, type(self).__name__)
        self._binding: Binding | None = None
        self._timeline: Timeline | None = None
        self._closed = False

    @property
    def path(self) -> Path:
        """The output file (read-only: the recording streams to it; make a new recorder)."""
        return self._path

    @property
    def runner(self) -> str:
        """The runner whose steps are recorded (settable: `rebind`, from the next boundary)."""
        return self._runner

    @runner.setter
    def runner(self, value: str) -> None:
        self.rebind(runner=value)

    @property
    def phase(self) -> Phase:
        """The phase the recorder runs in (settable: `rebind`)."""
        return self._phase

    @phase.setter
    def phase(self, value: Phase | str) -> None:
        self.rebind(phase=value)

    @property
    def priority(self) -> int:
        """The recorder's order inside its phase, lower first (settable: `rebind`)."""
        return self._priority

    @priority.setter
    def priority(self, value: int) -> None:
        self.rebind(priority=value)

    @property
    def closed(self) -> bool:
        """True once `close` ran: the file is complete."""
        return self._closed

    @property
    def partial_path(self) -> Path:
        """Where the recording streams until `close` renames it to `path`."""
        return partial_path(self.path)

    def _publish(self) -> None:
        """Rename the finished ``.partial`` file to `path` (it was fsynced by its writer)."""
        os.replace(self.partial_path, self.path)
        fsync_dir(self.path.parent)

    @property
    def attached(self) -> bool:
        """True while bound to a timeline."""
        return self._binding is not None and self._binding.bound

    def attach(
        self,
        timeline: Timeline,
        world: World | None = None,
        frame_source: FrameSource | None = None,
    ) -> Binding:
        """Bind the recorder to ``timeline`` (its runner and phase).

        Args:
            timeline: The timeline whose runner steps are recorded.
            world: The World to read states from (DataRecorder).
            frame_source: Returns the latest frame as ``(H, W, 3)`` uint8, or None when
                there is none yet (VideoRecorder).

        Returns:
            The timeline binding.
        """
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} for {self.path} is closed; make a new one")
        if self._binding is not None:
            raise RuntimeError(f"{type(self).__name__} for {self.path} is already attached")
        timeline.runner(self.runner)  # KeyError naming the runners if unknown
        name = f"{type(self).__name__}({self.path.name})"  # binding names are unique
        if any(b.name == name for b in timeline.bindings):  # a same-named file elsewhere
            name = f"{type(self).__name__}({self.path})"
        if any(b.name == name for b in timeline.bindings):
            raise RuntimeError(
                f"a {type(self).__name__} for {self.path} is already attached to this timeline;"
                " record to another path"
            )
        self._timeline = timeline
        self._prepare(world, frame_source)
        self._binding = timeline.bind(
            self.record, runner=self.runner, phase=self.phase, priority=self.priority, name=name
        )
        return self._binding

    def rebind(
        self,
        runner: str | None = None,
        phase: Phase | str | None = None,
        priority: int | None = None,
    ) -> None:
        """Move the recorder to another runner, phase and/or priority (None: unchanged).

        While attached the change applies from the next boundary (`Binding.rebind`,
        validated the same way: an unknown runner is a KeyError naming the runners).
        All or nothing: a refused change leaves all three as they were.

        Raises:
            KeyError: For a runner the timeline does not have.
            ValueError: For a runner that is not a name, a bad phase or priority.
        """
        cls = type(self).__name__
        if runner is not None and (not isinstance(runner, str) or not runner):
            raise ValueError(f"{cls}: runner must be a runner name, got {runner!r}")
        new_runner = self._runner if runner is None else runner
        new_phase = self._phase if phase is None else check_phase(phase)
        new_priority = (
            self._priority
            if priority is None
            else check_int(
                priority, f"{cls}.priority", fix="give a whole number (lower runs first)"
            )
        )
        if self._binding is not None and self._binding.bound:
            self._binding.rebind(runner=new_runner, phase=new_phase, priority=new_priority)
        elif self._timeline is not None:
            self._timeline.runner(new_runner)
        self._runner, self._phase, self._priority = new_runner, new_phase, new_priority

    def detach(self) -> None:
        """Unbind from the timeline (the file stays open until `close`)."""
        if self._binding is not None:
            self._binding.unbind()

    def close(self) -> None:
        """Unbind, flush and close the file; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self.detach()
        self._finish()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def record(self, ts: float) -> None:
        """Record one step of the runner (the timeline calls this)."""

    @abstractmethod
    def _prepare(self, world: World | None, frame_source: FrameSource | None) -> None: ...

    @abstractmethod
    def _finish(self) -> None: ...


class DataRecorder(Recorder):
    """Records chosen body states, sensor readings and signals, one row per runner step.

    Columns: ``time`` (the step's exact timeline time in seconds), ``step`` (row index),
    ``branch`` when `branch` was set before the first row (an App's recorders: the App's
    time-travel branch each row was recorded in, 0 for the first timeline), then for
    each recorded copy and body ``<body>.x``, ``.y``, ``.angle`` (pose) and ``.vx``,
    ``.vy``, ``.omega`` (velocity), then ``<sensor>[k]`` for each sensor component, then
    each signal. With several copies every name is prefixed ``env<i>:``.
    A ``.csv`` file is a header line, then one line per row, floats with 17 significant
    digits so they read back exactly; an ``.npz`` file holds ``columns`` (names), ``data``
    (rows x columns float64), ``time`` and ``step``.

    Rows stream to ``<path>.partial`` (CSV text, or for ``.npz`` a row spool: a magic line,
    a JSON header line with the columns, then raw little-endian float64 rows). Buffered
    rows are handed to the operating system every ``flush_every`` rows and at least every
    ``flush_interval_s`` seconds of wall time (checked as rows arrive), so a SIGKILL loses
    at most ``flush_every - 1`` rows, all recorded in the last ``flush_interval_s``
    seconds. `close` turns the spool into the ``.npz`` (streamed, flat memory), fsyncs and
    renames it to ``path``. `load_recording` reads either.

    Args:
        path: ``*.csv`` or ``*.npz``.
        bodies: Body paths to record (None: every body of the World; ``()``: none).
        sensors: Sensor names to record (``World.read_sensor``); unknown names are refused
            at `attach`.
        signals: Extra columns: name -> callable returning a number or a 1-D array.
        env_ids: The environment copies to record.
        fields: Which body fields: any of ``"pose"``, ``"velocity"``.
        runner: The runner whose steps are recorded (default ``"Capture"``).
        phase: The phase (default ``ACQUISITION``: the state before the controller acts).
        priority: Order inside the phase.
        flush_every: Rows buffered at most before they are written (an int >= 1).
        flush_interval_s: Wall seconds a buffered row waits at most (> 0).

    Example:
        >>> import kelab as ke, tempfile, os
        >>> timeline = ke.Timeline()
        >>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
        >>> rec = ke.DataRecorder(path, bodies=(), signals={"t2": lambda: timeline.time_s * 2})
        >>> _ = rec.attach(timeline)
        >>> _ = timeline.advance(0.1)   # Capture (30 Hz) fires at 0, 33, 67, 100 ms
        >>> rec.close(); rec.rows
        4
    """

    suffixes = (".csv", ".npz")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        bodies: Sequence[str] | None = None,
        sensors: Sequence[str] = (),
        signals: Mapping[str, Callable[[], Any]] | None = None,
        env_ids: Sequence[int] = (0,),
        fields: Sequence[str] = ("pose", "velocity"),
        runner: str = "Capture",
        phase: Phase | str = Phase.ACQUISITION,
        priority: int = 0,
        flush_every: int = 16,
        flush_interval_s: float = 0.5,
    ) -> None:
        bad = [f for f in fields if f not in ("pose", "velocity")]
        if bad or not isinstance(fields, (tuple, list)):
            raise ValueError(
                f"DataRecorder.fields must be a subset of ('pose', 'velocity'), got {fields!r}"
            )
        ids = check_copy_indices(env_ids, "DataRecorder.env_ids", distinct=True)
        check_int(flush_every, "DataRecorder.flush_every", low=1)
        check_number(
            flush_interval_s,
            "DataRecorder.flush_interval_s",
            low=0.0,
            low_open=True,
            unit="seconds",
        )
        if isinstance(sensors, (str, bytes)) or not all(isinstance(x, str) for x in sensors):
            raise ValueError(
                f"DataRecorder.sensors must be a sequence of sensor names, got {sensors!r}"
            )
        super().__init__(path, runner=runner, phase=phase, priority=priority)
        self.bodies = None if bodies is None else tuple(bodies)
        self.sensors = tuple(sensors)
        self.signals = dict(signals or {})
        for name, fn in self.signals.items():
            if not callable(fn):
                raise ValueError(f"DataRecorder.signals[{name!r}] must be callable, got {fn!r}")
        self.env_ids = ids
        self.fields = tuple(fields)
        self.flush_every = flush_every
        self.flush_interval_s = float(flush_interval_s)
        self.rows = 0
        self._world: World | None = None
        self._body_idx = np.zeros(0, dtype=np.intp)
        self._columns: list[str] | None = None
        self._pending: list[np.ndarray] = []
        self._last_flush = time.monotonic()
        self._file: Any = None
        self._csv = self.path.suffix.lower() == ".csv"
        self._branch: int | None = None
        self._branch_column = False

    @property
    def branch(self) -> int | None:
        """The ``branch`` column's value for the rows that follow (None: no such column).

        The App sets it (0 when the recorder is added, then the time-travel branch after
        each rewind that branched, docs/app.md "Time travel"). Settable to an int >= 0;
        the column exists only when it was set before the first row.

        Raises:
            ValueError: Not an int >= 0, or None after the column was written.
        """
        return self._branch

    @branch.setter
    def branch(self, value: int | None) -> None:
        if value is None and self._branch_column:
            raise ValueError(
                must("DataRecorder.branch", "an int >= 0 once rows have a branch column", value)
            )
        if value is not None:
            value = check_int(value, "DataRecorder.branch", low=0)
        self._branch = value

    @property
    def columns(self) -> list[str]:
        """Column names (known after the first row)."""
        return list(self._columns or [])

    def _prepare(self, world: World | None, frame_source: FrameSource | None) -> None:
        body_names: tuple[str, ...] = tuple(world.body_names) if world is not None else ()
        wanted = body_names if self.bodies is None else self.bodies
        if (wanted or self.sensors) and world is None:
            raise ValueError(
                "DataRecorder records bodies or sensors but no World was given; pass "
                "bodies=() and sensors=() to record signals only, or attach with world="
            )
        index = {name: i for i, name in enumerate(body_names)}
        missing = [b for b in wanted if b not in index]
        if missing:
            raise ValueError(
                f"DataRecorder: unknown bodies {missing}; the World's bodies are {list(body_names)}"
            )
        if self.sensors:
            known = [spec.name for spec in world.scene.sensors]
            unknown = [name for name in self.sensors if name not in known]
            if unknown:
                raise ValueError(
                    f"DataRecorder.sensors: unknown sensors {unknown}; the World's sensors are "
                    f"{known}"
                )
        if world is not None and int(self.env_ids.max()) >= int(world.num_envs):
            raise ValueError(
                f"DataRecorder.env_ids {self.env_ids.tolist()} must be < num_envs {world.num_envs}"
            )
        self._world = world
        self._body_names = tuple(wanted)
        self._body_idx = np.array([index[b] for b in wanted], dtype=np.intp)
        self._file = open_partial(self.partial_path, "DataRecorder", text=self._csv)
        if not self._csv:
            self._file.write(SPOOL_MAGIC)
            self._file.flush()
        self._last_flush = time.monotonic()

    def _make_columns(self, sensor_widths: list[int], signal_widths: list[int]) -> list[str]:
        self._branch_column = self._branch is not None
        cols = ["time", "step"] + (["branch"] if self._branch_column else [])
        many = self.env_ids.size > 1
        for e in self.env_ids.tolist():
            pre = f"env{e}:" if many else ""
            for b in self._body_names:
                if "pose" in self.fields:
                    cols += [f"{pre}{b}.x", f"{pre}{b}.y", f"{pre}{b}.angle"]
                if "velocity" in self.fields:
                    cols += [f"{pre}{b}.vx", f"{pre}{b}.vy", f"{pre}{b}.omega"]
            for name, width in zip(self.sensors, sensor_widths, strict=True):
                cols += [f"{pre}{name}[{k}]" for k in range(width)]
        for name, width in zip(self.signals, signal_widths, strict=True):
            cols += [name] if width == 0 else [f"{name}[{k}]" for k in range(width)]
        return cols

    @staticmethod
    def _signal(name: str, fn: Callable[[], Any]) -> np.ndarray:
        value = fn()
        try:
            out = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            out = None
        missing = value is None
        if out is not None and not missing and out.dtype != np.asarray(value).dtype:
            missing = any(v is None for v in np.asarray(value, dtype=object).reshape(-1))
        if out is None or missing or out.ndim > 1 or isinstance(value, (str, bytes)):
            fix = (
                "return float('nan') where there is no value (None is not taken as missing)"
                if missing
                else "return a float, or a 1-D array of the same size every step"
            )
            raise ValueError(
                f"DataRecorder.signals[{name!r}] must return a real number or a 1-D array "
                f"of them, got {value!r:.80}; {fix}"
            )
        return out

    def _write_header(self, columns: list[str]) -> None:
        self._columns = columns
        if self._csv:
            self._file.write(",".join(columns) + "\n")
        else:
            line = json.dumps({"columns": columns, "dtype": "<f8"}).encode("utf-8") + b"\n"
            self._file.write(line)

    def record(self, ts: float) -> None:
        """Append one row: the current time, states, sensor readings and signals."""
        if self._closed or self._file is None:
            return
        w, ids = self._world, self.env_ids
        n_e = ids.size
        blocks: list[np.ndarray] = []
        if self._body_idx.size:
            if "pose" in self.fields:
                blocks.append(np.asarray(w.body_poses)[ids][:, self._body_idx])
            if "velocity" in self.fields:
                blocks.append(np.asarray(w.body_velocities)[ids][:, self._body_idx])
        per_env = np.concatenate(blocks, axis=2).reshape(n_e, -1) if blocks else np.zeros((n_e, 0))
        sensor_vals = [np.asarray(w.read_sensor(s), dtype=np.float64)[ids] for s in self.sensors]
        per_env = np.concatenate([per_env, *sensor_vals], axis=1) if sensor_vals else per_env
        signal_vals = [self._signal(name, fn) for name, fn in self.signals.items()]
        if self._columns is None:
            self._write_header(
                self._make_columns(
                    [v.shape[1] for v in sensor_vals],
                    [v.size if v.ndim else 0 for v in signal_vals],
                )
            )
        assert self._columns is not None
        timeline = self._timeline
        now = timeline.time_s if timeline is not None else 0.0
        head = [now, float(self.rows)]
        if self._branch_column:
            head.append(float(self._branch or 0))
        parts = [np.array(head), per_env.reshape(-1)]
        parts += [v.reshape(-1) for v in signal_vals]
        row = np.concatenate(parts)
        if row.size != len(self._columns):
            raise ValueError(
                f"DataRecorder: a row has {row.size} values but there are "
                f"{len(self._columns)} columns; signals must keep their size"
            )
        self.rows += 1
        self._pending.append(row)
        if (
            len(self._pending) >= self.flush_every
            or time.monotonic() - self._last_flush >= self.flush_interval_s
        ):
            self.flush()

    def _write_rows(self) -> None:
        if self._file is not None:
            write_rows(self._file, self._pending, self._csv)

    def flush(self) -> None:
        """Hand buffered rows to the operating system now (they survive a process kill)."""
        self._write_rows()
        if self._file is not None:
            self._file.flush()
        self._last_flush = time.monotonic()

    def _finish(self) -> None:
        if self._file is None:
            return
        try:
            if self._columns is None:
                self._write_header(self._header_without_data())
            self._write_rows()
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()
            self._file = None
        if self._csv:
            self._publish()
            return
        spool_to_npz(self.partial_path, self.path)
        os.unlink(self.partial_path)

    def _header_without_data(self) -> list[str]:
        """Columns when no row was recorded: sensor widths and signal sizes are unknown."""
        widths = []
        for s in self.sensors:
            widths.append(int(np.asarray(self._world.read_sensor(s)).shape[1]))
        return self._make_columns(widths, [0] * len(self.signals))


class VideoRecorder(Recorder):
    """Records frames to an ``.mp4`` (H.264 via imageio-ffmpeg) or ``.gif`` file.

    On each step of its runner it asks its frame source (the App: the last drawn frame)
    for a frame and appends it; steps before the first frame are skipped. The video plays
    at the runner's rate, so it runs in simulated time whatever the frame rate was.
    Frames with an odd width or height are padded by one black pixel (H.264 needs even
    sizes).

    A ``.gif`` is streamed frame by frame to ``<path>.partial`` (a valid GIF after every
    frame; a kill loses at most the frame being written) and renamed to ``path`` by
    `close`. GIF delays are whole centiseconds: each frame gets the delay that keeps the
    running total within half a centisecond of exact, so 30 fps alternates 3 and 4 cs
    (3, 4, 3, ...) and every 3 frames last exactly 100 ms. Above 50 fps some delays fall
    below 2 cs, which many viewers stretch to 10 cs. An ``.mp4`` is encoded by ffmpeg
    directly into ``path``.

    Args:
        path: ``*.mp4`` or ``*.gif``.
        fps: Playback rate; None uses the runner's rate.
        every: Record one frame every ``every`` runner steps (>= 1).
        runner: The runner (default ``"Capture"``, 30 Hz).
        phase: The phase (default ``ACQUISITION``).
        priority: Order inside the phase.
        quality: mp4 quality 0..10 (imageio-ffmpeg's scale).
    """

    suffixes = (".mp4", ".gif")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fps: float | None = None,
        every: int = 1,
        runner: str = "Capture",
        phase: Phase | str = Phase.ACQUISITION,
        priority: int = 0,
        quality: float = 7.0,
    ) -> None:
        if fps is not None:
            check_number(
                fps, "VideoRecorder.fps", low=0.0, high=1000.0, low_open=True, fix="or pass None"
            )
        check_int(every, "VideoRecorder.every", low=1)
        check_number(quality, "VideoRecorder.quality", low=0.0, high=10.0)
        super().__init__(path, runner=runner, phase=phase, priority=priority)
        self.fps = fps
        self.every = every
        self.quality = float(quality)
        self.frames = 0
        self._calls = 0
        self._source: FrameSource | None = None
        self._writer: Any = None
        self._size: tuple[int, int] | None = None
        self._gif = self.path.suffix.lower() == ".gif"
        self._exact_fps = Fraction(repr(float(fps))) if fps is not None else None

    def _prepare(self, world: World | None, frame_source: FrameSource | None) -> None:
        if frame_source is None:
            raise ValueError("VideoRecorder needs a frame_source (the App passes its frames)")
        self._source = frame_source
        if self.fps is None:
            assert self._timeline is not None
            runner = self._timeline.runner(self.runner)
            self._exact_fps = Fraction(runner.hz) / self.every
            self.fps = runner.hz_float / self.every

    def _open(self, frame: np.ndarray) -> None:
        h, w = frame.shape[:2]
        self._size = (w + (w % 2), h + (h % 2))
        fps = self._exact_fps if self._exact_fps is not None else Fraction(30)
        if self._gif:
            self._writer = GifStream(self.partial_path, self._size, fps)
            return
        import imageio.v2 as imageio

        # ffmpeg opens the path itself: make it a regular file of ours first, refusing a
        # symbolic link there (its target is never written), as the streamed files do
        open_partial(self.path, "VideoRecorder").close()
        self._writer = imageio.get_writer(
            self.path,
            fps=float(fps),
            codec="libx264",
            quality=self.quality,
            macro_block_size=1,
            pixelformat="yuv420p",
            ffmpeg_log_level="error",
        )

    def record(self, ts: float) -> None:
        """Append the source's latest frame (every ``every``-th call)."""
        if self._closed or self._source is None:
            return
        self._calls += 1
        if (self._calls - 1) % self.every:
            return
        frame = self._source()
        if frame is None:
            return
        frame = np.asarray(frame)
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(
                f"VideoRecorder frames must be (H, W, 3) uint8, got {frame.shape} {frame.dtype}"
            )
        if self._writer is None:
            self._open(frame)
        assert self._size is not None
        w, h = self._size
        if frame.shape[:2] != (h, w):
            padded = np.zeros((h, w, 3), dtype=np.uint8)
            fh, fw = min(h, frame.shape[0]), min(w, frame.shape[1])
            padded[:fh, :fw] = frame[:fh, :fw]
            frame = padded
        if self._gif:
            self._writer.append(np.ascontiguousarray(frame))
        else:
            self._writer.append_data(frame)
        self.frames += 1

    def _finish(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()
            if self._gif:
                self._publish()
