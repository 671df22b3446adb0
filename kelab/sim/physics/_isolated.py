"""The "isolated" layout: one pymunk Space per environment copy (internal).

Every copy lives in its own ``pymunk.Space`` in its own frame (origin at 0), built by the
same sequence of calls, so copy ``i`` computes bit-identically to a lone copy, contacts
included. The price is Python call overhead: a few C calls per copy per physics step.
See docs/world.md, "Layouts".
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pymunk
import pymunk.batch as pbatch

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._compile import CopySpace, Layout, build_copy
from kelab.sim.physics._memory import check_world_memory, estimate, memory_left
from kelab.sim.scene.scene import Scene

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
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, fl.shape[1]))
    keys = ints[:, 0:2]
    pos = np.searchsorted(table, keys)
    np.minimum(pos, table.size - 1, out=pos)
    code = np.where(table[pos] == keys, vals[pos], -1)
    ca, cb = code[:, 0], code[:, 1]
    hi = np.maximum(ca, cb)
    sel = (np.minimum(ca, cb) == -2) & (hi >= 0)
    return hi[sel], ints[sel, 2].astype(np.int64), fl[sel]


class IsolatedBackend:
    """One pymunk Space per copy (the default layout).

    Args:
        scene: The scene.
        layout: Its constant layout.
        num_envs: Copies.
        num_threads: Threads stepping shards of copies (bit-identical for every value).
    """

    name = "isolated"

    def __init__(self, scene: Scene, layout: Layout, num_envs: int, num_threads: int) -> None:
        self._scene = scene
        self._layout = layout
        self._n = num_envs
        nb = len(layout.body_paths)
        self._nb = nb
        nr = layout.n_rows
        # refuse a World that would not fit before allocating anything per copy
        check_world_memory(
            num_envs, "isolated", estimate(scene, layout, "isolated", 1), memory_left()
        )
        self._state = BatchRows(num_envs, nr * 6, READ)
        self._force = BatchRows(num_envs, nr * 3, FORCE)
        self._angles = BatchRows(num_envs, nr, ANGLE)
        self._posvel = BatchRows(num_envs, nr * 5, POSVEL)
        self._dyn = np.flatnonzero(layout.dynamic)
        self._nd = int(self._dyn.size)
        self.raw = np.zeros((num_envs, nb, 6))
        static = ~layout.dynamic
        self.raw[:, static, 0:3] = layout.initial[static]  # static bodies never move
        #: Called as ``on_read(rows)`` (in the reading thread) after rows of ``raw`` are read.
        self.on_read: Callable[[slice | np.ndarray], None] | None = None
        self._copies: list[CopySpace] = [build_copy(scene, layout) for _ in range(num_envs)]
        self._ptrs = [cp.space_ptr(c.space) for c in self._copies]
        #: Copy origins along x in their space (0: every copy has its own space).
        self.origin_x = np.zeros(num_envs)
        self._ids_dirty = True
        self._fric_vals: np.ndarray | None = None
        self._threads = num_threads
        self._pool = ThreadPoolExecutor(num_threads) if num_threads > 1 else None
        self._arb_buf = ArbiterBuffer()  # reused by every contact read

    # ------------------------------------------------------------------ state
    def stepped(self, ids: np.ndarray) -> np.ndarray:
        """The copies a step of ``ids`` advances: exactly those (one space each)."""
        return ids

    def contact_states(self, rows: np.ndarray) -> None:
        """None: rows are read with their whole copies (one batch call per copy)."""
        return None

    def read(self, ids: np.ndarray) -> np.ndarray:
        """Batch-read copies ``ids`` into ``raw`` (one C call per copy); returns ``ids``.

        Only the moving bodies are read: a batch read visits them first, in the order they
        were added; static bodies keep their initial pose in ``raw``.
        """
        state, ptrs = self._state, self._ptrs
        for c in ids.tolist():
            state.run(c, ptrs[c], GET)
        self._store(ids)
        return ids

    def _store(self, ids: np.ndarray) -> None:
        """Copy the batch rows just read of copies ``ids`` into ``raw``, then ``on_read``."""
        rows = self._state.view.reshape(self._n, self._layout.n_rows, 6)
        if ids.size == self._n and self._nd == self._nb:  # every copy and body: no gather
            self.raw[...] = rows[:, : self._nd]
        elif ids.size == self._n:
            self.raw[:, self._dyn] = rows[:, : self._nd]
        else:
            self.raw[np.ix_(ids, self._dyn)] = rows[ids, : self._nd]
        if self.on_read is not None:
            self.on_read(ids)

    def set_forces(self, ids: np.ndarray, forces: np.ndarray) -> None:
        """Hold body forces/torques ``(len(ids), n_bodies, 3)``, written before every step.

        Rows of static bodies are ignored (nothing moves them).
        """
        f = self._force.view.reshape(self._n, self._layout.n_rows, 3)
        f[ids, : self._nd] = forces[:, self._dyn]

    def step(self, dt: float, ids: np.ndarray, read: bool = False) -> np.ndarray:
        """One physics step of copies ``ids``; with ``read`` also batch-read them after.

        Returns:
            The copies whose state was read into ``raw`` after the step (``ids`` or none).
        """
        if self._pool is None or ids.size < 2 * self._threads:
            self._step_copies(ids, dt, read)
        else:
            shards = np.array_split(ids, self._threads)
            k = len(shards)
            list(self._pool.map(self._step_copies, shards, [dt] * k, [read] * k))
        return ids if read else ids[:0]

    def _step_copies(self, ids: np.ndarray, dt: float, read: bool = False) -> None:
        # cpSpaceStep directly: pymunk's Space.step only adds Python bookkeeping for
        # deferred add/remove and post-step callbacks, which the World never uses
        force, ptrs, step = self._force, self._ptrs, cp.space_step
        if not read:
            for c in ids.tolist():
                force.run(c, ptrs[c], SET)
                step(ptrs[c], dt)
            return
        # write, step and read each space in one pass (the World reads after every step)
        each, f_arr, f_data = cp.space_each_body, force.floats, force.data
        r_arr, r_data = self._state.floats, self._state.data
        for c in ids.tolist():
            ptr = ptrs[c]
            f_arr[c].num = 0
            each(ptr, SET, f_data[c])
            step(ptr, dt)
            r_arr[c].num = 0
            each(ptr, GET, r_data[c])
        self._store(ids)

    def rebuild(self, ids: np.ndarray, place: bool = True) -> None:
        """Make copies ``ids`` fresh (initial configuration, no history).

        ``place`` is accepted for the packed layout's sake (a new space is built anyway).
        """
        for c in ids.tolist():
            self._copies[c].rebuild()  # the same bodies (same ids) in a fresh space
            self._ptrs[c] = cp.space_ptr(self._copies[c].space)

    def set_friction(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Set the friction of the shapes of bodies ``rows`` (flat ``copy * nb + body``)."""
        nb = self._nb
        set_shape_values([self._copies[r // nb].body_shapes[r % nb] for r in rows.tolist()], values)

    def write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        """Set poses/velocities of the moving bodies of (just rebuilt) copies ``ids``."""
        self.read(ids)
        lay = self._layout
        rows = lay.body_rows[lay.dynamic]
        dyn = lay.dynamic
        nr = lay.n_rows
        ang = self._angles.view.reshape(self._n, nr)
        pv = self._posvel.view.reshape(self._n, nr, 5)
        cur = self._state.view.reshape(self._n, nr, 6)
        sub_a = cur[ids][:, :, 2]
        sub_a[:, rows] = poses[:, dyn, 2]
        ang[ids] = sub_a
        sub = cur[ids][:, :, [0, 1, 3, 4, 5]]
        sub[:, rows, 0:2] = poses[:, dyn, 0:2]
        sub[:, rows, 2:5] = vels[:, dyn, :]
        pv[ids] = sub
        # angle first: setting the angle turns a body about its centre of gravity
        for c in ids.tolist():
            self._angles.run(c, self._ptrs[c], SET)
            self._posvel.run(c, self._ptrs[c], SET)

    # ------------------------------------------------------------------ contacts, rays
    def _id_table(self) -> tuple[np.ndarray, np.ndarray]:
        if self._ids_dirty:
            ids = np.array(
                [[b.id for b in c.bodies] for c in self._copies], dtype=np.uint64
            ).reshape(-1)
            order = np.argsort(ids, kind="stable")
            self._id_sorted = ids[order]
            self._id_order = order
            self._ids_dirty = False
            self._fric_vals = None
        return self._id_sorted, self._id_order

    def arbiters(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Last step's arbiters of copies ``ids`` (rows ``c*nb+b`` of A and B, counts, floats).

        See :func:`sum_arbiters` for the floats; -1 marks a body of no copy.
        """
        ints, fl, table, order = self._read_arbiters(ids)
        ra = lookup(table, order, ints[:, 0])
        return ra, lookup(table, order, ints[:, 1]), ints[:, 2].astype(np.int64), fl

    def _read_arbiters(
        self, ids: np.ndarray, copy: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Summed last-step arbiters of copies ``ids`` plus the body-id lookup table.

        With ``copy`` the floats own their memory; else they view the reused buffer,
        which the next read overwrites (see :meth:`ArbiterBuffer.read`).
        """
        ptrs = self._ptrs
        ints, fl = self._arb_buf.read([ptrs[c] for c in ids.tolist()], copy)
        table, order = self._id_table()
        return ints, fl, table, order

    def friction_arbiters(
        self, ids: np.ndarray, codes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last step's contacts between friction bodies and the main static material.

        See ``PackedBackend.friction_arbiters`` (same contract).
        """
        ints, fl, table, order = self._read_arbiters(ids, copy=False)  # selected: copies
        if self._fric_vals is None:
            code = codes[order % self._nb]
            self._fric_vals = np.where(code == 1, order, np.where(code == 2, -2, -1))
        return friction_contacts(table, self._fric_vals, ints, fl)

    def segment_first(
        self, body: int, start: np.ndarray, end: np.ndarray, ids: np.ndarray
    ) -> np.ndarray:
        """Alpha of the first hit of one ray per copy of ``ids`` (NaN: none).

        Row ``k`` of ``start``/``end`` belongs to copy ``ids[k]``; shapes of ``body``'s
        collision group are ignored.
        """
        out = np.full(ids.size, np.nan)
        filt = pymunk.ShapeFilter(group=int(self._layout.groups[body]))
        for k, c in enumerate(ids.tolist()):
            hit = self._copies[c].space.segment_query_first(
                (start[k, 0], start[k, 1]), (end[k, 0], end[k, 1]), 0.0, filt
            )
            if hit is not None:
                out[k] = hit.alpha
        return out

    def body_at(self, env: int, x: float, y: float, tolerance: float) -> int | None:
        """Index of the moving body of copy ``env`` whose shapes are nearest (x, y)."""
        bodies = self._copies[env].bodies
        return nearest_body({int(b): bodies[b] for b in self._dyn}, x, y, tolerance)

    def close(self) -> None:
        """Stop the stepping threads (if any)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
