"""Which copies' body states a World holds fresh, and reading them (kelab.sim internal).

The backend's ``raw`` array ``(num_envs, n_bodies, 6)`` holds every copy's body states as
last read. :class:`BodyStates` keeps which rows are fresh (``valid``), reads stale ones in
one batch, predicts when a reader will ask (so a step's stepping threads read the state
right after it), refuses states that are no longer finite and keeps the joint state
derived from the rows (:class:`~kelab.sim.kinematics.JointCache`). Reading never changes
the physics.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kelab._numpy import count_nonzero
from kelab.sim.kinematics import JointCache, joint_state
from kelab.sim.physics._backend import Backend
from kelab.sim.physics._compile import Layout
from kelab.sim.physics._limits import (
    STATE_BOUND,
    STATE_LIMITS,
    STATE_POSITION_MAX,
    STATE_SPEED_MAX,
)

#: Name and unit of each body state column, for messages.
_COLUMNS = (("x", "m"), ("y", "m"), ("angle", "rad"), ("vx", "m/s"), ("vy", "m/s"), ("w", "rad/s"))


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
        backend.reset_joints = self.joints.reset_tables
        # state-read prediction: physics steps since a reader last asked for the state,
        # and the gap between its last two requests (the step reads the state
        # right after the step that is expected to be read; never changes results)
        self.since_read = 0
        self.read_period = 0
        #: Copies the last step's threads read (their limits are checked after it).
        self.read_in_step = every[:0]
        #: Copies whose state left the limits (or is not finite): no step until reset.
        self.halted = np.zeros(n, dtype=bool)
        self.halted_any = False
        self.halted_step = 0
        # the static bodies' rows never change (never read): whether they are within the
        # fast check's bound, once, so that a read of the moving bodies that found every
        # value within it (``backend.read_within``) needs no second look at ``raw``
        static = backend.raw[:, ~layout.dynamic]
        self._static_within = static.size == 0 or bool(
            -STATE_BOUND <= static.min() and static.max() <= STATE_BOUND
        )

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
        if count_nonzero(self.valid) != self.n:  # (cheaper than .all(): every read)
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
        if count_nonzero(jc.valid) != self.n:
            bad = np.flatnonzero(~jc.valid)
            rows: slice | np.ndarray = slice(None) if bad.size == self.n else bad
            jc.pos[rows], jc.vel[rows] = joint_state(self.layout, self.backend.raw[rows])
            jc.valid[rows] = True
        return jc.pos, jc.vel

    def out_of_limits(
        self, ids: np.ndarray, within: bool = False
    ) -> tuple[list[int], list[str], bool] | None:
        """Copies ``ids`` (just read) whose bodies left the limits, or None if none did.

        One pass (a min and a max over the rows) when every value is within ``STATE_BOUND``;
        only otherwise are the columns compared with their own limits
        (``_limits.STATE_LIMITS``; the angle is free but must be finite). ``within``: the
        read of every copy's moving bodies found each value within ``STATE_BOUND``
        already (the shard threads check while they read, in C): then, the static rows
        being within it too, that pass is skipped (the same answer).

        Returns:
            ``(copies, bodies, finite)``: the copies out, ``"'path' in copy c (y = -1e+08
            m)"`` for each body out (its largest excess), and whether every value is finite.
        """
        if ids.size == 0 or self.backend.raw.size == 0:  # no copies, or no bodies at all
            return None
        all_rows = ids.size == self.n
        if within and all_rows and self._static_within:
            return None
        sub = self.backend.raw if all_rows else self.backend.raw[ids]
        if -STATE_BOUND <= sub.min() and sub.max() <= STATE_BOUND:  # False for NaN
            return None
        with np.errstate(invalid="ignore"):
            excess = np.abs(sub) / STATE_LIMITS  # > 1: out; NaN: not finite
        excess[..., 2] = np.where(np.isfinite(sub[..., 2]), 0.0, np.nan)
        bad = ~(excess <= 1.0)
        out = bad.any(axis=2)
        if not out.any():
            return None  # only angles beyond STATE_BOUND: they are free
        rows = self.every if all_rows else ids
        names = self.layout.body_paths
        bodies = []
        for k, b in zip(*np.nonzero(out), strict=True):
            col = int(np.argmax(np.nan_to_num(excess[k, b], nan=np.inf)))
            name, unit = _COLUMNS[col]
            bodies.append(f"{names[b]!r} in copy {rows[k]} ({name} = {sub[k, b, col]:g} {unit})")
        return rows[out.any(axis=1)].tolist(), bodies, bool(np.isfinite(sub).all())

    def check_limits(self, step: int, ids: np.ndarray, within: bool = False) -> None:
        """Raise if a body of copies ``ids`` (just read after step ``step``) left the limits.

        ``within``: the read itself found every moving body's value within
        ``STATE_BOUND`` (``backend.read_within``, for every copy): nothing left to check.

        Those copies are halted: :meth:`refuse` raises the same error before any further
        step, until they are reset (:meth:`release`). A body out there would hang the
        packed layout's next step in C (see ``_limits.STATE_POSITION_MAX``), and the
        isolated layout steps the same way.

        Raises:
            FloatingPointError: Naming the copies and bodies, their values and the fix.
        """
        found = self.out_of_limits(ids, within)
        if found is None:
            return
        copies, bodies, finite = found
        self.halt(copies, step)
        if not finite:
            self.check_finite(step, ids)
        shown = ", ".join(bodies[:6]) + (f" and {len(bodies) - 6} more" if len(bodies) > 6 else "")
        raise FloatingPointError(
            f"World: body state must stay within the world's limits (|x|, |y| <= "
            f"{STATE_POSITION_MAX:g} m; |vx|, |vy| <= {STATE_SPEED_MAX:g} m/s; |w| <= "
            f"{STATE_SPEED_MAX:g} rad/s), got {shown} after step {step} in copies "
            f"{copies[:20]}{'...' if len(copies) > 20 else ''}; the simulation ran away (huge "
            "forces or efforts, a body falling with no ground): reset those copies "
            "(reset_envs / set_body_states) before stepping again (World.step refuses "
            "until then: a body that far would hang the physics)"
        )

    def halt(self, copies: list[int], step: int) -> None:
        """Refuse steps until ``copies`` are reset: they left the limits at ``step``."""
        self.halted_step = step
        self.halted[copies] = True
        self.halted_any = True

    def refuse(self) -> None:
        """Raise the error of the halted copies again (before a step; see check_limits).

        Raises:
            FloatingPointError: As :meth:`check_limits` did.
        """
        if self.halted_any:
            self.check_limits(self.halted_step, np.flatnonzero(self.halted))
            self.release(self.every)  # cannot happen: the halted rows are unchanged

    def release(self, ids: np.ndarray) -> None:
        """Copies ``ids`` were reset: they may step again."""
        if self.halted_any:
            self.halted[ids] = False
            self.halted_any = bool(self.halted.any())

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


class ReplayLimits:
    """Ends a snapshot's replay at the first step that leaves the limits (restore).

    The steps after it are skipped (they could hang in C). A World stops at such a step
    (``World.step`` refuses the next one), so one at the snapshot's last step is the
    state it was taken in, and one before it means no World took it.

    Args:
        states: The World's body states (halted where the last step left the limits).
        advance: One replayed physics step ``advance(dt, ids)``.
    """

    def __init__(self, states: BodyStates, advance: Callable[[float, np.ndarray], None]) -> None:
        self._states = states
        self._step = advance
        self._found: tuple[list[int], list[str], bool] | None = None
        self._skipped = 0
        states.release(states.every)

    def advance(self, dt: float, ids: np.ndarray) -> None:
        """Replay one step unless an earlier one left the limits; check it."""
        if self._found is not None:
            self._skipped += 1
            return
        self._step(dt, ids)
        self._found = self._states.out_of_limits(self._states.read_in_step)

    def finish(self, step: int) -> tuple[list[int], list[str], bool] | None:
        """After the replay to ``step``: what left the limits before the last step, or None.

        Returns:
            ``BodyStates.out_of_limits``'s answer for the step that left them early; at
            the last step those copies are halted instead and None is returned.
        """
        if self._found is not None and not self._skipped:
            self._states.halt(self._found[0], step)
            return None
        return self._found
