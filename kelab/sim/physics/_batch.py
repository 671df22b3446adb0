"""Batch helpers the physics layouts share (internal to kelab.sim.physics).

Both layouts read, write and step their spaces through ``pymunk.batch`` iterators (never
Python loops over bodies); this module holds what they share: the field masks and
iterators of a batch read or write, the arbiter buffer and its per-body sums, the row
bookkeeping of a batch read, friction and restitution writes, the nearest-body query and
the sorted-key lookup. Each layout (_isolated.py, _packed.py) imports them from here.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import numpy as np
import pymunk
import pymunk.batch as pbatch

from kelab.sim.physics import _chipmunk as cp

READ = (
    pbatch.BodyFields.POSITION
    | pbatch.BodyFields.ANGLE
    | pbatch.BodyFields.VELOCITY
    | pbatch.BodyFields.ANGULAR_VELOCITY
).value
FORCE = (pbatch.BodyFields.FORCE | pbatch.BodyFields.TORQUE).value
ANGLE = pbatch.BodyFields.ANGLE.value
POSVEL = (
    pbatch.BodyFields.POSITION | pbatch.BodyFields.VELOCITY | pbatch.BodyFields.ANGULAR_VELOCITY
).value
ARB = (
    pbatch.ArbiterFields.BODY_A_ID
    | pbatch.ArbiterFields.BODY_B_ID
    | pbatch.ArbiterFields.TOTAL_IMPULSE
    | pbatch.ArbiterFields.NORMAL
    | pbatch.ArbiterFields.CONTACT_COUNT
    | pbatch.ArbiterFields.POINT_A_1
    | pbatch.ArbiterFields.POINT_A_2
)
#: Floats per arbiter in an ARB read: impulse x, y, normal x, y, point 1 x, y, point 2 x, y.
ARB_FLOATS = 8
GET = cp.BODY_GET_ITER
SET = cp.BODY_SET_ITER
ARB_ITER = cp.ARBITER_ITER
#: The int array of every float-only batch read/write (body fields push no ints): one for
#: the process, never grown, never freed.
NO_INTS = cp.int_array_new(0)


def _empty(*shape: int, dtype: type = np.float64) -> np.ndarray:
    """A read-only empty array (shared: nothing can be written into it)."""
    out = np.zeros(shape, dtype)
    out.flags.writeable = False
    return out


# What a read of no arbiters returns, made once: a step without contacts (a cart on its
# track, a ball on a table, a robot in the air) pays no array at all (#42.1: the
# frombuffer/astype/reshape and zeros of every such read were ~8 us of a single env's
# physics step on the 2-core VM)
_NO_ARB_INTS = _empty(0, 3, dtype=np.uint64)
_NO_ARB_FLOATS = _empty(0, ARB_FLOATS)
_NO_ROWS = _empty(0, dtype=np.int64)


def _free_arrays(floats: object, ints: object) -> None:
    """Free the C arrays of an :class:`ArbiterBuffer` (its finalizer)."""
    cp.float_array_free(floats)
    cp.int_array_free(ints)


class ArbiterBuffer:
    """A reusable buffer for batched arbiter reads; its C arrays are freed with it.

    ``pymunk.batch.Buffer`` allocates two C arrays and never frees them (pymunk 7.3.1),
    so a Buffer per read leaked native memory on every contact read (hundreds of bytes
    to kilobytes per step). Each backend keeps one of these and clears it before every
    read; the arrays only grow to the largest read seen and are freed with the buffer.
    """

    def __init__(self) -> None:
        floats = cp.float_array_new(0)
        ints = cp.int_array_new(0)
        self._floats, self._ints = floats, ints
        self._data = cp.batched_data(ARB.value, floats, ints)
        weakref.finalize(self, _free_arrays, floats, ints)

    def read(self, spaces: Iterable[object], copy: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Read the cached arbiters of spaces (Chipmunk ``cpSpace*`` pointers), in order.

        Args:
            spaces: Space pointers whose arbiters are appended one space after the other.
            copy: Return floats that own their memory. With False they view this buffer,
                valid only until its next read: the caller must copy what it keeps.

        Returns:
            ``(ints, floats)`` as :func:`sum_arbiters` describes.
        """
        self._floats.num = 0
        self._ints.num = 0
        each, data = cp.space_each_cached_arbiter, self._data
        for ptr in spaces:
            each(ptr, ARB_ITER, data)
        if not self._ints.num:
            return _NO_ARB_INTS, _NO_ARB_FLOATS
        ints, fl = sum_arbiters(self)
        return ints, (fl.copy() if copy else fl)

    def int_buf(self) -> object:
        """The ints read last (a cffi buffer over the C array)."""
        return cp.int_buffer(self._ints)

    def float_buf(self) -> object:
        """The floats read last (a cffi buffer over the C array)."""
        return cp.float_buffer(self._floats)


class BatchRows:
    """A float64 matrix with a ``pmBatchedData`` per row block (one batch call per block).

    Args:
        blocks: Number of blocks (rows of the matrix), one per space.
        width: Floats per block.
        fields: ``pymunk.batch`` field bits read or written.
    """

    def __init__(self, blocks: int, width: int, fields: int) -> None:
        # two spare floats per row: pymunk's push grows an array when num reaches max - 1
        self.array = np.zeros((blocks, width + 2), dtype=np.float64)
        self.width = width
        base = self.array.ctypes.data
        stride = self.array.strides[0]
        self.floats = []
        self.data = []
        for c in range(blocks):
            fa = cp.float_array_view(base + c * stride, width + 2)
            d = cp.batched_data(fields, fa, NO_INTS)
            self.floats.append(fa)
            self.data.append(d)

    @property
    def view(self) -> np.ndarray:
        """The matrix without the spare floats, shape ``(blocks, width)``."""
        return self.array[:, : self.width]

    def run(self, block: int, space_ptr: object, func: object) -> None:
        """Run one batch get/set iterator over every body of a space for one block."""
        self.floats[block].num = 0
        cp.space_each_body(space_ptr, func, self.data[block])


def sum_arbiters(buf: ArbiterBuffer) -> tuple[np.ndarray, np.ndarray]:
    """Return (ints ``(k, 3)`` uint64: body A id, body B id, contact count; floats ``(k, 8)``).

    Floats: total impulse x, y, normal x, y, contact point 1 x, y, point 2 x, y (points
    on shape A's surface, space coordinates; point 2 is meaningful when the count is 2).
    """
    ints = np.frombuffer(buf.int_buf(), dtype=np.uintp).astype(np.uint64).reshape(-1, 3)
    fl = np.frombuffer(buf.float_buf(), dtype=np.float64).reshape(-1, ARB_FLOATS)
    return ints, fl


def set_shape_values(shapes: list[list[pymunk.Shape]], values: np.ndarray) -> None:
    """Set the friction of each list of shapes (one C call per shape, no Python wrapper)."""
    setf = cp.shape_set_friction
    for own, v in zip(shapes, values.tolist(), strict=True):
        for s in own:
            setf(cp.shape_ptr(s), v)


def nearest_body(
    bodies: dict[int, pymunk.Body], x: float, y: float, tolerance: float
) -> int | None:
    """Return the index of the body with a shape within ``tolerance`` of (x, y), or None.

    Uses each shape's exact geometry at the body's current pose (``cache_bb`` refreshes
    the shape's cached world geometry, which a state write leaves stale until the next
    step; it does not touch the spatial index, so the physics is unchanged). Among several
    hits the nearest wins (deepest inside), ties go to the lowest index.
    """
    best: tuple[float, int] | None = None
    for index, body in bodies.items():
        for shape in body.shapes:
            shape.cache_bb()
            d = shape.point_query((x, y)).distance
            if d <= tolerance and (best is None or (d, index) < best):
                best = (d, index)
    return None if best is None else best[1]


def lookup(table: np.ndarray, order: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Map keys through a sorted table (``order`` gives the value of each entry), -1 if absent."""
    if table.size == 0:
        return np.full(keys.shape, -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(table, keys), 0, table.size - 1)
    return np.where(table[pos] == keys, order[pos], -1)


def friction_contacts(
    table: np.ndarray, vals: np.ndarray, ints: np.ndarray, fl: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Select arbiters between a friction body (value >= 0) and the main static (-2).

    ``table``/``vals``: sorted body ids and their friction values (a row ``c*nb+b``,
    -2 for the main static material, -1 otherwise). Returns ``(rows, count, floats)``.
    Both layouts use it. The per-arbiter min/max of the two bodies' codes are
    element-wise ops on the two columns: numpy's axis reductions over two columns cost
    several times more at these sizes.
    """
    if table.size == 0 or ints.shape[0] == 0:
        return _NO_ROWS, _NO_ROWS, _NO_ARB_FLOATS
    keys = ints[:, 0:2]
    pos = np.searchsorted(table, keys)
    np.minimum(pos, table.size - 1, out=pos)
    code = np.where(table[pos] == keys, vals[pos], -1)
    ca, cb = code[:, 0], code[:, 1]
    hi = np.maximum(ca, cb)
    sel = (np.minimum(ca, cb) == -2) & (hi >= 0)
    return hi[sel], ints[sel, 2].astype(np.int64), fl[sel]
