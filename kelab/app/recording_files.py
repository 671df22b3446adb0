"""The files recorders write: destination checks, the row spool, GIF streaming, reading.

Used by `kelab.app.recorders`; `load_recording` is re-exported there. See
docs/recorders.md.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from kelab._files import atomic_file, fsync_dir, open_nofollow

__all__ = [
    "SPOOL_MAGIC",
    "GifStream",
    "Recording",
    "check_destination",
    "fsync_dir",
    "load_partial",
    "load_recording",
    "open_partial",
    "partial_path",
    "spool_to_npz",
]

#: First line of an ``.npz`` recording's row spool (``<path>.partial``).
SPOOL_MAGIC = b"KELAB-ROWS 1\n"
_MAX_SPOOL_HEADER = 1 << 20  # bytes of column names a spool header may hold
_COPY_CHUNK = 1 << 22  # bytes copied at a time when a spool becomes an .npz


def partial_path(path: str | os.PathLike[str]) -> Path:
    """Return the file a recording of ``path`` streams into until it is closed."""
    p = Path(path)
    return p.with_name(p.name + ".partial")


def open_partial(path: Path, owner: str, text: bool = False) -> Any:
    """Open the stream file ``path`` new (or emptied), never through a symbolic link.

    Args:
        path: The ``<path>.partial`` a recording streams into.
        owner: Who opens it, for the message (``"DataRecorder"``).
        text: Open as UTF-8 text for CSV rows (else binary, unbuffered for a GIF).

    Raises:
        ValueError: When ``path`` is a symbolic link (its target is never written).
    """
    try:
        fd = open_nofollow(path, append=False, truncate=True)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise ValueError(
            f"{owner}: {str(path)!r} must not be a symbolic link, got one (to "
            f"{os.readlink(path)!r}); remove it: a recording never writes through a link"
        ) from None
    if text:
        return os.fdopen(fd, "w", encoding="utf-8", newline="")
    return os.fdopen(fd, "wb", buffering=0)


def write_rows(file: Any, pending: list[np.ndarray], csv: bool) -> None:
    """Append buffered rows to a streamed ``.partial`` file and empty ``pending``.

    Args:
        file: The open stream (text for CSV, binary for the ``.npz`` spool).
        pending: The rows (1-D float arrays of one width) not written yet.
        csv: CSV text rows (``%.17g``, exact round trip), else little-endian float64.
    """
    if not pending:
        return
    block = np.vstack(pending)
    if csv:
        np.savetxt(file, block, fmt="%.17g", delimiter=",")
    else:
        file.write(np.ascontiguousarray(block, dtype="<f8").tobytes())
    pending.clear()


def check_destination(path: Path, owner: str) -> None:
    """Make the parent directory and prove it takes files; refuse a directory as path."""
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        file = next((p for p in (parent, *parent.parents) if p.exists() and not p.is_dir()), None)
        if file is not None:
            why = f"{str(file)!r} is a file, not a directory"
        else:
            base = next((p for p in parent.parents if p.is_dir()), parent)
            why = _why_no_files(str(base), exc)
        raise ValueError(
            f"{owner}: cannot create the directory {str(parent)!r} for {str(path)!r}: "
            f"{why}; choose a path in a writable directory"
        ) from None
    if path.is_dir():
        raise ValueError(f"{owner}: path {str(path)!r} is a directory; give a file name")
    try:
        fd, probe = tempfile.mkstemp(prefix=".kelab-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(
            f"{owner}: path {str(path)!r} must be in a directory that takes new files, but "
            f"{_why_no_files(str(parent), exc)}; choose a path in a writable directory "
            "before recording"
        ) from None


def _why_no_files(parent: str, exc: OSError) -> str:
    """What is wrong with an existing directory a file could not be created in."""
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        return f"you may not create files in {parent!r} (permission denied)"
    if code == errno.EROFS:
        return f"{parent!r} is on a read-only file system"
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return f"the disk (or your quota) holding {parent!r} is full"
    if code == errno.ENOENT:  # the directory exists: it is not an ordinary one
        return (
            f"{parent!r} takes no files (a special file system, such as /proc or /sys; "
            "creating one there reports 'No such file or directory')"
        )
    return f"creating a file in {parent!r} failed ({exc.strerror or exc})"


@dataclass(frozen=True)
class Recording:
    """A data recording read back by `load_recording`.

    Attributes:
        columns: The column names (``time``, ``step``, then the recorded values).
        data: float64 ``(rows, len(columns))``.
        complete: True for a closed recording (``path``); False for what a recorder that
            never closed (a crash, a SIGKILL) left in ``<path>.partial``.
    """

    columns: tuple[str, ...]
    data: np.ndarray
    complete: bool

    @property
    def time(self) -> np.ndarray:
        """The ``time`` column (seconds)."""
        return self.data[:, 0]

    @property
    def step(self) -> np.ndarray:
        """The ``step`` column as int64."""
        return self.data[:, 1].astype(np.int64)

    def column(self, name: str) -> np.ndarray:
        """Return one column by name.

        Raises:
            KeyError: For a name that is not a column (the message lists them).
        """
        if name not in self.columns:
            raise KeyError(f"no column {name!r}; the columns are {list(self.columns)}")
        return self.data[:, self.columns.index(name)]


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a `DataRecorder` or `LidarRecorder` file: the closed ``path``, else its ``.partial``.

    A ``.partial`` file is what a recorder that never closed left behind: every row
    flushed before the process died, an incomplete last row or line dropped. Nothing is
    unpickled. A closed `LidarRecorder` ``.npz`` reads as the columns ``time``, ``step``,
    then one per beam (``env<i>:<beam>`` with several copies), as its spool did.

    Args:
        path: The recorder's ``*.csv`` or ``*.npz`` path.

    Returns:
        The recording (``complete`` says which file was read).

    Raises:
        FileNotFoundError: When neither file exists.
        ValueError: For a file that is not a recording (naming what is wrong).
    """
    final = Path(path)
    _check_suffix(final)
    if final.exists():
        return _read(final, complete=True)
    source = partial_path(final)
    if not source.exists():
        raise FileNotFoundError(f"load_recording: neither {str(final)!r} nor {str(source)!r} exist")
    return _read(source, complete=False, suffix=final.suffix.lower())


def load_partial(path: str | os.PathLike[str]) -> Recording:
    """Read only ``<path>.partial``, the file a recorder streams into until it closes.

    Args:
        path: The recorder's ``*.csv`` or ``*.npz`` path (not the ``.partial`` one).

    Raises:
        FileNotFoundError: When there is no ``.partial`` file.
        ValueError: For a file that is not a recording.
    """
    final = Path(path)
    _check_suffix(final)
    return _read(partial_path(final), complete=False, suffix=final.suffix.lower())


def _check_suffix(final: Path) -> None:
    if final.suffix.lower() not in (".csv", ".npz"):
        raise ValueError(
            f"load_recording: path must end in .csv or .npz, got {str(final)!r}; give the "
            "recorder's path"
        )


def _read(source: Path, complete: bool, suffix: str | None = None) -> Recording:
    suffix = suffix or source.suffix.lower()
    if suffix == ".csv":
        return _read_csv(source, complete)
    if complete:
        with np.load(source, allow_pickle=False) as z:
            if "ranges" in z and "beams" in z and "time" in z and "step" in z:  # LidarRecorder
                return _lidar_npz(z, source)
            if "columns" not in z or "data" not in z:
                raise ValueError(f"load_recording: {str(source)!r} has no columns/data arrays")
            columns = tuple(str(c) for c in z["columns"])
            data = np.asarray(z["data"], dtype=np.float64)
        return Recording(columns, data.reshape(-1, len(columns)), True)
    with open(source, "rb") as fh:
        columns, _ = _read_spool_header(fh, source)
        raw = fh.read()
    width = 8 * len(columns)
    rows = len(raw) // width if width else 0
    data = np.frombuffer(raw[: rows * width], dtype="<f8").astype(np.float64)
    return Recording(columns, data.reshape(rows, len(columns)), False)


def _lidar_npz(z: Mapping[str, np.ndarray], source: Path) -> Recording:
    """A closed LidarRecorder file as the columns its spool had."""
    beams = [str(b) for b in z["beams"]]
    ranges = np.asarray(z["ranges"], dtype=np.float64)
    env_ids = [int(e) for e in z["env_ids"]] if "env_ids" in z else [0]
    if ranges.ndim != 3 or ranges.shape[1:] != (len(env_ids), len(beams)):
        raise ValueError(
            f"load_recording: {str(source)!r} ranges must have shape (scans, {len(env_ids)}, "
            f"{len(beams)}), got {ranges.shape}"
        )
    many = len(env_ids) > 1
    columns = ("time", "step", *(f"env{e}:{b}" if many else b for e in env_ids for b in beams))
    n = ranges.shape[0]
    data = np.column_stack(
        [
            np.asarray(z["time"], np.float64),
            np.asarray(z["step"], np.float64),
            ranges.reshape(n, -1),
        ]
    )
    return Recording(columns, data.reshape(n, len(columns)), True)


def _read_csv(source: Path, complete: bool) -> Recording:
    text = source.read_text(encoding="utf-8")
    lines = text.split("\n")
    if len(lines) < 2:  # not even a whole header line
        raise ValueError(f"load_recording: {str(source)!r} has no header line")
    columns = tuple(lines[0].split(","))
    body = lines[1:-1]  # the last piece has no newline: empty, or a row cut by a kill
    if body:
        data = np.loadtxt(body, delimiter=",", dtype=np.float64, ndmin=2)
    else:
        data = np.zeros((0, len(columns)))
    if data.shape[1] != len(columns):
        raise ValueError(
            f"load_recording: {str(source)!r} has {data.shape[1]} values per row but "
            f"{len(columns)} columns"
        )
    return Recording(columns, data, complete)


def _read_spool_header(fh: BinaryIO, source: Path) -> tuple[tuple[str, ...], int]:
    magic = fh.read(len(SPOOL_MAGIC))
    if magic != SPOOL_MAGIC:
        raise ValueError(f"load_recording: {str(source)!r} is not a KELab row spool")
    line = fh.readline(_MAX_SPOOL_HEADER)
    if not line.endswith(b"\n"):  # killed before the first row, or not a spool
        return (), fh.tell()
    try:
        header = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"load_recording: {str(source)!r} has a broken header: {exc}") from None
    columns = header.get("columns") if isinstance(header, dict) else None
    if (
        not isinstance(columns, list)
        or not all(isinstance(c, str) for c in columns)
        or header.get("dtype") != "<f8"
    ):
        raise ValueError(
            f"load_recording: {str(source)!r} header must hold a list of column names and "
            f"dtype '<f8', got {header!r:.200}"
        )
    return tuple(columns), fh.tell()


def spool_to_npz(spool: Path, path: Path) -> None:
    """Stream a closed row spool into ``path`` (.npz, atomically), in flat memory."""
    with open(spool, "rb") as fh:
        columns, start = _read_spool_header(fh, spool)
        fh.seek(0, os.SEEK_END)
        width = 8 * len(columns)
        rows = (fh.tell() - start) // width if width else 0

        def chunks(take: Callable[[np.ndarray], np.ndarray]) -> Iterator[bytes]:
            fh.seek(start)
            per = max(1, _COPY_CHUNK // max(width, 1))
            left = rows
            while left > 0:
                n = min(per, left)
                block = np.frombuffer(fh.read(n * width), dtype="<f8").reshape(n, -1)
                yield np.ascontiguousarray(take(block)).tobytes()
                left -= n

        with atomic_file(path) as out:
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                names = np.array(columns, dtype=str)
                with zf.open("columns.npy", "w") as entry:
                    np.lib.format.write_array(entry, names, allow_pickle=False)
                arrays: list[tuple[str, str, tuple[int, ...], Callable]] = [
                    ("data", "<f8", (rows, len(columns)), lambda b: b),
                    ("time", "<f8", (rows,), lambda b: b[:, 0]),
                    ("step", "<i8", (rows,), lambda b: b[:, 1].astype("<i8")),
                ]
                for name, descr, shape, take in arrays:
                    if name != "data" and not columns:
                        shape = (0,)
                    with zf.open(f"{name}.npy", "w", force_zip64=True) as entry:
                        header = {"descr": descr, "fortran_order": False, "shape": shape}
                        np.lib.format.write_array_header_2_0(entry, header)
                        if columns:
                            for part in chunks(take):
                                entry.write(part)


class GifStream:
    """Appends frames to a GIF file one at a time; the file is a valid GIF after each.

    Each frame's changed rectangle (the whole first frame) is quantised and LZW-coded by
    Pillow (as a one-frame GIF in memory), then its palette, image descriptor (placed at
    the rectangle) and data are appended here with a graphic control block carrying the
    frame's delay and "keep the previous frame", followed by the trailer, which the next
    frame overwrites. Memory: one previous frame.
    """

    def __init__(self, path: Path, size: tuple[int, int], fps: Fraction) -> None:
        self._fh: BinaryIO = open_partial(path, "VideoRecorder")
        self._ticks_per_frame = Fraction(100) / fps  # GIF delays are centiseconds
        self.frames = 0
        self._previous: np.ndarray | None = None
        w, h = size
        head = b"GIF89a" + w.to_bytes(2, "little") + h.to_bytes(2, "little") + b"\x00\x00\x00"
        loop = b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"  # loop forever
        self._fh.write(head + loop + b"\x3b")
        self._fh.seek(-1, os.SEEK_END)

    def delay_cs(self, k: int) -> int:
        """Return the centiseconds shown for frame ``k`` (3, 4, 3, 3, 4, 3... at 30 fps).

        Whole centiseconds whose running sum stays within half a centisecond of exact.
        """
        t = self._ticks_per_frame
        return math.floor((k + 1) * t + Fraction(1, 2)) - math.floor(k * t + Fraction(1, 2))

    def append(self, frame: np.ndarray) -> None:
        """Append one ``(H, W, 3)`` uint8 frame of the stream's size."""
        from PIL import Image

        left = top = 0
        patch = frame
        prev = self._previous
        if prev is not None:  # only the rectangle that changed (frames are kept, not cleared)
            changed = np.any(frame != prev, axis=2)
            rows = np.flatnonzero(changed.any(axis=1))
            cols = np.flatnonzero(changed.any(axis=0))
            if rows.size:
                top, left = int(rows[0]), int(cols[0])
                patch = frame[top : rows[-1] + 1, left : cols[-1] + 1]
            else:  # nothing changed: one unchanged pixel carries the delay
                patch = frame[:1, :1]
        self._previous = frame.copy()
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(patch), "RGB").save(buf, format="GIF")
        gif = buf.getvalue()
        packed = gif[10]
        pos = 13
        table = b""
        if packed & 0x80:  # the global palette becomes this frame's local palette
            table = gif[pos : pos + 3 * (2 << (packed & 7))]
            pos += len(table)
        while gif[pos] == 0x21:  # skip any extension Pillow wrote
            pos += 2
            while gif[pos]:
                pos += gif[pos] + 1
            pos += 1
        if gif[pos] != 0x2C:
            raise RuntimeError("VideoRecorder: Pillow wrote an unexpected GIF layout")
        descriptor = bytearray(gif[pos : pos + 10])
        descriptor[1:5] = left.to_bytes(2, "little") + top.to_bytes(2, "little")
        pos += 10
        if table:
            descriptor[9] = (descriptor[9] & 0x40) | 0x80 | (packed & 7)
        end = len(gif) - 1 if gif[-1] == 0x3B else len(gif)
        delay = self.delay_cs(self.frames).to_bytes(2, "little")
        control = b"\x21\xf9\x04\x04" + delay + b"\x00\x00"  # disposal: keep
        # one write: a kill leaves at most this frame incomplete
        self._fh.write(control + bytes(descriptor) + table + gif[pos:end] + b"\x3b")
        self._fh.seek(-1, os.SEEK_END)
        self.frames += 1

    def close(self) -> None:
        """Flush the file to disk and close it (it already ends with the trailer)."""
        os.fsync(self._fh.fileno())
        self._fh.close()
