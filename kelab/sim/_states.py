"""Which copies' body states a World holds fresh, and reading them (kelab.sim internal).

The backend's ``raw`` array ``(num_envs, n_bodies, 6)`` holds every copy's body states as
last read. :class:`BodyStates` keeps which rows are fresh (``valid``), reads stale ones in
one batch, predicts when a reader will ask (so a step's stepping threads read the state
right after it), refuses states that are no longer finite and keeps the joint state
derived from the rows (:class:`~kelab.sim.kinematics.JointCache`). Reading never changes
the physics.
"""

from __future__ import annotations

import numpy as np

from kelab.sim._backend import Backend
from kelab.sim._compile import Layout
from kelab.sim.kinematics import JointCache, joint_state


class BodyStates:
    """The body-state cache of a World's copies.

    Args:
        layout: The compiled scene.
        every: ``arange(num_envs)``, read-only (the World's every-copy indices).
        backend: The World's layout; its ``on_read`` is set to the joint cache's update.
    """

    def __init__(self, layout: Layout, every: np.ndarray, backend: Backend) -> None:
        self.layout = layout
        self.backend = backend
        self.every = every
        self.n = n = every.size
        #: ``(num_envs,)`` copies whose rows of ``backend.raw`` are fresh.
        self.valid = np.zeros(n, dtype=bool)
        # joint state per copy, valid where joints.valid; every batch read of a copy
        # refreshes (computed right after the read once joints have been asked for) or
        # invalidates it (a separate object: the backend must not hold the World)
        self.joints = JointCache(layout, n, backend)
        backend.on_read = self.joints.update
        # state-read prediction: physics steps since a reader last asked for the state,
        # and the gap between its last two requests (the step reads the state
        # right after the step that is expected to be read; never changes results)
        self.since_read = 0
        self.read_period = 0
        #: Copies the last step's threads read (their finiteness is checked after it).
        self.read_in_step = every[:0]

    @property
    def raw(self) -> np.ndarray:
        """``(num_envs, nb, 6)`` states in copy frames (x, y, a, vx, vy, w), as last read."""
        return self.backend.raw

    def read(self, ids: np.ndarray) -> None:
        """Batch-read position, angle, velocity and angular velocity of copies ``ids``."""
        done = self.backend.read(ids)
        self.valid[done] = True

    def read_quiet(self, ids: np.ndarray) -> None:
        """Read copies ``ids`` for the World's own bookkeeping (no joint state computed)."""
        self.joints.eager = False
        self.read(ids)
        self.joints.eager = True

    def ensure(self, step: int) -> None:
        """Make every copy's state fresh for a reader (``step``: the World's step count).

        Raises:
            FloatingPointError: As :meth:`check_finite`.
        """
        if self.since_read:
            self.read_period = self.since_read
            self.since_read = 0
        if not self.valid.all():
            stale = np.flatnonzero(~self.valid)
            self.read(stale)
            self.check_finite(step, stale)

    def fresh(self, ids: np.ndarray) -> np.ndarray:
        """Fresh body states of copies ``ids`` (read where stale), ``(len(ids), nb, 6)``.

        Every copy: ``backend.raw`` itself; else a new array.
        """
        if not self.valid[ids].all():
            self.read(ids[~self.valid[ids]])
        return self.backend.raw if ids.size == self.n else self.backend.raw[ids]

    def joint_state(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Every copy's joint positions and velocities ``(num_envs, n_joints)`` (no copies).

        From now on every read computes the joint state of the rows it read.
        ``step``: the World's step count (for :meth:`ensure`).
        """
        jc = self.joints
        jc.wanted = True
        self.ensure(step)
        if not jc.valid.all():
            bad = np.flatnonzero(~jc.valid)
            rows: slice | np.ndarray = slice(None) if bad.size == self.n else bad
            jc.pos[rows], jc.vel[rows] = joint_state(self.layout, self.backend.raw[rows])
            jc.valid[rows] = True
        return jc.pos, jc.vel

    def check_finite(self, step: int, ids: np.ndarray | None = None) -> None:
        """Raise if the state just read (copies ``ids``, None: all) holds NaN or inf.

        One pass over the rows (no warnings, whatever the values); only when it fails are
        the rows searched for the bodies to name.

        Raises:
            FloatingPointError: Naming the copies and bodies whose state is not finite.
        """
        raw = self.backend.raw
        if not (ids is None or ids.size == self.n):
            raw = raw[ids]
        ok = np.isfinite(raw)
        if ok.all():
            return
        rows = np.arange(self.n) if ids is None or ids.size == self.n else ids
        bad = ~ok.all(axis=2)
        copies = rows[bad.any(axis=1)].tolist()
        names = self.layout.body_paths
        pairs = [f"{names[b]!r} in copy {rows[k]}" for k, b in zip(*np.nonzero(bad), strict=True)]
        shown = ", ".join(pairs[:6]) + (f" and {len(pairs) - 6} more" if len(pairs) > 6 else "")
        raise FloatingPointError(
            f"World: body state must stay finite, got NaN or inf after step {step} in "
            f"copies {copies[:20]}{'...' if len(copies) > 20 else ''}: {shown}; the simulation "
            "diverged (extreme masses, sizes, forces or dt): reset those copies "
            "(reset_envs / set_body_states) before reading or stepping them again"
        )
