"""What travels between a RayLearningEnv and its workers, and the same-machine fast path.

A ``RayLearningEnv`` step sends each worker its rows of the actions and gets back its
observations, rewards and flags (a :class:`StepReply`) plus the rows of the copies that
ended (an :class:`EndedRows`, :func:`compact_ends`); the driver joins them into the
`~kelab.rl.episode_ends.EpisodeEnds` one ``LearningEnv`` would have, and so into its
info, as the replies arrive (:class:`EndsJoin`). Through Ray, every such call costs ~1.5
ms of Ray's own work in the worker and more in the driver (benchmarks/README.md,
"scale_throughput"), as much as stepping ~100 Humanoid copies. For workers on the
driver's machine a step instead goes through a :class:`StepChannel` (Linux): the
per-step arrays live in shared memory both processes map, and one Unix-socket message
each way says "step" and "done" (carrying the ended rows, encoded without pickle by
:func:`pack_ends` and decoded into an :class:`EndedRows` by :func:`unpack_ends`). Ray
still starts, places, restarts and kills the workers and carries everything else (reset,
snapshots, errors).
"""

from __future__ import annotations

import functools
import json
import math
import mmap
import os
import secrets
import select
import socket
import struct
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from kelab.rl.episode_ends import EpisodeCounters, EpisodeEnds, vector_info
from kelab.rl.randomization import EpisodeDraws

__all__ = [
    "ChannelClosedError",
    "EndedRows",
    "EndsJoin",
    "StepChannel",
    "StepReply",
    "channel_supported",
    "WorkerChannel",
    "compact_ends",
    "expand_ends",
    "pack_ends",
    "unpack_ends",
]

STEP, QUIT = b"S", b"Q"  # the driver's commands (one byte each)
OK, FAILED = 0, 1  # a reply's status: the step's results, or the step raised (see serve)
_REPLY = struct.Struct("<BII")  # status, header bytes, array bytes (then the two payloads)
_RECV_SIZE = 1 << 16  # a reply of up to this many bytes is read in one recv


class EndedRows(NamedTuple):
    """The copies of one worker whose episode ended in a step: one row each.

    What a worker's reply carries instead of the full-size info (fewer arrays to ship and
    for the driver to join): :class:`EndsJoin` turns the rows of every worker into the
    `EpisodeEnds` of the whole env. Its wire form is :func:`pack_ends`'s.
    """

    ids: np.ndarray
    """int64: the worker's (local) indices of the copies that ended, ascending."""
    final_obs: np.ndarray
    """float32 ``(rows, observation_dim)``: their observations on the final step."""
    ended_by: tuple[str, ...]
    """Why each ended: a condition name, ``"time limit"`` or ``"cut short by the task"``."""
    counters: EpisodeCounters
    """Their returns, lengths and wall seconds (the float32 the info holds)."""
    names: tuple[str, ...]
    """The task's condition names in ``get_dones()`` order."""
    is_success: np.ndarray | None = None
    """bool ``(rows,)``: the success rule's verdict (None without a rule)."""
    checks: dict[str, np.ndarray] | None = None
    """The rule's named checks, bool ``(rows,)`` each (None without a rule)."""
    randomization: EpisodeDraws | None = None
    """The values their episodes ran with, a column per row (the task's domain
    randomization; None where it declares none)."""


class StepReply(NamedTuple):
    """One worker's part of a step: its copies' arrays and the rows of those that ended."""

    obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    ends: EndedRows | None
    """:func:`compact_ends` of the step (None when no copy ended)."""


class ChannelClosedError(ConnectionError):
    """The other end of a :class:`StepChannel` closed (its process ended or died)."""


# ---------------------------------------------------------------------- the ended rows
def compact_ends(info: Mapping[str, Any], names: Sequence[str]) -> EndedRows | None:
    """The rows of a ``LearningEnv`` step info that :class:`EndsJoin` needs (None if empty).

    A worker's reply carries only the copies that ended (their ids, final observations,
    labels, returns, lengths, wall times, success and checks, the values their domain
    randomization drew), not the full-size info.
    ``info["episode"]["t"]`` travels as the float32 the info holds (wall-clock time,
    never identical anyway).

    Args:
        info: What ``LearningEnv.step`` returned as ``info``.
        names: The env's ``condition_names``.

    Returns:
        None when no copy ended, else one row per ended copy.
    """
    if not info:
        return None
    ids = np.flatnonzero(info["_ended_by"])
    is_success = checks = drawn = None
    if "is_success" in info:
        is_success = info["is_success"][ids]
        masked = info["checks"]  # vector_info writes each name, then its "_name" mask
        checks = {name: masked[name][ids] for name in list(masked)[::2]}
    if "randomization" in info:
        values = info["randomization"]
        labels = tuple(values)
        table = np.empty((len(labels), ids.size))
        for row, label in zip(table, labels, strict=True):
            row[:] = values[label][ids]
        drawn = EpisodeDraws(labels, table)
    return EndedRows(
        ids=ids,
        final_obs=info["final_obs"][ids],
        ended_by=tuple(info["ended_by"][ids].tolist()),
        counters=EpisodeCounters(
            info["episode_return"][ids], info["episode_length"][ids], info["episode"]["t"][ids]
        ),
        names=tuple(names),
        is_success=is_success,
        checks=checks,
        randomization=drawn,
    )


class EndsJoin:
    """Joins one step's :class:`EndedRows` into the `EpisodeEnds` of one ``LearningEnv``.

    ``add`` each worker's rows as its reply arrives (the driver joins the first replies
    while the slower workers still step), then :meth:`ends` or :meth:`info`. The rows go
    straight into full-size arrays that already hold the zeros, False and None of the
    copies that did not end; :meth:`info` is ``vector_info`` of that record, so the same
    keys, dtypes and values as one ``LearningEnv`` (tests/rl/test_ray_env.py compares
    them).

    Args:
        num_envs: Copies in all.
        obs_dim: Observation size.
    """

    def __init__(self, num_envs: int, obs_dim: int) -> None:
        self.num_envs, self.obs_dim = num_envs, obs_dim
        self._mask: np.ndarray | None = None  # the arrays exist once a part has rows
        self._names: tuple[str, ...] = ()

    def add(self, first_copy: int, rows: EndedRows) -> None:
        """Add one worker's ended rows (its copy ``j`` is copy ``first_copy + j``)."""
        ids = rows.ids + first_copy if first_copy else rows.ids
        if self._mask is None:
            n = self.num_envs
            self._mask = np.zeros(n, dtype=bool)
            self._final_obs = np.zeros((n, self.obs_dim), dtype=rows.final_obs.dtype)
            self._returns = np.zeros(n, dtype=np.float64)
            self._lengths = np.zeros(n, dtype=np.int64)
            self._wall = np.zeros(n, dtype=np.float64)
            self._ended_by = np.empty(n, dtype=object)  # None everywhere
            self._success = np.zeros(n, dtype=bool) if rows.is_success is not None else None
            self._checks: dict[str, np.ndarray] = {}
            drawn = rows.randomization
            self._drawn = None if drawn is None else np.zeros((len(drawn.labels), n))
            self._labels = () if drawn is None else drawn.labels
        self._names = self._names or rows.names
        self._mask[ids] = True
        self._final_obs[ids] = rows.final_obs
        self._returns[ids], self._lengths[ids], self._wall[ids] = rows.counters
        self._ended_by[ids] = list(rows.ended_by)
        if self._success is not None:
            self._success[ids] = rows.is_success
            for name, value in (rows.checks or {}).items():
                full = self._checks.get(name)
                if full is None:
                    full = self._checks[name] = np.zeros(self.num_envs, dtype=bool)
                full[ids] = value
        if self._drawn is not None and rows.randomization is not None:
            self._drawn[:, ids] = rows.randomization.table

    def ends(self) -> EpisodeEnds | None:
        """The step's `EpisodeEnds` over every copy (None when no part had rows)."""
        mask = self._mask
        if mask is None:
            return None
        return EpisodeEnds(
            ids=np.flatnonzero(mask),
            mask=mask,
            final_obs=self._final_obs,
            ended_by=self._ended_by,
            counters=EpisodeCounters(self._returns, self._lengths, self._wall),
            names=self._names,
            is_success=self._success,
            checks=None if self._success is None else self._checks,
            randomization=None if self._drawn is None else EpisodeDraws(self._labels, self._drawn),
        )

    def info(self) -> dict[str, Any]:
        """The step's info: ``vector_info`` of :meth:`ends` (``{}`` when nothing ended)."""
        return vector_info(self.ends(), self.num_envs)


def expand_ends(
    parts: Sequence[tuple[int, EndedRows]], num_envs: int, obs_dim: int
) -> dict[str, Any]:
    """Join the workers' :func:`compact_ends` into the info ``LearningEnv`` would return.

    Args:
        parts: ``(first copy, compact ends)`` of every worker where a copy ended.
        num_envs: Copies in all.
        obs_dim: Observation size.

    Returns:
        ``vector_info`` of the ended copies (``{}`` for no parts): rows of copies that did
        not end hold zeros, False or None, exactly as in one ``LearningEnv``.
    """
    join = EndsJoin(num_envs, obs_dim)
    for first_copy, ends in parts:
        join.add(first_copy, ends)
    return join.info()


_ROWS = struct.Struct("<II")  # a packed reply's header: ended rows, schema bytes
_PAD = [bytes(8 - n) for n in range(8)]  # zeros that bring n bytes to a multiple of 8


def pack_ends(rows: EndedRows | None) -> tuple[bytes, bytes]:
    """Encode an :class:`EndedRows` without pickle: ``(header, raw array bytes)``.

    The arrays travel as their raw bytes one after the other (each padded to 8 bytes);
    the header holds the row count, the layout (JSON: the condition names and each
    array's field, check name, dtype and row shape; the same every step, so the reader
    parses it once) and the labels (``ended_by``, NUL-separated). ``(b"", b"")`` for None
    (nothing ended).
    """
    if rows is None:
        return b"", b""
    fields: list[tuple[str, str | None, np.ndarray]] = [
        ("ids", None, rows.ids),
        ("final_obs", None, rows.final_obs),
        *((key, None, value) for key, value in zip(_COUNTERS, rows.counters, strict=True)),
    ]
    if rows.is_success is not None:  # a rule judged: its verdict, then each check
        fields.append(("is_success", None, rows.is_success))
        fields += [("checks", str(name), v) for name, v in (rows.checks or {}).items()]
    drawn = rows.randomization
    if drawn is not None:  # a row per copy, a column per label (the labels: in the layout)
        fields.append(("randomization", None, drawn.table.T))
    layout = []
    chunks: list[bytes] = []
    for key, name, value in fields:
        arr = np.asarray(value)
        layout.append((key, name, arr.dtype.str, arr.shape[1:]))
        chunks.append(arr.tobytes())  # C order, whatever the array's own
        if arr.nbytes & 7:
            chunks.append(_PAD[arr.nbytes & 7])
    labels_drawn = None if drawn is None else tuple(map(str, drawn.labels))
    judged = rows.is_success is not None
    schema = _schema_bytes(tuple(map(str, rows.names)), judged, tuple(layout), labels_drawn)
    labels = "\0".join(map(str, rows.ended_by)).encode()
    header = _ROWS.pack(len(rows.ids), len(schema)) + schema + labels
    return header, b"".join(chunks)


_COUNTERS = EpisodeCounters._fields  # the counters' fields, in order, on the wire


@functools.lru_cache(maxsize=64)
def _schema_bytes(
    names: tuple[str, ...], judged: bool, layout: tuple, drawn: tuple[str, ...] | None
) -> bytes:
    """``pack_ends``'s JSON layout (cached: the same every step of an env)."""
    fields = [[key, name, dtype, list(shape)] for key, name, dtype, shape in layout]
    doc: dict[str, Any] = {"names": list(names), "judged": judged, "fields": fields}
    if drawn is not None:
        doc["drawn"] = list(drawn)
    return json.dumps(doc, separators=(",", ":")).encode()


class _Layout(NamedTuple):
    """A parsed ``pack_ends`` layout."""

    names: tuple[str, ...]
    judged: bool
    fields: tuple[tuple[str, str | None, np.dtype, tuple[int, ...], int], ...]
    """Each array's ``(field, check name, dtype, row shape, items per row)``."""
    drawn: tuple[str, ...] | None
    """The labels of the randomization's columns (None: the task declares none)."""


_KEYS = {"ids", "final_obs", *_COUNTERS, "is_success", "checks", "randomization"}


@functools.lru_cache(maxsize=64)
def _schema(schema: bytes) -> _Layout:
    """Parse a layout (cached).

    Raises:
        ValueError: For an object dtype or an unknown field (never written by
            ``pack_ends``).
    """
    doc = json.loads(schema)
    fields = []
    for key, name, dtype_str, shape in doc["fields"]:
        dtype = np.dtype(dtype_str)
        if dtype.hasobject or key not in _KEYS:
            raise ValueError(
                f"ended rows must hold plain arrays of {sorted(_KEYS)}, got {key!r} of dtype "
                f"{dtype}"
            )
        shape = tuple(shape)
        fields.append((key, name, dtype, shape, math.prod(shape)))
    drawn = doc.get("drawn")
    has = any(key == "randomization" for key, *_ in fields)
    if (drawn is None) == has or (
        has
        and not (
            isinstance(drawn, list)
            and [f[3] for f in fields if f[0] == "randomization"] == [(len(drawn),)]
        )
    ):
        raise ValueError(
            "ended rows' randomization must come with its labels, one column each, got "
            f"labels {drawn!r} and fields {[f[:1] + f[3:4] for f in fields]}"
        )
    labels = None if drawn is None else tuple(map(str, drawn))
    return _Layout(tuple(doc["names"]), bool(doc["judged"]), tuple(fields), labels)


def unpack_ends(header: bytes, blob: bytes | memoryview) -> EndedRows | None:
    """Decode :func:`pack_ends`'s bytes into an :class:`EndedRows` (None if empty).

    Its arrays are read-only views of ``blob``.

    Raises:
        ValueError: For a layout naming an object dtype or an unknown field (never
            written by ``pack_ends``).
    """
    if not header:
        return None
    rows, n_schema = _ROWS.unpack_from(header)
    start = _ROWS.size + n_schema
    layout = _schema(header[_ROWS.size : start])
    arrays: dict[str, np.ndarray] = {}
    checks: dict[str, np.ndarray] = {}
    offset = 0
    for key, name, dtype, shape, per_row in layout.fields:
        count = rows * per_row
        arr = np.frombuffer(blob, dtype, count=count, offset=offset)
        offset += (count * dtype.itemsize + 7) & -8
        if shape:
            arr = arr.reshape((rows, *shape))
        if name is None:
            arrays[key] = arr
        else:
            checks[name] = arr
    return EndedRows(
        ids=arrays["ids"],
        final_obs=arrays["final_obs"],
        ended_by=tuple(header[start:].decode().split("\0")),
        counters=EpisodeCounters(*(arrays[key] for key in _COUNTERS)),
        names=layout.names,
        is_success=arrays["is_success"] if layout.judged else None,
        checks=checks if layout.judged else None,
        randomization=None
        if layout.drawn is None
        else EpisodeDraws(layout.drawn, arrays["randomization"].T),
    )


# ---------------------------------------------------------------------- the channel
class _Arrays:
    """Numpy views of one worker's shared-memory block: its actions in, its results out."""

    def __init__(self, buf: mmap.mmap, rows: int, obs_dim: int, act_dim: int) -> None:
        self.buf = buf
        offset = 0

        def view(dtype: type, shape: tuple[int, ...]) -> np.ndarray:
            nonlocal offset
            arr = np.ndarray(shape, dtype=dtype, buffer=buf, offset=offset)
            offset += -(-arr.nbytes // 64) * 64  # each array on its own cache lines
            return arr

        self.actions = view(np.float32, (rows, act_dim))
        self.obs = view(np.float32, (rows, obs_dim))
        self.rewards = view(np.float32, (rows,))
        self.terminated = view(np.bool_, (rows,))
        self.truncated = view(np.bool_, (rows,))

    @staticmethod
    def nbytes(rows: int, obs_dim: int, act_dim: int) -> int:
        sizes = (rows * act_dim * 4, rows * obs_dim * 4, rows * 4, rows, rows)
        return sum(-(-s // 64) * 64 for s in sizes)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    if n == 0:
        return b""
    data = sock.recv(n)
    if len(data) == n:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        if not data:
            raise ChannelClosedError("the other end closed the channel")
        data = sock.recv(n - got)
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def channel_supported() -> bool:
    """True where :class:`StepChannel` works: Linux (memfd and abstract Unix sockets)."""
    return sys.platform.startswith("linux") and hasattr(os, "memfd_create")


class StepChannel:
    """The driver's end of one worker's same-machine step channel (Linux).

    An anonymous shared-memory file (``memfd``: nothing on disk, gone when both ends
    close it) holds the worker's actions and results; an abstract Unix socket (no file
    either) hands the worker that file when it attaches and then carries one message each
    way per step. The worker's end is :class:`WorkerChannel` (made in the worker's
    process with ``channel.address``).

    Args:
        rows: The worker's copies.
        obs_dim: Observation size.
        act_dim: Action size.
    """

    def __init__(self, rows: int, obs_dim: int, act_dim: int) -> None:
        self.rows, self.obs_dim, self.act_dim = rows, obs_dim, act_dim
        size = _Arrays.nbytes(rows, obs_dim, act_dim)
        self._fd = os.memfd_create("kelab-ray-step", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, size)
        self._mmap = mmap.mmap(self._fd, size)
        self.arrays = _Arrays(self._mmap, rows, obs_dim, act_dim)
        # a leading NUL: Linux's abstract namespace; the random part keeps others out
        self.address = f"\0kelab-ray-{os.getpid()}-{secrets.token_hex(12)}"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.address)
        self._listener.listen(1)
        self._conn: socket.socket | None = None

    @property
    def connected(self) -> bool:
        """A worker is attached (``connect`` succeeded and nothing has failed since)."""
        return self._conn is not None

    def connect(self, gave_up: Callable[[], bool], timeout_s: float) -> bool:
        """Wait for the worker to attach; False when ``gave_up()`` says its serve call ended.

        Raises:
            TimeoutError: No worker attached within ``timeout_s``.
        """
        self.disconnect()
        waited = 0.0
        while waited < timeout_s:
            ready, _, _ = select.select([self._listener], [], [], 0.02)
            if ready:
                conn, _ = self._listener.accept()
                try:  # the shared memory travels as a file descriptor
                    socket.send_fds(conn, [b"M"], [self._fd])
                except OSError:
                    conn.close()
                    continue
                self._conn = conn
                return True
            if gave_up():
                return False
            waited += 0.02
        raise TimeoutError(f"no worker attached to the step channel within {timeout_s} s")

    def send_step(self, actions: np.ndarray) -> None:
        """Write the worker's rows of the actions and tell it to step.

        Raises:
            ChannelClosedError: The worker's end is gone.
        """
        np.copyto(self.arrays.actions, actions)
        try:
            self._conn.sendall(STEP)  # type: ignore[union-attr]
        except OSError as err:
            raise ChannelClosedError(str(err)) from None

    def fileno(self) -> int:
        """The connection's socket (readable once the reply is in); -1 when not connected."""
        return -1 if self._conn is None else self._conn.fileno()

    def receive(self) -> tuple[int, EndedRows | None]:
        """Wait for the worker's reply: ``(OK, ended rows or None)`` or ``(FAILED, None)``.

        On OK the results are in :attr:`arrays` until the next step.

        Raises:
            ChannelClosedError: The worker's end closed (its process died).
        """
        conn = self._conn
        if conn is None:
            raise ChannelClosedError("not connected")
        try:  # the reply comes in one send: one recv reads it whole (unless it is large)
            data = conn.recv(_RECV_SIZE)
            if len(data) < _REPLY.size:
                data += _recv_exact(conn, _REPLY.size - len(data))
            status, n_header, n_blob = _REPLY.unpack_from(data)
            end = _REPLY.size + n_header + n_blob
            if len(data) < end:
                data += _recv_exact(conn, end - len(data))
        except (OSError, struct.error) as err:
            self.disconnect()
            raise ChannelClosedError(str(err) or "the worker closed the channel") from None
        if status != OK:
            self.disconnect()
            return FAILED, None
        view = memoryview(data)
        header = bytes(view[_REPLY.size : _REPLY.size + n_header])
        return OK, unpack_ends(header, view[_REPLY.size + n_header : end])

    def disconnect(self, quit_worker: bool = False) -> None:
        """Drop the connection (``quit_worker``: first tell the worker's serve loop to end)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if quit_worker:
            try:
                conn.sendall(QUIT)
            except OSError:
                pass
        conn.close()

    def close(self) -> None:
        """Close the socket and the shared memory (freed once the worker closes it too)."""
        self.disconnect(quit_worker=True)
        self._listener.close()
        self.arrays = None  # type: ignore[assignment]  # views first, then the map
        try:
            self._mmap.close()
        except BufferError:  # a caller still holds a view: the map goes with it
            pass
        os.close(self._fd)


class WorkerChannel:
    """The worker's end of a :class:`StepChannel` (made in the worker's process).

    Args:
        address: The driver's socket (``StepChannel.address``).
        rows: The worker's copies.
        obs_dim: Observation size.
        act_dim: Action size.

    Raises:
        OSError: The driver's socket cannot be reached (another machine or container).
    """

    def __init__(self, address: str, rows: int, obs_dim: int, act_dim: int) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(address)
        _, fds, _, _ = socket.recv_fds(self._sock, 1, 1)
        if len(fds) != 1:
            self._sock.close()
            raise OSError("the driver sent no shared memory")
        try:
            self._mmap = mmap.mmap(fds[0], _Arrays.nbytes(rows, obs_dim, act_dim))
        finally:
            os.close(fds[0])
        self.arrays = _Arrays(self._mmap, rows, obs_dim, act_dim)

    def wait(self) -> bytes:
        """The driver's next command: ``STEP``, ``QUIT``, or ``b""`` when it is gone."""
        try:
            return self._sock.recv(1)
        except OSError:
            return b""

    def reply(self, ends: EndedRows | None) -> None:
        """Say the step is done (results already in :attr:`arrays`), with its ended rows."""
        header, blob = pack_ends(ends)
        self._sock.sendall(_REPLY.pack(OK, len(header), len(blob)) + header + blob)

    def failed(self) -> None:
        """Say the step raised (the driver then reads the error from Ray)."""
        try:
            self._sock.sendall(_REPLY.pack(FAILED, 0, 0))
        except OSError:
            pass

    def close(self) -> None:
        """Close the socket and unmap the shared memory (the driver removes the file)."""
        self._sock.close()
        self.arrays = None  # type: ignore[assignment]
        try:
            self._mmap.close()
        except BufferError:
            pass
