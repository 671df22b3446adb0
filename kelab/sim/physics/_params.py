"""Per-copy physical parameters written into a layout's pymunk objects (internal).

The World keeps each copy's masses, materials, gravity and actuator strengths as tables
(kelab/sim/_params.py) and hands the layouts what pymunk holds of them: shape masses
(:class:`MassWriter`: a body's mass is the sum of its shapes', split by area as the scene
compiles it, so its moment of inertia scales with it), shape friction and elasticity, a
space's gravity and body velocities. Both layouts use these helpers with their own
pointer tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._compile import Layout, make_body, make_shapes, mass_weights
from kelab.sim.scene.scene import Scene

#: ``shape_ptrs(copy, body)``: the ``cpShape *`` of one body of one copy.
ShapePtrs = Callable[[int, int], Sequence[object]]
#: ``body_ptr(copy, body)``: the ``cpBody *`` of one moving body of one copy.
BodyPtr = Callable[[int, int], object]


class MassWriter:
    """Writes per-copy body masses as shape masses, and says what the bodies then hold.

    Args:
        scene: The scene (each body's shapes).
        layout: Its compiled form (which bodies have mass).
    """

    def __init__(self, scene: Scene, layout: Layout) -> None:
        nb = len(layout.body_paths)
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
        self, ids: np.ndarray, masses: np.ndarray, shape_ptrs: ShapePtrs, body_ptr: BodyPtr
    ) -> tuple[np.ndarray, np.ndarray]:
        """Give copies ``ids`` the masses ``(len(ids), n_bodies)`` (bodies with mass only).

        Each shape carries its share (``float(m * weight)``, as the scene compiled it).

        Returns:
            ``(masses, moments)`` the bodies now hold, ``(len(ids), n_bodies)`` each.
        """
        set_mass = cp.shape_set_mass
        weights = self._weights
        for c, row in zip(ids.tolist(), masses.tolist(), strict=True):
            for b in self.bodies:
                sps = shape_ptrs(c, b)
                if len(sps) == 1:
                    set_mass(sps[0], row[b])
                else:
                    for sp, w in zip(sps, weights[b], strict=True):
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
    shape_ptrs: ShapePtrs,
    friction: np.ndarray,
    elasticity: np.ndarray | None,
) -> None:
    """Set the friction (and elasticity) of the moving bodies' shapes of copies ``ids``.

    ``friction`` and ``elasticity`` are ``(len(ids), n_bodies)`` pymunk shape values
    (kelab/sim/physics/_compile.py ``shape_values``); None keeps the elasticity.
    """
    set_f, set_e = cp.shape_set_friction, cp.shape_set_elasticity
    fr = friction.tolist()
    el = None if elasticity is None else elasticity.tolist()
    for k, c in enumerate(ids.tolist()):
        for b in moving:
            for sp in shape_ptrs(c, b):
                set_f(sp, fr[k][b])
                if el is not None:
                    set_e(sp, el[k][b])


def write_velocities(
    ids: np.ndarray, moving: Sequence[int], body_ptr: BodyPtr, velocities: np.ndarray
) -> None:
    """Set the moving bodies' velocities ``(len(ids), n_bodies, 3)`` of copies ``ids``.

    vx, vy of the centre of mass and omega, with Chipmunk's setters (nothing else of the
    body changes: no rebuild, its contacts and joints carry on).
    """
    set_v, set_w = cp.body_set_velocity, cp.body_set_angular_velocity
    rows = velocities.tolist()
    for k, c in enumerate(ids.tolist()):
        for b in moving:
            bp = body_ptr(c, b)
            vx, vy, w = rows[k][b]
            set_v(bp, (vx, vy))
            set_w(bp, w)
