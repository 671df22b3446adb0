"""Per-copy physical parameters written into a layout's pymunk objects (internal).

The World keeps each copy's masses, materials, gravity and actuator strengths as tables
(kelab/sim/_params.py) and hands the layouts what pymunk holds of them: shape masses
(:class:`MassWriter`: a body's mass is the sum of its shapes', split by area as the scene
compiles it, so its moment of inertia scales with it), shape friction and elasticity, a
space's gravity and body velocities. Both layouts use these helpers with their own
pointer tables.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._compile import Layout, make_body, make_shapes, mass_weights
from kelab.sim.scene.scene import Scene

#: ``body_ptr(copy, body)``: the ``cpBody *`` of one moving body of one copy.
BodyPtr = Callable[[int, int], object]


class ShapeRows:
    """The shapes of every body row ``copy * n_bodies + body`` (moving bodies' only).

    Args:
        table: Per row, its ``cpShape *`` (an empty tuple for static bodies).
    """

    def __init__(self, table: list[tuple]) -> None:
        self.table = table
        #: Per row, its one shape's pointer where it has exactly one, else None (an object
        #: array: fancy indexing picks the pointers of many rows at once).
        self.single = np.fromiter(
            (t[0] if len(t) == 1 else None for t in table), dtype=object, count=len(table)
        )
        self._one = np.array([len(t) == 1 for t in table], dtype=bool)

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
    ) -> tuple[np.ndarray, np.ndarray]:
        """Give copies ``ids`` the masses ``(len(ids), n_bodies)`` (bodies with mass only).

        Each shape carries its share (``float(m * weight)``, as the scene compiled it).

        Returns:
            ``(masses, moments)`` the bodies now hold, ``(len(ids), n_bodies)`` each.
        """
        set_mass = cp.shape_set_mass
        one = [b for b in self.bodies if b not in self._multi]
        if one:  # one shape: it carries the body's mass, m exactly
            rows = (ids[:, None] * self._nb + np.array(one)).reshape(-1)
            shapes.call(set_mass, rows, masses[:, one].reshape(-1))
        for c, row in zip(ids.tolist(), masses.tolist(), strict=True):
            for b in self._multi:
                for sp, w in zip(shapes.table[c * self._nb + b], self._weights[b], strict=True):
                    set_mass(sp, float(row[b] * w))
        held = masses.copy()
        moments = masses * self._unit
        for k, c in enumerate(ids.tolist()):
            for b in self._multi:
                bp = body_ptr(c, b)
                held[k, b] = cp.body_get_mass(bp)
                moments[k, b] = cp.body_get_moment(bp)
        return held, moments


def write_materials(
    ids: np.ndarray,
    moving: Sequence[int],
    shapes: ShapeRows,
    friction: np.ndarray,
    elasticity: np.ndarray | None,
) -> None:
    """Set the friction (and elasticity) of the moving bodies' shapes of copies ``ids``.

    ``friction`` and ``elasticity`` are ``(len(ids), n_bodies)`` pymunk shape values
    (kelab/sim/physics/_compile.py ``shape_values``); None keeps the elasticity.
    """
    nb = friction.shape[1]
    cols = np.asarray(moving, dtype=np.int64)
    rows = (ids[:, None] * nb + cols).reshape(-1)
    shapes.call(cp.shape_set_friction, rows, friction[:, cols].reshape(-1))
    if elasticity is not None:
        shapes.call(cp.shape_set_elasticity, rows, elasticity[:, cols].reshape(-1))


def write_velocities(
    ids: np.ndarray, moving: Sequence[int], body_ptr: BodyPtr, velocities: np.ndarray
) -> None:
    """Set the moving bodies' velocities ``(len(ids), n_bodies, 3)`` of copies ``ids``.

    vx, vy of the centre of mass and omega, with Chipmunk's setters (nothing else of the
    body changes: no rebuild, its contacts and joints carry on).
    """
    cols = list(moving)
    ptrs = [body_ptr(c, b) for c in ids.tolist() for b in cols]
    v = velocities[:, cols].reshape(-1, 3).tolist()
    deque(map(cp.body_set_velocity, ptrs, [(x, y) for x, y, _ in v]), maxlen=0)
    deque(map(cp.body_set_angular_velocity, ptrs, [w for _, _, w in v]), maxlen=0)
