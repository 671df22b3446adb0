"""The contract between the World and a layout (kelab.sim internal).

A layout maps the World's copies onto pymunk spaces: ``"isolated"``
(:class:`kelab.sim.physics._isolated.IsolatedBackend`, one space per copy) and ``"packed"``
(:class:`kelab.sim.physics._packed.PackedBackend`, one space per thread shard). The World only
talks to them through :class:`Backend` (:func:`make_backend` builds the one a World asks
for); nothing in the World asks which layout it has.
Rows ``c * n_bodies + b`` name body ``b`` of copy ``c``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from kelab.sim.physics._compile import Layout
from kelab.sim.physics._friction import FrictionTable
from kelab.sim.physics._isolated import IsolatedBackend
from kelab.sim.physics._packed import PackedBackend
from kelab.sim.physics._params import HeldMasses
from kelab.sim.physics._shard import JointTables
from kelab.sim.physics._warm import WarmFormat, WarmParts
from kelab.sim.scene.scene import Scene


class Backend(Protocol):
    """What a layout provides: building, stepping, batched state I/O and queries."""

    name: str
    """The layout's name (``World(layout=...)``)."""
    raw: np.ndarray
    """``(num_envs, n_bodies, 6)`` x, y, angle, vx, vy, omega in copy frames, as last read."""
    spacing: float
    """Metres between copy origins in the display frame (``World.env_spacing``)."""
    origin_x: np.ndarray
    """``(num_envs,)`` x of each copy's origin in its space (contact points are there)."""
    on_read: Callable[..., None] | None
    """Called with the rows of :attr:`raw` just read (the World's joint cache); as
    ``on_read(rows, True)`` where the reader computed their joint state already: a reset
    with the tables of :attr:`reset_joints`, or a packed step with those bound by
    ``PackedBackend.bind_joints``."""
    reset_joints: Callable[[], JointTables | None] | None
    """Where set (the World's joint cache, ``JointCache.reset_tables``): the tables with
    which :meth:`reset_states` may compute the joint state of the rows it reads (None
    from it: not wanted)."""
    warm: WarmFormat | None
    """How a rebase carries a copy's warm starts over (kelab/sim/physics/_warm.py); None
    where the layout cannot (its copies share a space): its rebases are cold."""
    friction: FrictionTable | None
    """The friction model's coefficients per body row and regimes (physics/_friction.py);
    None where the scene needs no friction model (equal coefficients everywhere)."""
    friction_in_step: bool
    """Whether :meth:`step` chooses the friction regimes itself (the C helper); else the
    World does after each step (``_contacts.Contacts.update_friction``)."""
    read_within: bool
    """Whether the last :meth:`step` read every copy and found each moving body's value
    within ``_limits.STATE_BOUND`` as it read (the limits' fast check, done in C by the
    shard threads); False where not (or not known: the World then checks ``raw``)."""
    can_step_many: bool
    """Whether :meth:`step_many` runs: several steps of every copy in one job per thread
    shard, each step read and its limits' fast check done in C (the packed layout with
    the C helper)."""
    gravity_in_space: bool
    """Whether each copy has a space whose gravity :meth:`set_gravity` sets; else (copies
    share a space) the World applies a copy's own gravity as a force."""

    def read(self, ids: np.ndarray) -> np.ndarray:
        """Batch-read copies ``ids`` (or more) into :attr:`raw`; return the copies read."""
        ...

    def set_forces(self, ids: np.ndarray, forces: np.ndarray) -> None:
        """Hold forces ``(len(ids), n_bodies, 3)`` (fx, fy, torque), applied every step."""
        ...

    def step(self, dt: float, ids: np.ndarray) -> np.ndarray:
        """One physics step of copies ``ids``, then a read of them.

        Every step reads: the World checks the limits before the next one. Returns the
        copies read into :attr:`raw` (:meth:`stepped`).
        """
        ...

    def step_many(self, dt: float, count: int) -> int:
        """Up to ``count`` steps of every copy, as many :meth:`step` calls, in one job each.

        Only where :attr:`can_step_many`. Every step reads and checks the state against
        ``_limits.STATE_BOUND``; the steps stop after the first whose read was not within
        (:attr:`read_within` then False), so the World checks that state before any
        further step. Returns the steps taken (>= 1).
        """
        ...

    def stepped(self, ids: np.ndarray) -> np.ndarray:
        """The copies a step of copies ``ids`` advances (a shared space steps all)."""
        ...

    def rebuild(self, ids: np.ndarray, place: bool = True) -> None:
        """Make copies ``ids`` fresh (no contact or joint history).

        ``place``: at their initial poses (False: a state write follows).
        """
        ...

    def write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        """Write the moving bodies' poses and velocities of just rebuilt copies ``ids``."""
        ...

    def reset_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> bool:
        """:meth:`rebuild` copies ``ids`` (``place=False``), then :meth:`write_states`.

        Returns:
            Whether their rows of ``raw`` were read after the write (``on_read`` called),
            as :meth:`read` would; False: the caller reads them.
        """
        ...

    def bind_joints(self, tables: JointTables, due: Callable[[], bool]) -> bool:
        """Let multi-step jobs compute the joint state of the rows they read, in C.

        Whenever ``due()`` says so before such a step; ``on_read(rows, True)`` then says
        which rows. Returns whether the backend does (False: the owner computes it).
        """
        ...

    def capture_warm(self, ids: np.ndarray) -> list[np.ndarray]:
        """The warm starts of copies ``ids``, a vector each (only where :attr:`warm`)."""
        ...

    def apply_warm(self, ids: np.ndarray, parts: list[WarmParts], dt: float) -> None:
        """Give copies ``ids``, just rebuilt at their states, their (parsed) warm starts."""
        ...

    def set_friction(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Set the friction of the shapes of body rows ``rows``."""
        ...

    def set_masses(self, ids: np.ndarray, masses: np.ndarray) -> HeldMasses:
        """Give copies ``ids`` body masses ``(len(ids), n_bodies)`` (moments scale with them).

        Returns what the bodies then hold (``_params.HeldMasses``: masses, moments and
        the copies whose states must be read again).
        """
        ...

    def set_materials(
        self,
        ids: np.ndarray,
        friction: np.ndarray,
        reset_friction: np.ndarray,
        elasticity: np.ndarray | None,
        coefficients: np.ndarray | None,
    ) -> None:
        """Give copies ``ids`` their moving shapes' friction model values.

        ``(len(ids), moving bodies)``, the moving bodies in scene order: ``friction``
        now, ``reset_friction`` what a rebuild gives back, ``elasticity`` (None:
        unchanged); and the ``pre_solve`` callback's ``coefficients`` ``(len(ids), nb,
        3)`` (None where no contact pair is left to it).
        """
        ...

    def set_gravity(self, ids: np.ndarray, gravity: np.ndarray, own: np.ndarray) -> None:
        """Give copies ``ids`` gravity ``(len(ids), 2)`` (only where :attr:`gravity_in_space`).

        ``own``: whether it differs from the scene's (kept over rebuilds).
        """
        ...

    def set_velocities(self, ids: np.ndarray, velocities: np.ndarray) -> None:
        """Set the moving bodies' velocities ``(len(ids), nb, 3)`` without a rebuild."""
        ...

    def arbiters(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The last step's arbiters of copies ``ids``: rows of A and B, counts, floats."""
        ...

    def friction_arbiters(
        self, ids: np.ndarray, codes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last step's contacts between friction bodies and the main static material.

        ``codes`` per body: 1 friction body, 2 main static. Returns rows, counts, floats.
        """
        ...

    def contact_states(self, rows: np.ndarray) -> np.ndarray | None:
        """Fresh states ``(m, 6)`` of body rows, or None.

        x in their space's frame (as contact points are), :attr:`raw` untouched. None
        where the layout reads whole copies instead (the World then reads the stale ones).
        """
        ...

    def segment_first(
        self, body: int, start: np.ndarray, end: np.ndarray, ids: np.ndarray
    ) -> np.ndarray:
        """Alpha of the first hit of one ray per copy of ``ids`` (NaN: none).

        It ignores the shapes of ``body``'s robot or body.
        """
        ...

    def body_at(self, env: int, x: float, y: float, tolerance: float) -> int | None:
        """Index of the moving body of copy ``env`` under (x, y) (copy frame), or None."""
        ...

    def close(self) -> None:
        """Stop the stepping threads (if any)."""
        ...


def make_backend(
    layout: str, scene: Scene, lay: Layout, num_envs: int, num_threads: int, env_spacing: float
) -> Backend:
    """The backend of ``layout`` (``"isolated"`` or ``"packed"``) for a World's copies.

    Raises:
        ValueError: Where the copies would not fit (memory; the packed layout's capacity
            at its spacing, ``env_spacing`` rounded up to a power of two).
    """
    if layout == "packed":
        return PackedBackend(scene, lay, num_envs, num_threads, float(env_spacing))
    return IsolatedBackend(scene, lay, num_envs, num_threads, float(env_spacing))
