"""The friction model's coefficients and regimes as tables, run in C (internal).

The friction model (docs/world.md, "Materials") has two rules that pymunk's per-shape
values cannot hold by themselves:

- **the pair rule**: a contact between two moving shapes, or a moving shape and a static
  shape of another material, takes the static combination of the two materials while
  the relative tangential speed at its first contact point is below
  ``STATIC_SPEED_THRESHOLD``, else the dynamic one, and the larger restitution. It is
  decided per contact, before the solver: Chipmunk's pre-solve.
- **the regime rule**: a moving body touching the scene's main static material sticks or
  slides as a whole, decided after every step from its contacts with that material
  (the shapes then carry the combined value of the regime; the hysteresis and the
  one-step lag are in ``_contacts.Contacts.update_friction``).

Both read one :class:`FrictionTable` per World: one row per body of every copy (``copy *
n_bodies + body``, as the backends name bodies), then one row per body shared by the
copies (a packed shard's stretched ground: ``num_envs * n_bodies + body``), with the
columns :data:`COLUMNS`; and the regimes, one flag per copy row. Materials that differ
per copy are rows of that table: what reads it (C or Python) needs no other mechanism.

Where KELab's C helper is built (kelab/sim/physics/_native.c, ``Friction``), both rules
run there without Python per contact: the pair rule as the collision handler's pre-solve
function (inside ``cpSpaceStep``, no GIL), the regime rule right after each step over the
space's cached arbiters (GIL released; in the packed layout in the shard's own thread).
Their arithmetic is the Python rules' own (_compile.pre_solve, Contacts.update_friction),
in the same order: the same bits (tests/sim/test_friction_native.py). Without the helper
the Python rules read the same table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._compile import (
    SLIDE_SPEED_THRESHOLD,
    STATIC_SPEED_THRESHOLD,
    Layout,
)
from kelab.sim.physics._guard import native_module

#: Whether the friction model runs in the C helper where it is built (tests turn it off
#: to compare with the Python rules in one process).
USE_C = True


def friction_module() -> object | None:
    """The C helper that runs the friction model, or None (the Python rules run)."""
    return native_module() if USE_C else None


#: The table's columns: per row, sqrt(static friction), sqrt(dynamic friction) and the
#: restitution of its material (the pair rule), then the friction its shapes carry while
#: sticking / sliding against the main static material (the regime rule).
COLUMNS = ("static", "dynamic", "restitution", "stick", "slide")
STATIC, DYNAMIC, RESTITUTION, STICK, SLIDE = range(len(COLUMNS))


class FrictionTable:
    """A World's friction coefficients per body row and its bodies' friction regimes.

    Args:
        layout: The compiled scene (its per-body values fill every copy's rows).
        num_envs: Copies.
    """

    def __init__(self, layout: Layout, num_envs: int) -> None:
        nb = len(layout.body_paths)
        self.nb = nb
        self.num_envs = num_envs
        per_body = np.zeros((nb, len(COLUMNS)))
        per_body[:, STATIC : RESTITUTION + 1] = layout.pair_values
        per_body[:, STICK] = layout.stick_value
        per_body[:, SLIDE] = layout.slide_value
        #: ``((num_envs + 1) * n_bodies, 5)``: the coefficients of every body row (the last
        #: ``n_bodies`` rows: bodies shared by the copies).
        self.coef = np.ascontiguousarray(np.tile(per_body, (num_envs + 1, 1)))
        #: ``(num_envs * n_bodies,)`` True where a body sticks (static friction).
        self.stick = np.ones(num_envs * nb, dtype=bool)
        fric = layout.dynamic & (layout.stick_value != layout.slide_value)
        #: Per body: 1 if its regime is chosen, 2 if of the main static material, else 0.
        self.codes = np.zeros(nb, dtype=np.int64)
        self.codes[fric] = 1
        self.codes[layout.main_static] = 2
        #: Whether the regime rule runs (bodies whose two values differ, a main static
        #: material to touch).
        self.chooses = bool(layout.needs_handler and fric.any() and layout.main_static.any())
        #: Whether the pair rule runs (some collision-type pair is left to it).
        self.pairs = bool(layout.needs_handler and layout.callback_pairs)
        self._cog = np.ascontiguousarray(layout.cog, dtype=np.float64)
        #: Whether a body whose regime is chosen has its centre of gravity off its origin.
        self.has_cog = bool(np.any(layout.cog[fric] != 0.0))
        self._pairs = layout.callback_pairs

    def set_pairs(self, ids: np.ndarray, bodies: list[int], values: np.ndarray) -> None:
        """Give the pair rule copies' own coefficients (per-copy materials).

        ``values``: ``(len(ids), n_bodies, 3)`` sqrt(static), sqrt(dynamic) friction and
        restitution; the rows of ``bodies`` (the moving ones) of copies ``ids`` take them.
        The regime rule's columns are views the World writes (``Contacts.stick_table``).
        """
        rows = (np.asarray(ids)[:, None] * self.nb + np.asarray(bodies, dtype=np.int64)).ravel()
        self.coef[rows, STATIC : RESTITUTION + 1] = values[:, bodies].reshape(-1, 3)

    def shared_row(self, body: int) -> int:
        """The row of a body shared by the copies (a packed shard's stretched ground)."""
        return self.num_envs * self.nb + body

    def native(
        self,
        module: object,
        bodies: Sequence[tuple[int, int]],
        shapes: Sequence[Sequence[object]],
        origins: np.ndarray,
    ) -> object:
        """The C helper's ``Friction`` over some spaces' bodies.

        Args:
            module: The C helper (``_guard.native_module()``).
            bodies: ``(cpBody address, row)`` of every body with shapes in those spaces.
            shapes: Per copy row (``num_envs * n_bodies``), the ``cpShape *`` whose
                friction the regime rule sets (empty where none).
            origins: ``(num_envs,)`` x of each copy's origin in its space.
        """
        keys = np.array([a for a, _ in bodies], dtype=np.uint64)
        rows = np.array([r for _, r in bodies], dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        counts = np.array([len(s) for s in shapes], dtype=np.int64)
        starts = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        flat = np.array([cp.address(p) for own in shapes for p in own], dtype=np.uint64)
        return module.Friction(
            np.ascontiguousarray(keys[order]),
            np.ascontiguousarray(rows[order]),
            self.coef,
            self.codes,
            self._cog,
            np.ascontiguousarray(origins, dtype=np.float64),
            self.stick,
            starts,
            flat,
            STATIC_SPEED_THRESHOLD,
            SLIDE_SPEED_THRESHOLD,
            STATIC_SPEED_THRESHOLD * STATIC_SPEED_THRESHOLD,  # as pre_solve computes it
            self.has_cog,
        )

    def register(self, space: object, model: object) -> None:
        """Make ``model``'s pre-solve (C) the handler of a ``cpSpace *``'s pair types."""
        function, data = model.handler()
        for a, b in self._pairs:
            cp.set_pre_solve(space, a, b, function, data)
