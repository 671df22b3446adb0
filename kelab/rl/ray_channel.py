"""What travels between a RayLearningEnv and its workers, and the same-machine fast path.

A ``RayLearningEnv`` step sends each worker its rows of the actions and gets back its
observations, rewards and flags plus the rows of the copies that ended
(:func:`compact_ends`); the driver joins them into ``LearningEnv``'s info
(:func:`expand_ends`). Through Ray, every such call costs ~1.5 ms of Ray's own work in
the worker and more in the driver (benchmarks/README.md, "scale_throughput"), as much as
stepping ~100 Humanoid copies. For workers on the driver's machine a step instead goes
through a :class:`StepChannel` (Linux): the per-step arrays live in shared memory both
processes map, and one Unix-socket message each way says "step" and "done" (carrying the
ended rows, encoded without pickle by :func:`pack_ends`). Ray still starts, places,
restarts and kills the workers and carries everything else (reset, snapshots, errors).
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
from typing import Any

import numpy as np

from kelab.rl.env import vector_info

__all__ = [
    "ChannelClosedError",
    "StepChannel",
    "channel_supported",
    "WorkerChannel",
    "compact_ends",
    "expand_ends",
    "pack_ends",
    "unpack_ends",
]

STEP, QUIT = b"S", b"Q"  # the driver's commands (one byte each)
OK, FAILED = 0, 1  # a reply's status: the step's results, or the step raised (see serve)
_REPLY = struct.Struct("<BII")  # status, JSON bytes, binary bytes (then the two payloads)


class ChannelClosedError(ConnectionError):
    """The other end of a :class:`StepChannel` closed (its process ended or died)."""


# ---------------------------------------------------------------------- the ended rows
def compact_ends(info: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rows of a ``LearningEnv`` step info that :func:`expand_ends` needs (None if empty).

    A worker's reply carries only the copies that ended (their ids, final observations,
    labels, returns, lengths, wall times, success and checks), not the full-size info:
    fewer arrays to ship and for the driver to join. ``info["episode"]["t"]`` travels as
    the float32 the info holds (wall-clock time, never identical anyway).

    Args:
        info: What ``LearningEnv.step`` returned as ``info``.

    Returns:
        None when no copy ended, else a dict of arrays of one row per ended copy.
    """
    if not info:
        return None
    ids = np.flatnonzero(info["_ended_by"])
    ends: dict[str, Any] = {
        "ids": ids,
        "final_obs": info["final_obs"][ids],
        "ended_by": info["ended_by"][ids].tolist(),
        "episode_return": info["episode_return"][ids],
        "episode_length": info["episode_length"][ids],
        "episode_wall_s": info["episode"]["t"][ids],
    }
    if "is_success" in info:
        ends["is_success"] = info["is_success"][ids]
        checks = info["checks"]  # vector_info writes each name, then its "_name" mask
        ends["checks"] = {name: checks[name][ids] for name in list(checks)[::2]}
    return ends


def expand_ends(
    parts: Sequence[tuple[int, Mapping[str, Any]]], num_envs: int, obs_dim: int
) -> dict[str, Any]:
    """Join the workers' :func:`compact_ends` into the info ``LearningEnv`` would return.

    Args:
        parts: ``(first copy, compact ends)`` of every worker where a copy ended.
        num_envs: Copies in all.
        obs_dim: Observation size.

    Returns:
        ``vector_info`` of the ended copies: rows of copies that did not end hold zeros,
        False or None, exactly as in one ``LearningEnv``.
    """
    if len(parts) == 1:  # one worker's copies ended (common): no joins
        first_copy, first = parts[0]
        ids = first["ids"] + first_copy

        def joined(key: str) -> np.ndarray:
            return first[key]

        labels = first["ended_by"]
    else:
        first = parts[0][1]
        ids = np.concatenate([e["ids"] + a for a, e in parts])

        def joined(key: str) -> np.ndarray:
            return np.concatenate([e[key] for _, e in parts])

        labels = [label for _, e in parts for label in e["ended_by"]]
    mask = np.zeros(num_envs, dtype=bool)
    mask[ids] = True
    # vector_info reads only the ended rows of these (it masks or zero-fills the rest)
    final_obs = np.empty((num_envs, obs_dim), dtype=first["final_obs"].dtype)
    final_obs[ids] = joined("final_obs")
    returns = np.empty(num_envs, dtype=first["episode_return"].dtype)
    returns[ids] = joined("episode_return")
    lengths = np.empty(num_envs, dtype=first["episode_length"].dtype)
    lengths[ids] = joined("episode_length")
    wall = np.empty(num_envs, dtype=np.float64)
    wall[ids] = joined("episode_wall_s")
    ended_by = np.full(num_envs, None, dtype=object)
    ended_by[ids] = labels
    ends: dict[str, Any] = {
        "ids": ids,
        "mask": mask,
        "final_obs": final_obs,
        "ended_by": ended_by,
        "episode_return": returns,
        "episode_length": lengths,
        "episode_wall_s": wall,
    }
    if "is_success" in first:
        success = np.zeros(num_envs, dtype=bool)
        success[ids] = joined("is_success")
        ends["is_success"] = success
        names: list[str] = []
        for _, e in parts:
            names.extend(k for k in e["checks"] if k not in names)
        checks = {}
        for name in names:
            full = np.zeros(num_envs, dtype=bool)
            for a, e in parts:
                if name in e["checks"]:
                    full[e["ids"] + a] = e["checks"][name]
            checks[name] = full
        ends["checks"] = checks
    return vector_info(ends, num_envs)


def pack_ends(ends: Mapping[str, Any] | None) -> tuple[bytes, bytes]:
    """Encode :func:`compact_ends` without pickle: ``(JSON header, raw array bytes)``.

    Labels (``ended_by``) travel as JSON strings, every array as its raw bytes with its
    dtype, shape and offset in the header. ``(b"", b"")`` for None (nothing ended).
    """
    if ends is None:
        return b"", b""
    chunks: list[bytes] = []
    offset = 0

    def put(value: np.ndarray) -> list[Any]:
        nonlocal offset
        arr = np.ascontiguousarray(value)
        spec = [arr.dtype.str, list(arr.shape), offset]
        chunks.append(arr.tobytes())
        offset += arr.nbytes
        return spec

    meta: dict[str, Any] = {}
    for key, value in ends.items():
        if key == "ended_by":
            meta[key] = [str(label) for label in value]
        elif key == "checks":
            meta[key] = {str(name): put(v) for name, v in value.items()}
        else:
            meta[key] = put(value)
    return json.dumps(meta, separators=(",", ":")).encode(), b"".join(chunks)


def unpack_ends(header: bytes, blob: bytes) -> dict[str, Any] | None:
    """Decode :func:`pack_ends`'s bytes (read-only arrays over ``blob``; None if empty).

    Raises:
        ValueError: For a header naming an object dtype (never written by ``pack_ends``).
    """
    if not header:
        return None

    def get(spec: list[Any]) -> np.ndarray:
        dtype = _dtype(spec[0])
        shape = spec[1]
        if len(shape) == 1:
            return np.frombuffer(blob, dtype, count=shape[0], offset=spec[2])
        count = math.prod(shape)
        return np.frombuffer(blob, dtype, count=count, offset=spec[2]).reshape(shape)

    meta = json.loads(header)
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if key == "ended_by":
            out[key] = value
        elif key == "checks":
            out[key] = {name: get(spec) for name, spec in value.items()}
        else:
            out[key] = get(value)
    return out


@functools.lru_cache(maxsize=64)
def _dtype(name: str) -> np.dtype:
    """The plain dtype a header names (cached: a handful of names, every step)."""
    dtype = np.dtype(name)
    if dtype.hasobject:
        raise ValueError(f"ended rows must hold plain arrays, got dtype {dtype}")
    return dtype


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

    def receive(self) -> tuple[int, dict[str, Any] | None]:
        """Wait for the worker's reply: ``(OK, compact ends or None)`` or ``(FAILED, None)``.

        On OK the results are in :attr:`arrays` until the next step.

        Raises:
            ChannelClosedError: The worker's end closed (its process died).
        """
        conn = self._conn
        if conn is None:
            raise ChannelClosedError("not connected")
        try:
            status, n_header, n_blob = _REPLY.unpack(_recv_exact(conn, _REPLY.size))
            header = _recv_exact(conn, n_header)
            blob = _recv_exact(conn, n_blob)
        except (OSError, struct.error) as err:
            self.disconnect()
            raise ChannelClosedError(str(err) or "the worker closed the channel") from None
        if status != OK:
            self.disconnect()
            return FAILED, None
        return OK, unpack_ends(header, blob)

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

    def reply(self, ends: Mapping[str, Any] | None) -> None:
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
