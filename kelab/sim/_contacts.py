"""What a World's last physics step touched: contact sums and friction regimes (internal).

:class:`Contacts` reads the last step's arbiters from the backend (once per step for all
copies) and keeps what the World derives from them: the contact force and normal force
sums per body (``World.contact_forces``, contact sensors, rolling resistance) and, per
moving body, whether it sticks (static friction) or slides (dynamic friction) against
the scene's main static material (docs/world.md, "Materials"). Rows ``c * n_bodies + b``
name body ``b`` of copy ``c``, as in the backend.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kelab.sim.physics._backend import Backend
from kelab.sim.physics._compile import SLIDE_SPEED_THRESHOLD, STATIC_SPEED_THRESHOLD, Layout
from kelab.sim.physics._friction import SLIDE, STICK


class Contacts:
    """Per-step contact bookkeeping of every copy.

    Args:
        layout: The compiled scene.
        every: ``arange(num_envs)``, read-only (the World's every-copy indices).
        backend: The World's layout (arbiters, body states, shape friction).
    """

    def __init__(self, layout: Layout, every: np.ndarray, backend: Backend) -> None:
        self.layout = layout
        self.backend = backend
        self._every = every
        self.n = num_envs = every.size
        self.nb = nb = len(layout.body_paths)
        #: ``(num_envs, nb, 2)`` contact force sums of the last step; None until read.
        self.sums: np.ndarray | None = None
        #: The sums a rebase kept readable after its rebuild (held until the next step or
        #: rebuild, zero otherwise): a snapshot taken then stores them.
        self.rebase_sums = np.zeros((num_envs, nb, 2))
        self._kept = False
        #: ``(num_envs, nb)`` normal force sums of the copies last read (rolling).
        self.normals = np.zeros((num_envs, nb))
        #: dt of the last step (None: no step since the World was built or replayed).
        self.last_dt: float | None = None
        self._arb: tuple | None = None  # the last step's arbiters of every copy, cached
        # static/dynamic friction without a callback: per moving body, stick (True) or
        # slide, decided after every step from its contacts with the main static material
        # (bodies whose two values differ; nothing to do without a main static material).
        # The regimes and coefficients live in the backend's table (physics/_friction.py),
        # which the C helper's rules read too; without one (the scene needs no friction
        # model) nothing is chosen and these arrays are the scene's values
        table = backend.friction
        #: Whether any body's friction regime is chosen after each step.
        self.friction = table is not None and table.chooses
        #: ``(num_envs, nb)`` True where a body sticks (static friction).
        self.stick = (
            np.ones((num_envs, nb), dtype=bool)
            if table is None
            else table.stick.reshape(num_envs, nb)
        )
        #: ``(num_envs, nb)`` the friction each body's shapes carry while it sticks / slides
        #: (per copy: ``World.set_body_friction``; the scene's ``Layout.stick_value`` /
        #: ``slide_value`` until changed): the table the friction rule reads (views of
        #: the backend's table's columns, so a write reaches the rule in C too).
        #: ``(num_envs, nb, 2)`` both side by side (one write sets both: the two are views
        #: of it).
        self.stick_slide: np.ndarray
        if table is None:
            both = np.stack([layout.stick_value, layout.slide_value], axis=-1)
            self.stick_slide = np.tile(both, (num_envs, 1, 1))
        else:
            assert SLIDE == STICK + 1  # adjacent columns of the table
            self.stick_slide = table.coef[: num_envs * nb, STICK : SLIDE + 1].reshape(
                num_envs, nb, 2
            )
        self.stick_table = self.stick_slide[:, :, 0]
        self.slide_table = self.stick_slide[:, :, 1]
        # the backend's steps choose the regimes themselves (in C): nothing left to do here
        self._in_step = bool(backend.friction_in_step)
        # every body sticks (kept with each write of stick): a step with no contact then
        # has nothing to choose (#42.1: ~20 us of numpy a physics step of a single env)
        self._all_stick = True
        # per body: 1 if its regime is chosen, 2 if of the main static material, else 0
        self._code = np.zeros(nb, dtype=np.int64) if table is None else table.codes
        # whether a friction body's centre of gravity is off its origin (else r is simpler)
        self._cog = table is not None and table.has_cog
        self._speed = np.full(num_envs * nb, -1.0)  # scratch of update_friction

    def stepped(self, dt: float) -> None:
        """Forget what was read of the previous step: a step of ``dt`` was just taken."""
        self.sums = None
        self._arb = None
        self.last_dt = dt
        if self._kept:
            self._drop_kept()

    def rebuilt(self, ids: np.ndarray, stuck: bool = False) -> None:
        """Copies ``ids`` were rebuilt: they stick again and no arbiters are cached.

        ``stuck``: their rows of :attr:`stick` are True already (the caller wrote them).
        """
        if not stuck:
            self.stick[ids] = True
        self._all_stick = self._all_stick or bool(self.stick.all())  # True stays True
        self._arb = None
        if self._kept:
            self._drop_kept()

    def keep_sums(self, sums: np.ndarray) -> None:
        """Keep the last step's sums readable across a rebase's rebuild (and snapshots)."""
        self.sums = sums
        self.rebase_sums[...] = sums
        self._kept = True

    def _drop_kept(self) -> None:
        self.rebase_sums[...] = 0.0
        self._kept = False

    def carried(self, ids: np.ndarray, stick: np.ndarray, normals: np.ndarray) -> None:
        """A rebase carried copies ``ids`` over warm: their regimes and normal sums stay.

        ``stick`` and ``normals`` are ``(len(ids), nb)``; only bodies whose regime is
        chosen can slide (the rebuilt shapes carry their sticking values: sliding ones
        get their sliding values again).
        """
        stick = stick | (self._code != 1)
        self.stick[ids] = stick
        self._all_stick = bool(self.stick.all())
        self.normals[ids] = normals
        self._arb = None
        rows = (ids[:, None] * self.nb + np.arange(self.nb)).reshape(-1)[~stick.reshape(-1)]
        if rows.size:
            self.backend.set_friction(rows, self.slide_table.reshape(-1)[rows])

    def arbiters(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The last step's arbiters of copies ``ids`` (read once per step for all copies)."""
        if ids.size != self.n:
            return self.backend.arbiters(ids)
        if self._arb is None:
            self._arb = self.backend.arbiters(self._every)
        return self._arb

    def forces(self) -> np.ndarray:
        """The last step's contact force sums of every copy, ``(num_envs, nb, 2)`` (no copy)."""
        if self.sums is None:
            self.read(self._every)
        assert self.sums is not None  # for type checkers; set just above
        return self.sums

    def read(self, ids: np.ndarray) -> None:
        """Sum the last step's contact impulses per body of copies ``ids`` (force = J / dt).

        Sets :attr:`normals` of those copies, and :attr:`sums` when ``ids`` is every copy.
        """
        dt = self.last_dt
        contacts = np.zeros((self.n, self.nb, 2))
        normals = np.zeros((self.n, self.nb))
        if dt is not None:
            ra, rb, _, fl = self.arbiters(ids)
            if fl.shape[0]:
                flat = contacts.reshape(-1, 2)
                nflat = normals.reshape(-1)
                jn = np.abs(fl[:, 0] * fl[:, 2] + fl[:, 1] * fl[:, 3])
                # pymunk iterates cached arbiters in a memory-address order: sort them so
                # that the float sums do not depend on where pymunk allocated them
                perm = np.lexsort((fl[:, 1], fl[:, 0], rb, ra))
                for rows, sign in ((ra, 1.0), (rb, -1.0)):
                    idx = rows[perm]
                    hit = idx >= 0
                    np.add.at(flat, idx[hit], sign * fl[perm][hit, 0:2] / dt)
                    np.add.at(nflat, idx[hit], jn[perm][hit] / dt)
        self.normals[ids] = normals[ids]
        if ids.size == self.n:
            self.sums = contacts

    def update_friction(
        self,
        ids: np.ndarray,
        state_valid: np.ndarray,
        read: Callable[[np.ndarray], None],
    ) -> None:
        """Choose static or dynamic friction per moving body for the next step (batched).

        A moving body sticks (its shapes carry the static combination with the main static
        material) while the tangential speed at its contacts with that material stays at
        most ``SLIDE_SPEED_THRESHOLD``; it slides (dynamic combination) above that, until
        the speed drops below ``STATIC_SPEED_THRESHOLD``. A body without such a contact
        in the last step sticks (as after a reset). The speed is that of the body's point
        at each contact point of the last step, from its velocities after the step, so the
        choice lags the contact by one step (docs/world.md, "Materials"). Only bodies whose
        regime changed get new values (one C call per shape).

        Args:
            ids: The copies just stepped.
            state_valid: ``(num_envs,)`` copies whose rows of ``backend.raw`` are fresh.
            read: Reads copies into ``backend.raw`` (for the World's own bookkeeping:
                it never changes the physics).
        """
        if self._in_step:  # chosen in the step itself, in C (physics/_friction.py)
            return
        lay = self.layout
        nb = self.nb
        backend = self.backend
        rows, count, f = backend.friction_arbiters(ids, self._code)
        if not rows.size and self._all_stick:  # no contact, none sliding: all stick on
            return
        speed = self._speed  # -1 where no contact was seen (reset to -1 below)
        if rows.size:
            # the body states after this step, x in the shard's space (contact points are)
            every = state_valid.all()  # the step read every copy (the usual case)
            fresh = None if every else backend.contact_states(rows)
            if fresh is not None:  # the rows alone, fresh (reading never changes physics)
                st = fresh
                x = st[:, 0]
            else:
                if not every:
                    copies = np.unique(rows // nb)
                    stale = copies[~state_valid[copies]]
                    if stale.size:
                        read(stale)
                st = backend.raw.reshape(-1, 6)[rows]
                x = st[:, 0] + backend.origin_x[rows // nb]
            if self._cog:  # r = contact point - centre of gravity (world)
                b = rows % nb
                ca, sa = np.cos(st[:, 2]), np.sin(st[:, 2])
                cog = lay.cog[b]
                cx = x + ca * cog[:, 0] - sa * cog[:, 1]
                cy = st[:, 1] + sa * cog[:, 0] + ca * cog[:, 1]
            else:  # every friction body has its centre of gravity at its origin
                cx, cy = x, st[:, 1]
            rx = f[:, 4::2] - cx[:, None]
            ry = f[:, 5::2] - cy[:, None]
            w = st[:, 5:6]
            vx = st[:, 3:4] - w * ry
            vy = st[:, 4:5] + w * rx
            # tangential speed |v - (v.n) n| = |v x n| for the unit normal n
            sp = np.abs(vx * f[:, 3:4] - vy * f[:, 2:3])
            # the larger of the two points' speeds where there are two (np.maximum of the
            # columns: the same values as sp.max(axis=1), without an axis reduction)
            best = np.where(count > 1, np.maximum(sp[:, 0], sp[:, 1]), sp[:, 0])
            np.maximum.at(speed, rows, best)
        stick = self.stick.reshape(-1)
        cand = (speed >= 0.0) | ~stick  # seen this step, or sliding (sticks when unseen)
        if ids.size != self.n:
            inside = np.zeros(self.n, dtype=bool)
            inside[ids] = True
            cand &= np.repeat(inside, nb)
        cand = np.flatnonzero(cand)
        if cand.size:
            sp = speed[cand]
            was = stick[cand]
            now = np.where(was, sp <= SLIDE_SPEED_THRESHOLD, sp < STATIC_SPEED_THRESHOLD)
            now |= sp < 0.0
            flip = now != was
            changed = cand[flip]
            if changed.size:
                stick[changed] = now[flip]
                self._all_stick = bool(stick.all())
                values = np.where(
                    now[flip],
                    self.stick_table.reshape(-1)[changed],
                    self.slide_table.reshape(-1)[changed],
                )
                backend.set_friction(changed, values)
        if rows.size:
            speed[rows] = -1.0
