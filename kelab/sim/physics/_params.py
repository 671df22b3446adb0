"""Per-copy physical parameters written into a layout's pymunk objects (internal).

The World keeps each copy's masses, materials, gravity and actuator strengths as tables
(kelab/sim/_params.py) and hands the layouts what pymunk holds of them: shape masses
(:class:`MassWriter`: a body's mass is the sum of its shapes', split by area as the scene
compiles it, so its moment of inertia scales with it), shape friction and elasticity, a
space's gravity and body velocities. Both layouts use these helpers with their own
pointer tables.

Where KELab's C helper is built (kelab/sim/physics/_native_params.c), a batch of shapes or
bodies is written in one call (``write_shapes``, ``write_velocities``): the same Chipmunk
setters with the same values, each body's shapes in the same order, so the same bits as the
per-shape calls from Python, which run without it (``KELAB_NO_NATIVE=1``, or
:data:`USE_C` off; tests/sim/test_world_params.py compares the two).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._compile import Layout, make_body, make_shapes, mass_weights
from kelab.sim.physics._guard import native_module
from kelab.sim.scene.scene import Scene

#: ``body_ptr(copy, body)``: the ``cpBody *`` of one moving body of one copy.
BodyPtr = Callable[[int, int], object]

#: Whether the C helper writes the parameters where it is built (tests turn it off to
#: compare with the per-shape calls from Python in one process). Read when a layout makes
#: its :class:`ShapeRows` (the first parameter set).
USE_C = True

#: The shape fields ``write_shapes`` sets (its ``what``, kelab/sim/physics/_native_params.c).
MASS, FRICTION, ELASTICITY = 0, 1, 2
#: Chipmunk's setter of each field (the per-shape path).
_SETTERS = {
    MASS: cp.shape_set_mass,
    FRICTION: cp.shape_set_friction,
    ELASTICITY: cp.shape_set_elasticity,
}


def selector(index: np.ndarray) -> slice | np.ndarray:
    """Sorted distinct indices as a slice where they are consecutive, else as they are.

    numpy takes a slice of a small array several times faster than a list of indices.
    """
    if index.size and index[-1] - index[0] == index.size - 1:
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


def writer_module() -> object | None:
    """The C helper that writes parameters in batches, or None (the per-shape calls)."""
    return native_module() if USE_C else None


class ShapeRows:
    """The shapes of every body row ``copy * n_bodies + body`` (moving bodies' only).

    Args:
        table: Per row, its ``cpShape *`` (an empty tuple for static bodies).
        nb: Bodies a copy.
        module: The C helper (:func:`writer_module`) or None: the per-shape calls.
    """

    def __init__(self, table: list[tuple], nb: int, module: object | None = None) -> None:
        self.table = table
        self.nb = nb
        #: The C helper writing these shapes, or None.
        self.module = module
        counts = np.fromiter(map(len, table), dtype=np.int64, count=len(table))
        self._one = counts == 1
        #: Per row, its one shape's pointer where it has exactly one, else None (an object
        #: array: fancy indexing picks the pointers of many rows at once).
        self.single = np.fromiter(
            (t[0] if len(t) == 1 else None for t in table), dtype=object, count=len(table)
        )
        # the C helper's view: every shape's address, row after row
        self._counts = counts
        self._starts = np.zeros(len(table) + 1, dtype=np.int64)
        np.cumsum(counts, out=self._starts[1:])
        addrs = [cp.address(p) for t in table for p in t] if module is not None else []
        self._addrs = np.array(addrs, dtype=np.uint64)
        self._single_addr = np.zeros(len(table), dtype=np.uint64)
        if module is not None:
            self._single_addr[self._one] = self._addrs[self._starts[:-1][self._one]]
        self._grids: dict[bytes, Grids] = {}
        # the same by the identity of a read-only ``cols`` (callers pass the same array)
        self._held: dict[int, tuple[np.ndarray, Grids]] = {}

    def call(self, fn: object, rows: np.ndarray, values: np.ndarray) -> None:
        """``fn(shape, value)`` for every shape of body rows ``rows`` (one value a row).

        Rows of one shape are handed to the C calls by ``map`` (no Python loop).
        """
        if self._one[rows].all():
            deque(map(fn, self.single[rows], values.tolist()), maxlen=0)
            return
        for r, v in zip(rows.tolist(), values.tolist(), strict=True):
            for sp in self.table[r]:
                fn(sp, v)

    def addresses(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Every shape of body rows ``rows``, row after row: ``(addresses, shapes a row)``.

        The counts are None where every row has one shape. Only with the C helper
        (:attr:`module`).
        """
        if self._one[rows].all():
            return self._single_addr[rows], None
        counts = self._counts[rows]
        ends = np.cumsum(counts)
        flat = np.repeat(self._starts[rows] - (ends - counts), counts) + np.arange(ends[-1])
        return self._addrs[flat], counts

    def write(self, what: int, rows: np.ndarray, values: np.ndarray) -> None:
        """Set field ``what`` (:data:`FRICTION`, ...) of every shape of body rows ``rows``.

        One value a row; with the C helper one call, else Chipmunk's setter per shape.
        """
        if self.module is None:
            self.call(_SETTERS[what], rows, values)
            return
        if rows.size == 0:
            return
        addrs, counts = self.addresses(rows)
        v = np.ascontiguousarray(values, dtype=np.float64)
        self.module.write_shapes(what, addrs, v if counts is None else np.repeat(v, counts))  # type: ignore[attr-defined]

    def write_bodies(
        self, what: int, ids: np.ndarray, cols: np.ndarray, values: np.ndarray
    ) -> tuple[bool, np.ndarray | None]:
        """:meth:`write` for bodies ``cols`` (ascending) of copies ``ids`` (int64).

        ``values``: ``(len(ids), len(cols))`` in the order of ``cols``, or the copies'
        whole rows ``(len(ids), n_bodies)`` of which the columns ``cols`` are written
        (where ``cols`` is every body, the two are the same). The rows copy by copy,
        each copy's bodies in the order of ``cols`` (as :meth:`write` takes them); with
        the C helper and one shape a body, one ``write_rows`` call over a table of their
        addresses made once for ``cols``.

        Returns:
            For masses written by the C helper ``(True, moved)``: ``moved`` per copy
            whether a body's position moved by a rounding (:class:`HeldMasses`), None
            where none did; else ``(False, None)`` (not known).
        """
        grids = self._grids_of(cols)
        whole = values.shape[1] == self.nb
        grid = grids.whole if whole else grids.narrow
        if grid is None:
            rows = (ids[:, None] * self.nb + cols).reshape(-1)
            self.write(what, rows, (values[:, grids.sel] if whole else values).reshape(-1))
            return False, None
        v = np.ascontiguousarray(values, dtype=np.float64)
        at = np.ascontiguousarray(ids, dtype=np.int64)  # as they are, where they are
        if what != MASS:
            self.module.write_rows(what, grid, at, v)  # type: ignore[attr-defined]
            return False, None
        moved = np.empty(v.shape, dtype=np.uint8)
        count = self.module.write_rows(what, grid, at, v, moved)  # type: ignore[attr-defined]
        return True, moved.any(axis=1) if count else None

    def _grids_of(self, cols: np.ndarray) -> Grids:
        """The tables of the one shape of bodies ``cols`` of each copy (:class:`Grids`).

        Made once per ``cols``, found by identity where ``cols`` is read-only (the
        callers pass the same array each time).
        """
        hit = self._held.get(id(cols))
        if hit is not None and hit[0] is cols:
            return hit[1]
        key = cols.tobytes()
        got = self._grids.get(key)
        if got is None:
            rows = np.arange(0, len(self.table), self.nb)[:, None] + cols
            narrow = whole = None
            if self.module is not None and bool(self._one[rows].all()):
                narrow = np.ascontiguousarray(self._single_addr[rows])
                whole = np.zeros((rows.shape[0], self.nb), dtype=np.uint64)
                whole[:, cols] = narrow
            got = self._grids[key] = Grids(selector(cols), narrow, whole)
        if not cols.flags.writeable:  # a read-only array: kept, its id stays its own
            self._held[id(cols)] = (cols, got)
        return got


class Grids(NamedTuple):
    """The one shape of some bodies of every copy, for the C helper's ``write_rows``."""

    sel: slice | np.ndarray
    """The bodies, as a selector of a copy's row (:func:`selector`)."""
    narrow: np.ndarray | None
    """``(num_envs, len(bodies))`` their ``cpShape *`` (uint64); None without the C
    helper or where one of them has several shapes."""
    whole: np.ndarray | None
    """``(num_envs, n_bodies)`` the same in the bodies' columns, 0 (no write) in the
    others: whole rows of values written as they are."""


@dataclass(frozen=True)
class HeldMasses:
    """What the bodies of some copies hold after a mass write (:class:`MassWriter`)."""

    masses: np.ndarray
    """``(len(ids), n_bodies)`` kg."""
    moments: np.ndarray
    """``(len(ids), n_bodies)`` kg m^2."""
    moved: np.ndarray | None
    """``(len(ids),)`` bool: copies a body of which may sit elsewhere by a rounding (the
    write realigns a body on its centre of gravity, cpBodyAccumulateMassFromShapes):
    their states must be read again. All of them where the write does not tell; None
    where it tells that none did."""


class MassWriter:
    """Writes per-copy body masses as shape masses, and says what the bodies then hold.

    Args:
        scene: The scene (each body's shapes).
        layout: Its compiled form (which bodies have mass).
    """

    def __init__(self, scene: Scene, layout: Layout) -> None:
        nb = len(layout.body_paths)
        self._nb = nb
        #: The bodies that have mass (dynamic ones): a static or kinematic body has none.
        self.bodies = [b for b in range(nb) if layout.mass[b] > 0.0]
        self._weights = {b: mass_weights(scene.bodies[b].spec) for b in self.bodies}
        self._multi = [b for b in self.bodies if len(scene.bodies[b].spec.shapes) > 1]
        self._one = np.array([b for b in self.bodies if b not in self._multi], dtype=np.int64)
        self._one.flags.writeable = False  # ShapeRows finds its tables by its identity
        # the bodies of several shapes, as arrays: their shapes' weights one after another
        self._multi_cols = np.array(self._multi, dtype=np.int64)
        self._multi_weights = np.concatenate(
            [np.asarray(self._weights[b], dtype=np.float64) for b in self._multi] or [np.zeros(0)]
        )
        # a one-shape body's moment is exactly mass * its shape's moment at mass 1 (the
        # product Chipmunk's accumulation makes); bodies of several shapes are read back
        self._unit = np.zeros(nb)
        for b in self.bodies:
            if b in self._multi:
                continue
            inst = scene.bodies[b]
            shape = make_shapes(make_body(inst.spec, inst.pose), inst.spec)[0]
            shape.mass = 1.0
            self._unit[b] = shape.moment

    def write(
        self, ids: np.ndarray, masses: np.ndarray, shapes: ShapeRows, body_ptr: BodyPtr
    ) -> HeldMasses:
        """Give copies ``ids`` the masses ``(len(ids), n_bodies)`` (bodies with mass only).

        Each shape carries its share (``float(m * weight)``, as the scene compiled it).
        """
        moved: np.ndarray | None = None
        if self._one.size:  # one shape: it carries the body's mass, m exactly
            told, moved = shapes.write_bodies(MASS, ids, self._one, masses)
            if not told:
                moved = np.ones(ids.size, dtype=bool)
        if self._multi and shapes.module is not None:
            more = self._write_several(ids, masses, shapes)
            if more is not None:
                moved = more if moved is None else moved | more
        elif self._multi:
            moved = np.ones(ids.size, dtype=bool)
            set_mass = cp.shape_set_mass
            for c, row in zip(ids.tolist(), masses.tolist(), strict=True):
                for b in self._multi:
                    for sp, w in zip(shapes.table[c * self._nb + b], self._weights[b], strict=True):
                        set_mass(sp, float(row[b] * w))
        moments = masses * self._unit
        if not self._multi:  # every body carries m exactly: the masses given
            return HeldMasses(masses, moments, moved)
        held = masses.copy()
        for k, c in enumerate(ids.tolist()):
            for b in self._multi:
                bp = body_ptr(c, b)
                held[k, b] = cp.body_get_mass(bp)
                moments[k, b] = cp.body_get_moment(bp)
        return HeldMasses(held, moments, moved)

    def _write_several(self, ids: np.ndarray, masses: np.ndarray, shapes: ShapeRows) -> np.ndarray:
        """The bodies of several shapes in one call of the C helper.

        Per copy, body by body, each shape ``m * weight`` (the values and order of
        :meth:`write`'s loop). Returns per copy whether one of them moved by a rounding
        (None: none did).
        """
        multi = self._multi_cols
        addrs, counts = shapes.addresses((ids[:, None] * self._nb + multi).reshape(-1))
        if addrs.size != self._multi_weights.size * ids.size or counts is None:
            raise RuntimeError("a body's shapes are not the scene's (the layout's table)")
        m = np.repeat(masses[:, multi].reshape(-1), counts) * np.tile(self._multi_weights, ids.size)
        moved = np.empty(addrs.size, dtype=np.uint8)
        count = shapes.module.write_shapes(MASS, addrs, m, moved)  # type: ignore[attr-defined]
        return moved.reshape(ids.size, -1).any(axis=1) if count else None


def write_materials(
    ids: np.ndarray,
    moving: np.ndarray,
    shapes: ShapeRows,
    friction: np.ndarray,
    elasticity: np.ndarray | None,
) -> None:
    """Set the friction (and elasticity) of the moving bodies' shapes of copies ``ids``.

    ``moving``: the moving bodies (int64; read-only and the same array each call, the
    shape table of :class:`ShapeRows` is then found by its identity). ``friction`` and
    ``elasticity`` are ``(len(ids), len(moving))`` pymunk shape values
    (kelab/sim/physics/_compile.py ``shape_values``); None keeps the elasticity.
    """
    shapes.write_bodies(FRICTION, ids, moving, friction)
    if elasticity is not None:
        shapes.write_bodies(ELASTICITY, ids, moving, elasticity)


def write_velocities(
    ids: np.ndarray,
    moving: Sequence[int],
    body_ptr: BodyPtr,
    velocities: np.ndarray,
    module: object | None = None,
    addrs: Callable[[], np.ndarray] | None = None,
) -> None:
    """Set the moving bodies' velocities ``(len(ids), n_bodies, 3)`` of copies ``ids``.

    vx, vy of the centre of mass and omega, with Chipmunk's setters (nothing else of the
    body changes: no rebuild, its contacts and joints carry on). With the C helper
    (``module``) one call, ``addrs()`` giving every copy's moving bodies' ``cpBody``
    addresses, ``(num_envs, len(moving))``; else the setters called from Python.
    """
    if module is not None and addrs is not None:
        v = np.ascontiguousarray(velocities[:, moving].reshape(-1, 3))
        bodies = np.ascontiguousarray(addrs()[ids].reshape(-1))
        module.write_velocities(bodies, v)  # type: ignore[attr-defined]
        return
    cols = list(moving)
    ptrs = [body_ptr(c, b) for c in ids.tolist() for b in cols]
    v = velocities[:, cols].reshape(-1, 3).tolist()
    deque(map(cp.body_set_velocity, ptrs, [(x, y) for x, y, _ in v]), maxlen=0)
    deque(map(cp.body_set_angular_velocity, ptrs, [w for _, _, w in v]), maxlen=0)
