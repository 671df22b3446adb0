"""The "isolated" layout: one pymunk Space per environment copy (internal).

Every copy lives in its own ``pymunk.Space`` in its own frame (origin at 0), built by the
same sequence of calls, so copy ``i`` computes bit-identically to a lone copy, contacts
included. The price is Python call overhead: a few C calls per copy per physics step.
See docs/world.md, "Layouts". The batch helpers it shares with the packed layout are in
_batch.py.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._batch import (
    ANGLE,
    FORCE,
    GET,
    POSVEL,
    READ,
    SET,
    ArbiterBuffer,
    BatchRows,
    friction_contacts,
    lookup,
    nearest_body,
    set_shape_values,
)
from kelab.sim.physics._compile import CopySpace, Layout, build_copy
from kelab.sim.physics._filters import isolated_filter
from kelab.sim.physics._friction import FrictionTable, friction_module
from kelab.sim.physics._guard import structs_hold
from kelab.sim.physics._memory import check_world_memory, estimate, memory_left
from kelab.sim.physics._params import (
    HeldMasses,
    MassWriter,
    ShapeRows,
    write_materials,
    write_velocities,
    writer_module,
)
from kelab.sim.physics._warm import WarmFormat, WarmParts, apply, capture
from kelab.sim.scene.scene import Scene

if TYPE_CHECKING:  # the type only: the tables are the packed layout's
    from kelab.sim.physics._shard import JointTables


class IsolatedBackend:
    """One pymunk Space per copy (the default layout).

    Args:
        scene: The scene.
        layout: Its constant layout.
        num_envs: Copies.
        num_threads: Threads stepping shards of copies (bit-identical for every value).
        env_spacing: Metres between copy origins in the display frame (each copy has its
            own space: only drawn there).
    """

    name = "isolated"
    #: Each copy has its own space: :meth:`set_gravity` sets a copy's gravity there.
    #: Its reads do not check the values they read (the World checks ``raw``).
    read_within = False
    gravity_in_space = True
    #: Its steps are Python calls per copy, checked by the World after each one: no
    #: :meth:`step_many` (the World takes several steps one by one).
    can_step_many = False

    def __init__(
        self,
        scene: Scene,
        layout: Layout,
        num_envs: int,
        num_threads: int,
        env_spacing: float = 4.0,
    ) -> None:
        self.spacing = env_spacing
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
        self._nd = nd = int(self._dyn.size)
        # the moving bodies' columns of raw: a slice where they are consecutive (the
        # usual scene: static ground first), cheaper than a gather (#42.1)
        first = int(self._dyn[0]) if nd else 0
        consecutive = nd and int(self._dyn[-1]) - first == nd - 1
        self._dyn_cols: slice | np.ndarray = slice(first, first + nd) if consecutive else self._dyn
        self.raw = np.zeros((num_envs, nb, 6))
        static = ~layout.dynamic
        self.raw[:, static, 0:3] = layout.initial[static]  # static bodies never move
        #: Called as ``on_read(rows)`` (in the reading thread) after rows of ``raw`` are read.
        self.on_read: Callable[..., None] | None = None
        #: Never called here (its resets read through on_read): the Backend's attribute.
        self.reset_joints: Callable[[], JointTables | None] | None = None
        #: Copy origins along x in their space (0: every copy has its own space).
        self.origin_x = np.zeros(num_envs)
        self._copies: list[CopySpace] = [build_copy(scene, layout) for _ in range(num_envs)]
        self._ptrs = [cp.space_ptr(c.space) for c in self._copies]
        self._space_addrs = np.array([cp.address(p) for p in self._ptrs], dtype=np.uint64)
        #: The friction model's table (kelab/sim/physics/_friction.py; None: not needed)
        self.friction = FrictionTable(layout, num_envs) if layout.needs_handler else None
        self._friction_c = self._friction_model()
        #: Whether each step chooses the stepped copies' friction regimes (in C)
        self.friction_in_step = bool(
            self._friction_c is not None and self.friction is not None and self.friction.chooses
        )
        #: Warm starts carry over a rebase (each copy has its own space), where Chipmunk's
        #: structs hold as mirrored (_guard.py; else, warned, rebases are cold).
        self.warm: WarmFormat | None = (
            WarmFormat.of(self._copies[0], layout.dynamic) if structs_hold() else None
        )
        self._ids_dirty = True
        self._fric_vals: np.ndarray | None = None
        self._threads = num_threads
        self._pool = ThreadPoolExecutor(num_threads) if num_threads > 1 else None
        self._arb_buf = ArbiterBuffer()  # reused by every contact read
        # per-copy parameters (kelab/sim/physics/_params.py): the gravity of each copy
        # whose gravity is not the scene's (a rebuilt space gets the scene's again)
        self._gravity: dict[int, tuple[float, float]] = {}
        self._mass_writer: MassWriter | None = None  # made at the first set_masses
        self._param_shapes: ShapeRows | None = None
        #: the C helper writing per-copy parameters in batches, or None (_params.py)
        self._param_writer = writer_module()
        self._body_addrs: np.ndarray | None = None  # its table of the moving bodies
        self._moving = self._dyn.tolist()
        # the same for the parameter writers (read-only: found by identity)
        self._moving_cols = np.array(self._moving, dtype=np.int64)
        self._moving_cols.flags.writeable = False

    def _friction_model(self) -> object | None:
        """The C helper's friction model over every copy's bodies (None: Python's rules).

        One table for all the copies' spaces (body ``b`` of copy ``c`` is row
        ``c * nb + b``); each copy's spaces get its pre-solve.
        """
        table, module = self.friction, friction_module()
        if table is None or module is None or not (table.pairs or table.chooses):
            return None
        nb = self._nb
        bodies = [
            (cp.address(p), c * nb + b)
            for c, copy in enumerate(self._copies)
            for b, p in enumerate(copy.body_ptrs)
        ]
        shapes = [
            [cp.shape_ptr(s) for s in own] for copy in self._copies for own in copy.body_shapes
        ]
        model = table.native(module, bodies, shapes, self.origin_x)
        if table.pairs:
            for copy in self._copies:
                copy.use_pre_solve(partial(table.register, model=model))
        return model

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
        if ids.size == self._n:  # every copy: no gather of copies
            self.raw[:, self._dyn_cols] = rows[:, : self._nd]
        else:
            self.raw[np.ix_(ids, self._dyn)] = rows[ids, : self._nd]
        if self.on_read is not None:  # every copy: a slice (views, no gathers; #42.1)
            self.on_read(slice(None) if ids.size == self._n else ids)

    def set_forces(self, ids: np.ndarray, forces: np.ndarray) -> None:
        """Hold body forces/torques ``(len(ids), n_bodies, 3)``, written before every step.

        Rows of static bodies are ignored (nothing moves them).
        """
        f = self._force.view.reshape(self._n, self._layout.n_rows, 3)
        f[ids, : self._nd] = forces[:, self._dyn]

    def step(self, dt: float, ids: np.ndarray) -> np.ndarray:
        """One physics step of copies ``ids``, then a batch read of them.

        Returns:
            The copies whose state was read into ``raw`` after the step: ``ids``.
        """
        if self._pool is None or ids.size < 2 * self._threads:
            self._step_copies(ids, dt)
        else:
            shards = np.array_split(ids, self._threads)
            list(self._pool.map(self._step_copies, shards, [dt] * len(shards)))
        return ids

    def step_many(self, dt: float, count: int) -> int:
        """Never called: :attr:`can_step_many` is False."""
        raise NotImplementedError("the isolated layout takes one step a call")

    def _step_copies(self, ids: np.ndarray, dt: float) -> None:
        # cpSpaceStep directly: pymunk's Space.step only adds Python bookkeeping for
        # deferred add/remove and post-step callbacks, which the World never uses
        force, ptrs, step = self._force, self._ptrs, cp.space_step
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
        self._choose(ids)
        self._store(ids)

    def _choose(self, ids: np.ndarray) -> None:
        """Choose the friction regimes of copies ``ids`` just stepped (in C), if it does."""
        if self.friction_in_step:
            assert self._friction_c is not None  # friction_in_step says so
            self._friction_c.update(self._space_addrs[ids], np.ascontiguousarray(ids, np.int64))

    def rebuild(self, ids: np.ndarray, place: bool = True) -> None:
        """Make copies ``ids`` fresh (initial configuration, no history).

        ``place`` is accepted for the packed layout's sake (a new space is built anyway).
        """
        gravity = self._gravity
        for c in ids.tolist():
            self._copies[c].rebuild()  # the same bodies (same ids) in a fresh space
            self._ptrs[c] = cp.space_ptr(self._copies[c].space)
            self._space_addrs[c] = cp.address(self._ptrs[c])
            if c in gravity:  # a copy's own gravity outlives its rebuilds
                cp.space_set_gravity(self._ptrs[c], gravity[c])

    def capture_warm(self, ids: np.ndarray) -> list[np.ndarray]:
        """The warm starts of copies ``ids`` (kelab/sim/physics/_warm.py), a vector each."""
        assert self.warm is not None
        return [capture(self._copies[c], self.warm) for c in ids.tolist()]

    def apply_warm(self, ids: np.ndarray, parts: list[WarmParts], dt: float) -> None:
        """Give copies ``ids``, just rebuilt at their states, the warm starts ``parts``."""
        assert self.warm is not None
        for c, warm in zip(ids.tolist(), parts, strict=True):
            apply(self._copies[c], self.warm, warm, dt)

    def set_friction(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Set the friction of the shapes of bodies ``rows`` (flat ``copy * nb + body``)."""
        nb = self._nb
        set_shape_values([self._copies[r // nb].body_shapes[r % nb] for r in rows.tolist()], values)

    # ------------------------------------------------------------------ per-copy parameters
    def _shape_rows(self) -> ShapeRows:
        """Every body row's shapes, moving bodies only (made once)."""
        if self._param_shapes is None:
            moving = self._layout.dynamic
            self._param_shapes = ShapeRows(
                [
                    tuple(map(cp.shape_ptr, shapes)) if moving[b] else ()
                    for copy in self._copies
                    for b, shapes in enumerate(copy.body_shapes)
                ],
                self._nb,
                self._param_writer,
            )
        return self._param_shapes

    def _moving_addrs(self) -> np.ndarray:
        """Every copy's moving bodies' ``cpBody`` addresses, ``(num_envs, moving)``.

        Made once: a rebuild puts the same bodies in a fresh space.
        """
        if self._body_addrs is None:
            self._body_addrs = np.array(
                [[cp.address(copy.body_ptrs[b]) for b in self._moving] for copy in self._copies],
                dtype=np.uint64,
            ).reshape(len(self._copies), len(self._moving))
        return self._body_addrs

    def _body_ptr(self, c: int, b: int) -> object:
        return self._copies[c].body_ptrs[b]

    def set_masses(self, ids: np.ndarray, masses: np.ndarray) -> HeldMasses:
        """Give copies ``ids`` body masses ``(len(ids), n_bodies)``; the moments scale.

        Returns what the bodies now hold (``_params.HeldMasses``).
        """
        if self._mass_writer is None:
            self._mass_writer = MassWriter(self._scene, self._layout)
        return self._mass_writer.write(ids, masses, self._shape_rows(), self._body_ptr)

    def set_materials(
        self,
        ids: np.ndarray,
        friction: np.ndarray,
        reset_friction: np.ndarray,
        elasticity: np.ndarray | None,
        coefficients: np.ndarray | None,
    ) -> None:
        """Give copies ``ids`` their moving shapes' friction values.

        ``(len(ids), moving bodies)`` each: ``friction`` now (by friction regime),
        ``reset_friction`` what a rebuild gives back (the sticking value), ``elasticity``
        (None: unchanged); and ``coefficients`` ``(len(ids), nb, 3)`` the ``pre_solve``
        callback's (sqrt static, sqrt dynamic, restitution; None where no contact pair
        is left to it).
        """
        write_materials(ids, self._moving_cols, self._shape_rows(), friction, elasticity)
        for k, c in enumerate(ids.tolist()):
            copy = self._copies[c]
            copy.set_reset_friction(reset_friction[k])
            if coefficients is not None:
                for b in self._moving:
                    for s in copy.body_shapes[b]:
                        copy.shape_material[s] = tuple(coefficients[k, b].tolist())
        if coefficients is not None and self.friction is not None:
            self.friction.set_pairs(ids, self._moving, coefficients)

    def set_gravity(self, ids: np.ndarray, gravity: np.ndarray, own: np.ndarray) -> None:
        """Give copies ``ids`` the gravity ``(len(ids), 2)`` in their spaces.

        ``own``: ``(len(ids),)`` whether it differs from the scene's (kept over rebuilds).
        """
        for c, g, o in zip(ids.tolist(), gravity.tolist(), own.tolist(), strict=True):
            cp.space_set_gravity(self._ptrs[c], (g[0], g[1]))
            if o:
                self._gravity[c] = (g[0], g[1])
            else:
                self._gravity.pop(c, None)

    def set_velocities(self, ids: np.ndarray, velocities: np.ndarray) -> None:
        """Set the moving bodies' velocities ``(len(ids), nb, 3)`` of copies ``ids`` (a push)."""
        write_velocities(
            ids, self._moving, self._body_ptr, velocities, self._param_writer, self._moving_addrs
        )

    def bind_joints(self, tables: JointTables, due: Callable[[], bool]) -> bool:
        """Not here (False): a copy's steps are separate calls, the owner computes it."""
        return False

    def reset_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> bool:
        """:meth:`rebuild` copies ``ids``, then :meth:`write_states`; not read (False)."""
        self.rebuild(ids, place=False)
        self.write_states(ids, poses, vels)
        return False

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

        Row ``k`` of ``start``/``end`` belongs to copy ``ids[k]``; the ray sees the shapes
        ``body``'s shapes collide with (not those of its collision group).
        """
        out = np.full(ids.size, np.nan)
        filt = isolated_filter(self._layout.filters, int(self._layout.groups[body]), body)
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
