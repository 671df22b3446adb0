"""Snapshots: immutable records of a moment of a World, and their byte format.

A :class:`Snapshot` holds named numpy arrays (``"bodies/pose"``, ``"sensor/torso.imu/ring"``
...), JSON metadata (for example the state of every copy's random Generator, see
:func:`rng_state`), the step count and simulation time, and the fingerprint of the scene it
was taken from. :meth:`Snapshot.to_bytes` / :meth:`Snapshot.from_bytes` serialise it without
pickle; see docs/snapshots.md for the format.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

MAGIC = b"KESNAP1"
"""The first bytes of every serialised snapshot (format version 1)."""

_LEN = struct.Struct("<Q")
_DIGEST_SIZE = 32  # sha256
_MAX_DIM = 2**62

# bit generators rng_from_state may construct (an allowlist, never getattr on user input)
_BIT_GENERATORS: dict[str, type[np.random.BitGenerator]] = {
    cls.__name__: cls
    for cls in (
        np.random.PCG64,
        np.random.PCG64DXSM,
        np.random.MT19937,
        np.random.Philox,
        np.random.SFC64,
    )
}
_ND_TAG = "__ndarray__"


# ---------------------------------------------------------------------- RNG state helpers
def rng_state(gen: np.random.Generator) -> dict[str, Any]:
    """Return the exact state of a Generator as a JSON-able dict.

    Big integers (PCG64's 128-bit state) stay Python ints, which ``json`` writes and reads
    exactly; numpy arrays inside the state (MT19937, Philox, SFC64) become
    ``{"__ndarray__": dtype, "data": [...]}``. The result is a new object; later draws do
    not change it.

    Args:
        gen: The Generator to capture.

    Returns:
        A dict that :func:`rng_from_state` and :func:`set_rng_state` accept.

    Raises:
        ValueError: If ``gen`` is not a numpy Generator.

    Example:
        >>> import numpy as np
        >>> g = np.random.default_rng(7)
        >>> s = rng_state(g)
        >>> a = g.random()
        >>> rng_from_state(s).random() == a
        True

    """
    if not isinstance(gen, np.random.Generator):
        raise ValueError(f"rng_state expects a numpy.random.Generator, got {type(gen).__name__}")
    return _encode_state(gen.bit_generator.state)


def rng_from_state(state: Mapping[str, Any]) -> np.random.Generator:
    """Build a new Generator positioned exactly at ``state``.

    Args:
        state: A dict from :func:`rng_state` (also accepts the frozen form stored in
            :attr:`Snapshot.meta`).

    Returns:
        A new ``numpy.random.Generator`` that continues the captured stream.

    Raises:
        ValueError: If the state is malformed or names an unknown bit generator.

    """
    name = _bit_generator_name(state)
    bit_gen = _BIT_GENERATORS[name](0)
    _apply_state(bit_gen, state)
    return np.random.Generator(bit_gen)


def set_rng_state(gen: np.random.Generator, state: Mapping[str, Any]) -> None:
    """Move an existing Generator to ``state`` in place (references to it stay valid).

    Args:
        gen: The Generator to restore; its bit generator must be the one named in ``state``.
        state: A dict from :func:`rng_state`.

    Raises:
        ValueError: If the state is malformed or is of another bit generator type.

    """
    if not isinstance(gen, np.random.Generator):
        raise ValueError(
            f"set_rng_state expects a numpy.random.Generator, got {type(gen).__name__}"
        )
    name = _bit_generator_name(state)
    have = type(gen.bit_generator).__name__
    if have != name:
        raise ValueError(
            f"set_rng_state: state is of bit generator {name!r} but the Generator uses "
            f"{have!r}; build a new one with rng_from_state instead"
        )
    _apply_state(gen.bit_generator, state)


def _bit_generator_name(state: Mapping[str, Any]) -> str:
    if not isinstance(state, Mapping):
        raise ValueError(
            f"RNG state must be a mapping from rng_state(), got {type(state).__name__}"
        )
    name = state.get("bit_generator")
    if name not in _BIT_GENERATORS:
        raise ValueError(
            f"RNG state names bit generator {name!r}; supported: {sorted(_BIT_GENERATORS)}"
        )
    return name


def _apply_state(bit_gen: np.random.BitGenerator, state: Mapping[str, Any]) -> None:
    try:
        bit_gen.state = _decode_state(state)
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise ValueError(f"RNG state is malformed: {exc}") from None


def _encode_state(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _encode_state(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return {_ND_TAG: value.dtype.str, "shape": list(value.shape), "data": value.tolist()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_encode_state(v) for v in value]
    return value


def _decode_state(value: Any) -> Any:
    if isinstance(value, Mapping):
        if _ND_TAG in value:
            arr = np.array(list(value["data"]), dtype=np.dtype(value[_ND_TAG]))
            return arr.reshape(tuple(value["shape"]))
        return {k: _decode_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decode_state(v) for v in value]
    return value


# ---------------------------------------------------------------------- JSON helpers
def _freeze(value: Any, where: str) -> Any:
    """Deep-copy JSON-able data into an immutable form (MappingProxyType, tuple)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ValueError(
                f"Snapshot meta{where} is {value!r}; JSON meta must be finite (store "
                f"non-finite numbers in an array instead)"
            )
        return float(value)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"Snapshot meta{where} has key {k!r}; JSON keys must be str")
            out[k] = _freeze(v, f"{where}[{k!r}]")
        return MappingProxyType(out)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise ValueError(
        f"Snapshot meta{where} is a {type(value).__name__}, which is not JSON-able; "
        f"use dict, list, str, int, float, bool or None (arrays go in `arrays`)"
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise TypeError(f"not JSON-able: {type(value).__name__}")


def _dumps(value: Any) -> bytes:
    return json.dumps(
        value,
        default=_json_default,
        sort_keys=True,
        separators=(",", ":"),
        allow_nan=False,
        ensure_ascii=True,
    ).encode("ascii")


# ---------------------------------------------------------------------- Snapshot
class Snapshot:
    """An immutable record of one moment of a World (and later of an env).

    Arrays are copied on construction and stored read-only; ``meta`` is deep-copied into a
    read-only form (mappings become ``MappingProxyType``, lists become tuples). Two
    snapshots are equal when every field is bit-identical (array dtypes, shapes and bytes,
    so ``-0.0`` differs from ``0.0`` and NaN payloads count).

    Args:
        fingerprint: Fingerprint of the scene the snapshot was taken from.
        step_count: Physics steps since the World started (the exact time), >= 0.
        sim_time: Simulation time in seconds (for display; ``step_count`` is exact).
        arrays: Named numpy arrays; names are non-empty strings such as ``"bodies/pose"``.
            Object dtypes are refused (they would need pickle).
        meta: JSON-able data: dicts with str keys, lists, str, int (any size), finite float,
            bool, None. E.g. ``{"rng": [rng_state(g) for g in rngs]}``.

    Raises:
        ValueError: If a field has the wrong type or value.

    Example:
        >>> import numpy as np
        >>> snap = Snapshot("scene-abc", step_count=3, sim_time=0.05,
        ...                 arrays={"bodies/pose": np.zeros((2, 3))},
        ...                 meta={"rng": [rng_state(np.random.default_rng(1))]})
        >>> Snapshot.from_bytes(snap.to_bytes()) == snap
        True

    """

    __slots__ = ("_fingerprint", "_step_count", "_sim_time", "_arrays", "_meta")

    def __init__(
        self,
        fingerprint: str,
        step_count: int,
        sim_time: float,
        arrays: Mapping[str, np.ndarray] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(fingerprint, str) or not fingerprint:
            raise ValueError(f"Snapshot fingerprint must be a non-empty str, got {fingerprint!r}")
        if (
            isinstance(step_count, bool)
            or not isinstance(step_count, (int, np.integer))
            or step_count < 0
        ):
            raise ValueError(f"Snapshot step_count must be an int >= 0, got {step_count!r}")
        if (
            isinstance(sim_time, bool)
            or not isinstance(sim_time, (int, float, np.floating, np.integer))
            or not math.isfinite(sim_time)
        ):
            raise ValueError(f"Snapshot sim_time must be a finite number, got {sim_time!r}")
        if meta is not None and not isinstance(meta, Mapping):
            raise ValueError(f"Snapshot meta must be a mapping, got {type(meta).__name__}")
        if arrays is not None and not isinstance(arrays, Mapping):
            raise ValueError(f"Snapshot arrays must be a mapping, got {type(arrays).__name__}")
        stored: dict[str, np.ndarray] = {}
        for name in sorted((arrays or {}).keys(), key=_name_key):
            stored[name] = _stored_array(name, arrays[name])
        self._fingerprint = fingerprint
        self._step_count = int(step_count)
        self._sim_time = float(sim_time)
        self._arrays: Mapping[str, np.ndarray] = MappingProxyType(stored)
        self._meta: Mapping[str, Any] = _freeze(dict(meta or {}), "")

    # ------------------------------------------------------------------ fields
    @property
    def fingerprint(self) -> str:
        """Fingerprint of the scene the snapshot was taken from."""
        return self._fingerprint

    @property
    def step_count(self) -> int:
        """Physics steps since the World started."""
        return self._step_count

    @property
    def sim_time(self) -> float:
        """Simulation time in seconds."""
        return self._sim_time

    @property
    def arrays(self) -> Mapping[str, np.ndarray]:
        """Read-only mapping of read-only arrays, sorted by name."""
        return self._arrays

    @property
    def meta(self) -> Mapping[str, Any]:
        """Read-only JSON-able metadata (mappings are MappingProxyType, lists are tuples)."""
        return self._meta

    @property
    def nbytes(self) -> int:
        """Total bytes of array data held."""
        return sum(a.nbytes for a in self._arrays.values())

    def check_fingerprint(self, expected: str) -> None:
        """Refuse to restore into a different scene.

        Args:
            expected: Fingerprint of the scene being restored into.

        Raises:
            ValueError: If the fingerprints differ; the message names both.

        """
        if expected != self._fingerprint:
            raise ValueError(
                f"snapshot of scene {self._fingerprint!r} cannot be restored into scene "
                f"{expected!r}; restore it into a World built from the same Scene"
            )

    # ------------------------------------------------------------------ bytes
    def to_bytes(self) -> bytes:
        """Serialise to bytes, deterministically and without pickle.

        Layout: ``MAGIC`` (``b"KESNAP1"``), the header length as little-endian uint64, the
        header (canonical JSON: fingerprint, step_count, sim_time, meta and, per array, its
        name and byte length), each array as a ``.npy`` record (``allow_pickle=False``) in
        header order, then the SHA-256 of everything before it.

        Returns:
            The serialised snapshot; equal snapshots give equal bytes.

        """
        blobs = []
        for arr in self._arrays.values():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, version=(1, 0), allow_pickle=False)
            blobs.append(buf.getvalue())
        header = _dumps(
            {
                "arrays": [[n, len(b)] for n, b in zip(self._arrays, blobs, strict=True)],
                "fingerprint": self._fingerprint,
                "meta": self._meta,
                "sim_time": self._sim_time,
                "step_count": self._step_count,
            }
        )
        body = b"".join([MAGIC, _LEN.pack(len(header)), header, *blobs])
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Snapshot:
        """Rebuild a snapshot from :meth:`to_bytes` output, bit-identically.

        Args:
            data: The serialised snapshot.

        Returns:
            The snapshot.

        Raises:
            ValueError: If the bytes are not a snapshot, are truncated, have trailing data or
                a wrong checksum, or a part cannot be decoded; the message says which.

        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValueError(f"Snapshot.from_bytes expects bytes, got {type(data).__name__}")
        data = bytes(data)
        fixed = len(MAGIC) + _LEN.size
        if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
            raise ValueError(
                f"not a KELab snapshot: expected the bytes to start with {MAGIC!r}, "
                f"got {data[: len(MAGIC)]!r}"
            )
        if len(data) < fixed + _DIGEST_SIZE:
            raise ValueError(
                f"snapshot is truncated: {len(data)} bytes, shorter than the "
                f"{fixed + _DIGEST_SIZE}-byte minimum"
            )
        (header_len,) = _LEN.unpack_from(data, len(MAGIC))
        if fixed + header_len + _DIGEST_SIZE > len(data):
            raise ValueError(
                f"snapshot is truncated or corrupt: header says {header_len} header bytes "
                f"but only {len(data) - fixed - _DIGEST_SIZE} follow"
            )
        try:
            header = json.loads(data[fixed : fixed + header_len].decode("ascii"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"snapshot header is corrupt (not valid JSON): {exc}") from None
        entries = _check_header(header)
        expected = fixed + header_len + sum(n for _, n in entries) + _DIGEST_SIZE
        if len(data) < expected:
            raise ValueError(f"snapshot is truncated: expected {expected} bytes, got {len(data)}")
        if len(data) > expected:
            raise ValueError(
                f"snapshot has {len(data) - expected} unexpected trailing bytes "
                f"(expected {expected} bytes, got {len(data)})"
            )
        body = data[:-_DIGEST_SIZE]
        if hashlib.sha256(body).digest() != data[-_DIGEST_SIZE:]:
            raise ValueError("snapshot is corrupt: SHA-256 checksum does not match its content")
        arrays = {}
        pos = fixed + header_len
        for name, size in entries:
            stream = io.BytesIO(data[pos : pos + size])
            try:
                arr = np.lib.format.read_array(stream, allow_pickle=False)
            except (ValueError, OSError, EOFError) as exc:
                raise ValueError(f"snapshot array {name!r} cannot be decoded: {exc}") from None
            if stream.tell() != size:
                raise ValueError(
                    f"snapshot array {name!r} is corrupt: its record is {size} bytes but the "
                    f"array uses {stream.tell()}"
                )
            arrays[name] = arr
            pos += size
        try:
            return cls(
                header["fingerprint"],
                header["step_count"],
                header["sim_time"],
                arrays=arrays,
                meta=header["meta"],
            )
        except ValueError as exc:
            raise ValueError(f"snapshot content is invalid: {exc}") from None

    # ------------------------------------------------------------------ python protocol
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        if (
            self._fingerprint != other._fingerprint
            or self._step_count != other._step_count
            or struct.pack("<d", self._sim_time) != struct.pack("<d", other._sim_time)
            or list(self._arrays) != list(other._arrays)
            or _dumps(self._meta) != _dumps(other._meta)
        ):
            return False
        for name, a in self._arrays.items():
            b = other._arrays[name]
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                return False
        return True

    def __hash__(self) -> int:
        return hash((self._fingerprint, self._step_count))

    def __repr__(self) -> str:
        return (
            f"Snapshot(fingerprint={self._fingerprint!r}, step_count={self._step_count}, "
            f"sim_time={self._sim_time!r}, arrays={len(self._arrays)} ({self.nbytes} bytes), "
            f"meta keys={sorted(self._meta)})"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_meta"):  # fully constructed: immutable
            raise AttributeError(f"Snapshot is immutable; cannot set {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Snapshot is immutable; cannot delete {name!r}")


def _name_key(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"Snapshot array names must be non-empty str, got {name!r}")
    return name


def _stored_array(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.hasobject:
        raise ValueError(
            f"Snapshot array {name!r} has dtype {arr.dtype}, which holds Python objects and "
            f"cannot be stored without pickle; convert it to a numeric dtype"
        )
    out = np.array(arr, copy=True, order="C")
    out.setflags(write=False)
    return out


def _check_header(header: Any) -> list[tuple[str, int]]:
    keys = {"arrays", "fingerprint", "meta", "sim_time", "step_count"}
    if not isinstance(header, dict) or set(header) != keys:
        got = sorted(header) if isinstance(header, dict) else type(header).__name__
        raise ValueError(f"snapshot header is corrupt: expected keys {sorted(keys)}, got {got}")
    entries = header["arrays"]
    ok = isinstance(entries, list) and all(
        isinstance(e, list)
        and len(e) == 2
        and isinstance(e[0], str)
        and isinstance(e[1], int)
        and 0 <= e[1] < _MAX_DIM
        for e in entries
    )
    if not ok:
        raise ValueError("snapshot header is corrupt: 'arrays' must list [name, byte length]")
    return [(e[0], e[1]) for e in entries]
