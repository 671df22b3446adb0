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

from kelab._validate import check_number, is_int, must

MAGIC = b"KESNAP1"
"""The first bytes of every serialised snapshot (format version 1)."""

MAX_HEADER_BYTES = 16 * 2**20
"""Largest JSON header ``to_bytes`` writes and ``from_bytes`` reads (16 MiB).

A header grows with the copies (their RNG states): a Humanoid LearningEnv of 4096 copies
writes 1.23 MiB (315 bytes a copy, a World alone ~150), so 16 MiB holds ~50,000 env copies
(13x the largest built-in setup). Parsing one costs at most ~20x its size in memory
(docs/snapshots.md, "Untrusted bytes").
"""
MAX_HEADER_CONTAINERS = 4096
"""JSON objects and lists a header may hold besides one per 32 of its bytes.

A real header has one per ~75 bytes (two per RNG state); an empty ``{}`` costs ~25x its
three bytes to parse, so dense ones are refused before parsing."""
MAX_META_DEPTH = 32
"""Deepest nesting of ``meta`` (a World's RNG states are 5 levels deep)."""
MAX_NDIM = 32
"""Most dimensions of a stored array."""

_LEN = struct.Struct("<Q")
_DIGEST_SIZE = 32  # sha256
_MAX_DIM = 2**62
_NPY_MAGIC = b"\x93NUMPY\x01\x00"  # .npy format version 1.0, the only one to_bytes writes
_NPY_HEADER_MAX = 10_000  # numpy's own bound on a .npy header
# array dtypes a snapshot stores: plain numbers (kind: allowed item sizes) and packed records of
# them. Never object, void/opaque, string or datetime dtypes.
_DTYPE_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8), "c": (8, 16)}

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
    if not isinstance(name, str) or name not in _BIT_GENERATORS:
        raise ValueError(
            f"RNG state names bit generator {_short(name)}; supported: {sorted(_BIT_GENERATORS)}"
        )
    return name


def _apply_state(bit_gen: np.random.BitGenerator, state: Mapping[str, Any]) -> None:
    try:
        bit_gen.state = _decode_state(state)
    except (TypeError, ValueError, LookupError, ArithmeticError) as exc:
        raise ValueError(f"RNG state is malformed: {str(exc)[:200]}") from None


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


def _decode_state(value: Any, depth: int = 0) -> Any:
    if depth > MAX_META_DEPTH:
        raise ValueError(f"it is nested more than {MAX_META_DEPTH} levels deep")
    if isinstance(value, Mapping):
        if _ND_TAG in value:
            tag = value[_ND_TAG]
            dtype = np.dtype(tag) if isinstance(tag, str) and len(tag) <= 8 else None
            if dtype is None or dtype.kind not in "iu":
                raise ValueError(f"array dtype must be an integer dtype string, got {tag!r:.40}")
            data = value["data"]
            if (
                not isinstance(data, (list, tuple))
                or len(data) > 2**16
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in data)
            ):
                raise ValueError("array data must be a flat list of at most 65536 ints")
            info = np.iinfo(dtype)
            wrong = next((x for x in data if not info.min <= x <= info.max), None)
            if wrong is not None:  # numpy 1.x would wrap it, with only a DeprecationWarning
                raise ValueError(f"array data must fit {dtype}, got {str(wrong)[:40]}")
            arr = np.array(list(data), dtype=dtype)
            return arr.reshape(tuple(value["shape"]))
        return {k: _decode_state(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decode_state(v, depth + 1) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        # every field of numpy's bit generators is unsigned: numpy 2 refuses a negative
        # one (OverflowError), numpy 1.x wraps it with only a DeprecationWarning
        raise ValueError(f"its numbers must be >= 0, got {str(value)[:40]}")
    return value


# ---------------------------------------------------------------------- JSON helpers
def _freeze(value: Any, where: str, depth: int = 0) -> Any:
    """Deep-copy JSON-able data into an immutable form (MappingProxyType, tuple)."""
    if depth > MAX_META_DEPTH:
        raise ValueError(
            f"Snapshot meta must be nested at most {MAX_META_DEPTH} levels deep, got deeper "
            f"data at meta{where[:200]}; flatten it or store it in an array"
        )
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
                raise ValueError(f"Snapshot meta{where} has key {k!r:.40}; JSON keys must be str")
            out[k] = _freeze(v, f"{where}[{k!r:.40}]", depth + 1)
        return MappingProxyType(out)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
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
            raise ValueError(
                f"Snapshot fingerprint must be a non-empty str, got {_short(fingerprint)}"
            )
        if not (is_int(step_count) and 0 <= step_count < 2**63):  # type: ignore[operator]
            raise ValueError(must("Snapshot step_count", "an int in [0, 2**63)", step_count))
        check_number(sim_time, "Snapshot sim_time")
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
        problem = _header_size_problem(header)
        if problem:
            raise ValueError(
                f"Snapshot cannot be written: its header {problem}; store bulky metadata in "
                "arrays (from_bytes would refuse this header)"
            )
        body = b"".join([MAGIC, _LEN.pack(len(header)), header, *blobs])
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Snapshot:
        """Rebuild a snapshot from :meth:`to_bytes` output, bit-identically.

        The bytes are treated as untrusted: the checksum is unkeyed (it detects accidents, not
        forgery), so the parser itself never trusts a declared size. The header is bounded
        (``MAX_HEADER_BYTES``, nesting ``MAX_META_DEPTH``, unique keys, finite numbers), array
        names are unique, array dtypes come from a whitelist (numbers and packed records of
        them; never object or void), and each array's size is checked against the bytes
        actually present, with exact integer arithmetic, before anything is allocated.

        Args:
            data: The serialised snapshot.

        Returns:
            The snapshot.

        Raises:
            ValueError: If the bytes are not a snapshot, are truncated, have trailing data or
                a wrong checksum, or a part cannot be decoded; the message says which. No
                other exception escapes, whatever the bytes.

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
        if header_len > MAX_HEADER_BYTES:
            raise ValueError(
                f"snapshot header must be at most {MAX_HEADER_BYTES} bytes, got {header_len}; "
                "this is not a snapshot KELab writes"
            )
        view = memoryview(data)
        if hashlib.sha256(view[:-_DIGEST_SIZE]).digest() != data[-_DIGEST_SIZE:]:
            raise ValueError(
                f"snapshot is corrupt or truncated: the SHA-256 checksum of its {len(data)} "
                "bytes does not match their content; use the bytes to_bytes() wrote, whole"
            )
        header = _parse_header(data[fixed : fixed + header_len])
        entries = _check_header(header)
        expected = fixed + header_len + sum(n for _, n in entries) + _DIGEST_SIZE
        if len(data) < expected:
            raise ValueError(f"snapshot is truncated: expected {expected} bytes, got {len(data)}")
        if len(data) > expected:
            raise ValueError(
                f"snapshot has {len(data) - expected} unexpected trailing bytes "
                f"(expected {expected} bytes, got {len(data)})"
            )
        arrays = {}
        pos = fixed + header_len
        for name, size in entries:
            arrays[name] = _read_record(name, view, pos, size)
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

    def array(
        self,
        name: str,
        dtype: np.dtype | type | str | None = None,
        shape: tuple[int | None, ...] | None = None,
    ) -> np.ndarray:
        """Return the stored array ``name``, checking its dtype and shape first.

        For code that restores a snapshot from untrusted bytes: one call states what it
        expects, and any mismatch is a ValueError naming the array, the expectation and what
        was found, before anything uses the data.

        Args:
            name: Array name, e.g. ``"bodies/pose"``.
            dtype: Required dtype (compared with ``==``, so byte order counts); None: any.
            shape: Required shape; a None entry accepts any length on that axis; None: any.

        Returns:
            The read-only array.

        Raises:
            ValueError: If the array is missing or has another dtype or shape.

        Example:
            >>> snap = Snapshot("s", 0, 0.0, arrays={"pose": np.zeros((2, 3))})
            >>> snap.array("pose", np.float64, (None, 3)).shape
            (2, 3)
        """
        arr = self._arrays.get(name)
        if arr is None:
            raise ValueError(
                f"snapshot must have the array {name!r}, got only {sorted(self._arrays)[:20]}; "
                "restore snapshots taken from the same kind of World"
            )
        if dtype is not None and arr.dtype != np.dtype(dtype):
            raise ValueError(
                f"snapshot array {name!r} must have dtype {np.dtype(dtype)}, got {arr.dtype}; "
                "the snapshot is corrupt or from another version"
            )
        if shape is not None:
            ok = len(shape) == arr.ndim and all(
                want is None or want == got for want, got in zip(shape, arr.shape, strict=False)
            )
            if not ok:
                want_s = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
                raise ValueError(
                    f"snapshot array {name!r} must have shape {want_s}, got {arr.shape}; "
                    "the snapshot is corrupt or from another World"
                )
        return arr

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


def _short(value: object) -> str:
    """A bounded repr for error messages (huge ints and strings come from untrusted bytes)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an int of {value.bit_length()} bits>"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _name_key(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"Snapshot array names must be non-empty str, got {_short(name)}")
    return name


def _stored_array(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.hasobject:
        raise ValueError(
            f"Snapshot array {name!r} has dtype {arr.dtype}, which holds Python objects and "
            f"cannot be stored without pickle; convert it to a numeric dtype"
        )
    problem = _dtype_problem(arr.dtype)
    if problem:
        raise ValueError(
            f"Snapshot array {name!r} must have a bool, integer, float or complex dtype (or a "
            f"packed record of them), got {arr.dtype} ({problem}); convert it with .astype()"
        )
    if arr.ndim > MAX_NDIM:
        raise ValueError(
            f"Snapshot array {name!r} must have at most {MAX_NDIM} dimensions, got {arr.ndim}"
        )
    out = np.array(arr, copy=True, order="C")
    out.setflags(write=False)
    return out


def _dtype_problem(dtype: np.dtype, depth: int = 0) -> str:
    """Return why ``dtype`` may not be stored ("" when it may)."""
    if dtype.names is not None:
        if depth >= 2:
            return "records nested more than twice"
        if not dtype.names or dtype.itemsize == 0:
            return "an empty record"
        end = 0
        for field_name in dtype.names:
            sub, offset = dtype.fields[field_name][:2]
            if offset != end:
                return "a record with padding or overlapping fields"
            why = _dtype_problem(sub, depth + 1)
            if why:
                return why
            end = offset + sub.itemsize
        return "" if end == dtype.itemsize else "a record with trailing padding"
    if dtype.subdtype is not None:
        return "a sub-array dtype"
    if dtype.itemsize not in _DTYPE_SIZES.get(dtype.kind, ()):
        return f"kind {dtype.kind!r} of {dtype.itemsize} bytes is not stored"
    return ""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {dup[:60]!r}")
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of float range")
    return value


_OPEN = b"[{"
#: every byte but the ones that matter to the nesting: quotes and brackets
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{}')))


def _header_size_problem(raw: bytes) -> str:
    """Why a header is too big to parse ("" when it is not): bytes, containers, nesting.

    Works on the raw bytes with C-speed passes that build nothing larger than them:
    escaped backslashes and quotes are dropped, everything but quotes and brackets is
    deleted, and the brackets outside strings (even quote parity) are counted and their
    nesting measured, so ``json.loads`` never recurses deeper than ``MAX_META_DEPTH``
    allows and never builds more than ``MAX_HEADER_CONTAINERS`` + one per 32 bytes.
    """
    if len(raw) > MAX_HEADER_BYTES:
        return f"must be at most {MAX_HEADER_BYTES} bytes, got {len(raw)}"
    kept = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    marks = np.frombuffer(kept, dtype=np.uint8)
    quote = marks == ord('"')
    outside = (np.cumsum(quote, dtype=np.uint8) & 1) == 0  # parity survives the wrap-around
    brackets = marks[outside & ~quote].tobytes()
    depth = 0
    for start in range(0, len(brackets), 2**20):  # 1 MiB of brackets at a time
        steps = np.frombuffer(brackets, np.uint8, min(2**20, len(brackets) - start), start)
        opens = (steps == _OPEN[0]) | (steps == _OPEN[1])
        levels = depth + np.cumsum(np.where(opens, 1, -1), dtype=np.int64)
        if int(levels.max()) > MAX_META_DEPTH + 3:  # + the header object and its "meta"
            return f"is nested more than {MAX_META_DEPTH} levels deep"
        depth = int(levels[-1])
    allowed = MAX_HEADER_CONTAINERS + len(raw) // 32
    count = len(brackets) - brackets.count(b"]") - brackets.count(b"}")
    if count > allowed:
        return (
            f"may hold at most {allowed} JSON objects and lists ({MAX_HEADER_CONTAINERS} and "
            f"one per 32 bytes), got {count}"
        )
    return ""


def _parse_header(raw: bytes) -> Any:
    """Parse the JSON header: bounded size and nesting, unique keys, finite numbers."""
    if not raw.isascii():
        raise ValueError("snapshot header is corrupt (not valid JSON): it is not ASCII")
    problem = _header_size_problem(raw)
    if problem:
        raise ValueError(f"snapshot header is corrupt: it {problem}")
    try:
        return json.loads(
            raw.decode("ascii"),
            object_pairs_hook=_unique_pairs,
            parse_constant=_no_constant,
            parse_float=_finite_float,
        )
    except RecursionError:  # unreachable after the nesting bound; kept as a guard
        raise ValueError(
            f"snapshot header is corrupt: nested more than {MAX_META_DEPTH} levels deep"
        ) from None
    except ValueError as exc:  # JSONDecodeError, the hooks, int digits
        raise ValueError(f"snapshot header is corrupt (not valid JSON): {exc}") from None


def _check_header(header: Any) -> list[tuple[str, int]]:
    keys = {"arrays", "fingerprint", "meta", "sim_time", "step_count"}
    if not isinstance(header, dict) or set(header) != keys:
        got = sorted(header)[:10] if isinstance(header, dict) else type(header).__name__
        raise ValueError(f"snapshot header is corrupt: expected keys {sorted(keys)}, got {got}")
    entries = header["arrays"]
    ok = isinstance(entries, list) and all(
        isinstance(e, list)
        and len(e) == 2
        and isinstance(e[0], str)
        and e[0] != ""
        and isinstance(e[1], int)
        and not isinstance(e[1], bool)
        and 0 <= e[1] < _MAX_DIM
        for e in entries
    )
    if not ok:
        raise ValueError("snapshot header is corrupt: 'arrays' must list [name, byte length]")
    names = [e[0] for e in entries]
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise ValueError(
            f"snapshot header is corrupt: array names must be unique, got {dup[:60]!r} twice"
        )
    return [(e[0], e[1]) for e in entries]


def _read_record(name: str, view: memoryview, pos: int, size: int) -> np.ndarray:
    """Decode one ``.npy`` (version 1.0) record of ``size`` bytes at ``pos``, defensively.

    The header is parsed by numpy (at most 10 kB, literal syntax only); then the dtype must be
    whitelisted and ``prod(shape) * itemsize`` (exact Python ints) must equal the bytes that
    follow, before an array is made from them (a view: the Snapshot copies it).
    """
    where = f"snapshot array {name[:60]!r}"
    record = view[pos : pos + size]
    if bytes(record[: len(_NPY_MAGIC)]) != _NPY_MAGIC:
        raise ValueError(
            f"{where} cannot be decoded: a record must start with the .npy version 1.0 magic "
            f"{_NPY_MAGIC!r}, got {bytes(record[: len(_NPY_MAGIC)])!r}"
        )
    stream = io.BytesIO(bytes(record[: len(_NPY_MAGIC) + 2 + _NPY_HEADER_MAX]))
    stream.seek(len(_NPY_MAGIC))
    try:
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(
            stream, max_header_size=_NPY_HEADER_MAX
        )
    except Exception as exc:  # noqa: BLE001 - numpy's parser of untrusted text: any failure
        raise ValueError(
            f"{where} cannot be decoded: its .npy header is invalid "
            f"({type(exc).__name__}: {str(exc)[:300]})"
        ) from None
    offset = stream.tell()
    problem = "object" if dtype.hasobject else _dtype_problem(dtype)
    if problem:
        raise ValueError(
            f"{where} cannot be decoded: dtype must be bool, integer, float, complex or a "
            f"packed record of them, got {str(dtype)[:80]} ({problem})"
        )
    if len(shape) > MAX_NDIM or any(d < 0 or d > _MAX_DIM for d in shape):
        raise ValueError(
            f"{where} cannot be decoded: shape must have at most {MAX_NDIM} dimensions of "
            f"0..2**62, got {str(shape)[:120]}"
        )
    count = math.prod(shape)
    if math.prod(max(d, 1) for d in shape) * dtype.itemsize > _MAX_DIM:
        raise ValueError(f"{where} cannot be decoded: shape {str(shape)[:120]} is too large")
    used = offset + count * dtype.itemsize
    if used != size:
        raise ValueError(
            f"{where} is corrupt: its record is {size} bytes but the array uses {used}"
        )
    flat = np.frombuffer(record, dtype=dtype, count=count, offset=offset) if count else None
    if flat is None:
        return np.empty(shape, dtype=dtype)
    return flat.reshape(shape, order="F" if fortran else "C")
