"""The "packed" layout: all copies of a shard in ONE pymunk Space (internal).

One ``pymunk.Space`` per thread shard holds its copies side by side along x. Copy ``i`` has
its origin at ``x = BASE_X + i * spacing`` in every shard (the same place whatever the
sharding), with ``spacing = env_spacing`` rounded up to a power of two. All those origins
and every body near them lie in one binade, ``[2**20, 2**21)``, where doubles are a fixed
grid of ``2**-32`` m, so adding or subtracting an origin is exact and translation-
equivariant. See docs/world.md, "Layouts", for what is exact and what is not.

Why this module is over 800 lines: the shard plan, the recorded reset calls, the
pipelined shard threads and the batched reads share one data layout (rows of copies in
shard buffers, fixed shape hash ids); split, each part would expose the others' private
indexing.

Construction choices that make a copy's result independent of its neighbours and of the
sharding (so ``num_threads`` never changes a bit):

- copies never touch: each copy's shapes carry category bit ``i % 31`` and collide only with
  that bit and the shared ground's bit 31; robots without self-collision get one group per
  copy. Copies with the same bit are ``31 * spacing`` apart.
- pymunk's spatial hash visits shapes in the order of their hash ids modulo its handle table
  size (a prime above the number of moving shapes): shape ``j`` of shard-local copy ``c``
  gets the fixed hash id ``c * k + j`` (``k`` moving shapes per copy), also when the copy is
  rebuilt (pymunk's default would keep counting up), so every copy's shapes are visited,
  and its contact pairs found and solved, in the same order whatever the shard and resets.
- shared static boxes that cover a copy's window (a ground plane) are built once per shard,
  stretched to span ``CAPACITY`` metres of origins whatever ``num_envs`` is (the same ground
  for every World); other shared static shapes are repeated in each copy.
- resetting copies removes and re-adds only their shapes and constraints (the bodies stay in
  their place in the body array, so every copy keeps its block of a batch read): Chipmunk
  removes from its arrays by moving the last element into the hole, so removing a copy's
  constraints back to front moves the last copy's block intact; the reset copy's
  constraints, re-initialised in place, are appended. The reset copy is then exactly a
  fresh copy (no warm-start impulses, no cached contacts, no bias velocities), and the
  other copies keep their in-copy order, so their future does not change.
"""

from __future__ import annotations

import math
import queue
import threading
import weakref
from collections.abc import Callable
from functools import partial

import numpy as np
import pymunk

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._compile import (
    Layout,
    apply_values,
    constraint_calls,
    error_biases,
    free_constraints,
    make_body,
    make_shapes,
    new_constraints,
    new_space,
    register_callbacks,
    reinit_call,
)
from kelab.sim.physics._isolated import (
    FORCE,
    GET,
    NO_INTS,
    READ,
    SET,
    ArbiterBuffer,
    friction_contacts,
    lookup,
    nearest_body,
)
from kelab.sim.physics._memory import check_world_memory, estimate, memory_left
from kelab.sim.scene.scene import Box, Scene

#: x of copy 0's origin in a shard space: mid binade [2**20, 2**21), grid 2**-32 m.
BASE_X = 1.5 * 2.0**20
#: Metres of copy origins a shard can hold (num_envs * spacing must not exceed it).
CAPACITY = 2.0**16
#: Category bit of shared ground shapes; copies use bits 0..30.
GROUND_BIT = 1 << 31
_ALL = 0xFFFFFFFF
#: Smallest spatial hash cell (m): 2**31 cells of it span 134e6 m, far beyond every
#: coordinate a step can reach from within the World's limits (_values.STATE_LIMITS).
MIN_CELL = 2.0**-4
#: Hash ids of static shapes start here (far from every moving shape's id).
_STATIC_IDS = 1 << 56


def packed_spacing(env_spacing: float) -> float:
    """Return ``env_spacing`` rounded up to a power of two (metres)."""
    return 2.0 ** math.ceil(math.log2(env_spacing))


class ShardWorkers:
    """Persistent threads running one job per shard; the calling thread runs shard 0.

    Args:
        count: Shards (threads including the caller).
    """

    def __init__(self, count: int) -> None:
        self._jobs: list[queue.SimpleQueue] = []
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = []
        self._outstanding = 0  # jobs submitted and not yet waited for
        self._error: BaseException | None = None
        for k in range(1, count):
            q: queue.SimpleQueue = queue.SimpleQueue()
            t = threading.Thread(target=self._loop, args=(q,), daemon=True, name=f"kelab-{k}")
            t.start()
            self._jobs.append(q)
            self._threads.append(t)

    def _loop(self, jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, arg = job
            try:
                fn(arg)
                self._done.put(None)
            except BaseException as exc:  # handed to the caller
                self._done.put(exc)

    def run(self, fn: Callable[[int], None], count: int) -> None:
        """Run ``fn(k)`` for k in range(count) concurrently; re-raise the first error."""
        try:
            self.submit(fn, count)
        finally:
            self.wait()

    def submit(self, fn: Callable[[int], None], count: int) -> None:
        """Queue ``fn(k)`` for k in 1..count-1, run ``fn(0)`` here; do not wait.

        Each thread runs its jobs in order; :meth:`wait` waits for them.
        """
        for k in range(1, count):
            self._jobs[k - 1].put((fn, k))
            self._outstanding += 1
        try:
            fn(0)
        except BaseException as exc:
            if self._error is None:
                self._error = exc

    @property
    def ok(self) -> bool:
        """False once a job has failed (:meth:`wait` raises its error)."""
        return self._error is None

    @property
    def busy(self) -> bool:
        """Whether submitted jobs may still be running (call :meth:`wait`)."""
        return self._outstanding > 0 or self._error is not None

    def wait(self) -> None:
        """Wait for every submitted job; re-raise the first error of any of them."""
        while self._outstanding:
            got = self._done.get()
            self._outstanding -= 1
            if got is not None and self._error is None:
                self._error = got
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self) -> None:
        """Wait for the submitted jobs (errors dropped), then stop the threads."""
        try:
            self.wait()
        except BaseException:  # closing: nobody is left to handle it
            pass
        for q in self._jobs:
            q.put(None)
        for t in self._threads:
            t.join()
        self._jobs, self._threads = [], []


class _Plan:
    """Constant facts shared by every shard of a packed World."""

    def __init__(self, scene: Scene, layout: Layout, num_envs: int, spacing: float) -> None:
        self.scene = scene
        self.layout = layout
        bodies = scene.bodies
        nb = len(bodies)
        self.origin_x = BASE_X + np.arange(num_envs, dtype=np.float64) * spacing
        static = ~layout.dynamic
        shared = np.array([not b.per_environment for b in bodies], dtype=bool)
        self.moving = np.flatnonzero(layout.dynamic)  # per copy, in the shard's body array
        # shared static shapes that cover a copy's window become one stretched ground
        self.stretch: dict[int, list[int]] = {}
        self.repeat: dict[int, list[int]] = {}
        for b in np.flatnonzero(static & shared).tolist():
            inst = bodies[b]
            for k, shape in enumerate(inst.spec.shapes):
                pts = [inst.pose.transform_point(p) for p in shape.local_points()]
                xs = [p[0] for p in pts]
                flat = (
                    isinstance(shape, Box)
                    and inst.pose.angle == 0.0
                    and shape.offset.angle == 0.0
                    and min(xs) <= -spacing / 2
                    and max(xs) >= spacing / 2
                )
                (self.stretch if flat else self.repeat).setdefault(b, []).append(k)
                if not flat and max(xs) - min(xs) >= 30 * spacing:
                    raise ValueError(
                        f"World: layout='packed' repeats shared shape {k} of {inst.path!r} in "
                        f"every copy, and it spans {max(xs) - min(xs):g} m along x, which would "
                        f"reach copies 31 spacings away (spacing {spacing} m); use an env_spacing "
                        f"> {(max(xs) - min(xs)) / 30:g}, a flat Box ground (Terrain.plane, built "
                        "once), or layout='isolated'"
                    )
        # bodies built per copy: moving ones, per-copy statics, shared statics with repeats
        self.per_copy_static = [
            b
            for b in np.flatnonzero(static).tolist()
            if bodies[b].per_environment or b in self.repeat
        ]
        self.shared_bodies = sorted(self.stretch)
        self.moving_shapes = sum(len(bodies[b].spec.shapes) for b in self.moving.tolist())
        self.group_stride = int(layout.groups.max()) + 1 if nb else 1
        self.mat = {
            b: (
                math.sqrt(inst.spec.material.static_friction),
                math.sqrt(inst.spec.material.dynamic_friction),
                inst.spec.material.restitution,
            )
            for b, inst in enumerate(bodies)
        }
        # spatial hash: cells a power of two about 4x the mean moving shape, in
        # [1/4 m, spacing / 2]. Measured with pymunk 7.3 on the built-in robots: cells of
        # the mean shape size (Chipmunk's rule of thumb) make every step rehash each shape
        # into several cells: 5 % slower steps for the cartpole and the biped, 3.5 % for
        # the quadruped
        sizes = []
        for b in self.moving.tolist():
            inst = bodies[b]
            for shape in inst.spec.shapes:
                pts = np.array(shape.local_points() or [(0.0, 0.0)])
                r = getattr(shape, "radius", 0.0)
                sizes.append(float(np.ptp(pts, axis=0).max()) + 2.0 * r)
        size = float(np.mean(sizes)) if sizes else 1.0
        cell = 2.0 ** math.ceil(math.log2(max(4.0 * size, 1e-9)))
        # never below MIN_CELL: the hash's cell indices are C ints, and every body
        # within the World's limits must stay below 2**31 cells (see _values.py)
        self.cell = float(max(min(max(cell, 0.25), spacing / 2), MIN_CELL))
        self.cells = max(1000, 4 * num_envs * max(self.moving_shapes, 1))

    def copy_filter(self, c: int, body: int) -> pymunk.ShapeFilter:
        """Collision filter of copy ``c``'s shapes of ``body`` (global copy index)."""
        bit = 1 << (c % 31)
        group = c * self.group_stride + int(self.layout.groups[body])
        return pymunk.ShapeFilter(group=group, categories=bit, mask=GROUND_BIT | bit)


def _free_parts(parts: list[tuple[list, list, list]]) -> None:
    """Free the unmanaged constraints of a shard's copies (its finalizer)."""
    for _, _, cons in parts:
        free_constraints(cons)


class _Shard:
    """One shard: a pymunk Space with copies ``copies`` (global indices, ascending)."""

    def __init__(self, plan: _Plan, copies: np.ndarray) -> None:
        self.plan = plan
        self.copies = copies
        n = copies.size
        lay = plan.layout
        space = new_space(plan.scene.gravity)
        space.use_spatial_hash(plan.cell, plan.cells)
        self.space = space
        self.ptr = cp.space_ptr(space)
        self.materials: dict[pymunk.Shape, tuple[float, float, float]] = {}
        self._static_id = _STATIC_IDS
        # the shared ground, once
        self.shared: dict[int, pymunk.Body] = {}
        for b in plan.shared_bodies:
            inst = plan.scene.bodies[b]
            pose = inst.pose
            body = pymunk.Body(body_type=pymunk.Body.STATIC)
            body.position = (BASE_X + pose.x, pose.y)
            shapes = []
            for k in plan.stretch[b]:
                shape = inst.spec.shapes[k]
                pts = shape.local_points()
                right = max(p[0] for p in pts)
                pts = [(x + CAPACITY if x == right else x, y) for x, y in pts]
                s = pymunk.Poly(body, pts)
                s.friction = math.sqrt(inst.spec.material.dynamic_friction)
                s.elasticity = math.sqrt(inst.spec.material.restitution)
                s.filter = pymunk.ShapeFilter(categories=GROUND_BIT, mask=_ALL)
                shapes.append(s)
                self.materials[s] = plan.mat[b]
            if lay.needs_handler:
                apply_values(shapes, lay, b)
            self._add_static(body, shapes)
            self.shared[b] = body
        # per-copy statics (never rebuilt), then the moving parts
        nb = len(lay.body_paths)
        self.bodies: list[list[pymunk.Body | None]] = [[None] * nb for _ in range(n)]
        for cl in range(n):
            c = int(copies[cl])
            for b in plan.per_copy_static:
                inst = plan.scene.bodies[b]
                body = make_body(inst.spec, inst.pose)
                body.position = (float(plan.origin_x[c]) + inst.pose.x, inst.pose.y)
                shapes = make_shapes(body, inst.spec)
                if b in plan.repeat:
                    shapes = [shapes[k] for k in plan.repeat[b]]
                for s in shapes:
                    s.filter = plan.copy_filter(c, b)
                    self.materials[s] = plan.mat[b]
                if lay.needs_handler:
                    apply_values(shapes, lay, b)
                self._add_static(body, shapes)
                self.bodies[cl][b] = body
        # per copy: moving bodies, their shapes (one list per body), constraints
        self.parts: list[tuple[list, list, list]] = []
        self.recipe: list[tuple] = [()] * n  # per copy: the C calls of a rebuild
        # per copy: its static joint anchors by parent (-1: ground frame; see _anchor)
        self.anchors: list[dict[int, pymunk.Body]] = [{} for _ in range(n)]
        # the constraints are unmanaged pointers (a rebuild frees the old ones at once):
        # free the last ones with the shard (before its space goes, which detaches them)
        weakref.finalize(self, _free_parts, self.parts)
        for cl in range(n):
            self.parts.append(self._create_moving(cl))
            self._add_moving(cl, first=True)
        if lay.needs_handler:
            register_callbacks(space, lay, self.materials)
        kd = plan.moving.size
        self.kd = kd
        self.nbodies = n * kd + 1 + len(self.shared) + n * len(plan.per_copy_static)
        self.rbuf, self.rdata, self.rfa = self._buffer(self.nbodies * 6, READ)
        self.fbuf, self.fdata, self.ffa = self._buffer(self.nbodies * 3, FORCE)

    def _buffer(self, width: int, fields: int) -> tuple[np.ndarray, object, object]:
        arr = np.zeros(width + 2)
        fa = cp.float_array_view(arr.ctypes.data, width + 2)
        d = cp.batched_data(fields, fa, NO_INTS)  # body fields push floats only
        return arr, d, fa

    def _add_static(self, body: pymunk.Body, shapes: list[pymunk.Shape]) -> None:
        self.space.add(body)
        for s in shapes:
            cp.space_set_shape_id_counter(self.ptr, self._static_id)
            self._static_id += 1
            self.space.add(s)

    def _create_moving(self, cl: int) -> tuple[list, list, list]:
        """Create local copy ``cl``'s moving bodies and shapes (once; reused by rebuilds)."""
        plan = self.plan
        lay = plan.layout
        c = int(self.copies[cl])
        bodies, shapes = [], []
        for b in plan.moving.tolist():
            inst = plan.scene.bodies[b]
            body = make_body(inst.spec, inst.pose)
            own = make_shapes(body, inst.spec)
            filt = plan.copy_filter(c, b)
            for s in own:
                s.filter = filt
                self.materials[s] = plan.mat[b]
            if lay.needs_handler:
                apply_values(own, lay, b)
            self.bodies[cl][b] = body
            bodies.append(body)
            shapes.append(own)
        return bodies, shapes, []

    def _add_moving(self, cl: int, first: bool = False) -> None:
        """Put local copy ``cl``'s moving parts into the space at their initial state.

        The first time with pymunk's own calls; this also records, per copy, the C calls
        that every rebuild repeats (:meth:`rebuild`): the body pointers with their pose,
        the shape pointers, and the constraint constructors with their arguments.
        """
        plan = self.plan
        lay = plan.layout
        c = int(self.copies[cl])
        ox = float(plan.origin_x[c])
        bodies, shapes, _ = self.parts[cl]
        ptr = self.ptr
        cp.space_set_shape_id_counter(ptr, cl * plan.moving_shapes)
        adds = []
        for k, b in enumerate(plan.moving.tolist()):
            pose = plan.scene.bodies[b].pose
            body = bodies[k]
            # the same calls as make_body, at the copy's origin
            cp.body_set_position(cp.body_ptr(body), (ox + pose.x, pose.y))
            cp.body_set_angle(cp.body_ptr(body), pose.angle)
            # hash ids cl * k + j: fixed per copy, below the table size
            self.space.add(body, *shapes[k])
            adds.append(
                (
                    cp.body_ptr(body),
                    pose.angle,
                    (ox + pose.x, pose.y),
                    tuple(map(cp.shape_ptr, shapes[k])),
                )
            )
        calls, biases = [], []
        anchors = self.anchors[cl]
        for jl in lay.joints:
            if jl.parent < 0 or jl.parent in self.shared:
                # the copy's own static anchor (see _anchor), not the space's static body
                if jl.parent not in anchors:
                    anchors[jl.parent] = self._anchor(jl.parent)
                a = anchors[jl.parent]
                # the copy offset in the static body's (unrotated) frame
                shift = (ox, 0.0) if jl.parent < 0 else (ox - BASE_X, 0.0)
            else:
                a, shift = self.bodies[cl][jl.parent], None
            child = self.bodies[cl][jl.child]
            assert a is not None and child is not None  # built above
            made = constraint_calls(jl, cp.body_ptr(a), cp.body_ptr(child), shift)
            calls.extend(made)
            biases.extend([jl.error_bias] * len(made))
        cons = new_constraints(calls, managed=False)
        biased = error_biases(cons, biases)
        add_con = cp.space_add_constraint
        for con in cons:
            add_con(ptr, con)
        self.parts[cl] = (bodies, shapes, cons)
        # a rebuild re-initialises the same constraints in place (the Init function of each
        # constructor, with its arguments: what the constructor does after allocating)
        inits = [reinit_call(ctor, c, args) for c, (ctor, args) in zip(cons, calls, strict=True)]
        fric = []
        if lay.needs_handler:
            for k, b in enumerate(plan.moving.tolist()):
                f = float(lay.stick_value[b])
                fric.extend((cp.shape_ptr(s), f) for s in shapes[k])
        # (adds, constraint re-init calls, shape pointers, body pointers, initial frictions,
        # the error biases of the joints that set one)
        self.recipe[cl] = (
            adds,
            inits,
            [p for add in adds for p in add[3]],
            [add[0] for add in adds],
            fric,
            biased,
        )

    def _anchor(self, parent: int) -> pymunk.Body:
        """A static body in the state of a joint parent: the space's static body or a shared one.

        ``parent`` is -1 for the copy's ground frame, else a shared static body's index.

        Joints to it compute exactly what they would with the shared body itself (the same
        transform, a zero centre of gravity, no mass or velocity), but each copy has its
        own: Chipmunk keeps a body's constraints in a linked list that removing one walks
        (from the newest), so with one shared static body a copy's reset walked past the
        ground joints of every copy reset after it. It stays out of the space (the space
        never moves or reads a static body; a constraint needs its bodies only).
        """
        body = pymunk.Body(body_type=pymunk.Body.STATIC)
        if parent >= 0:
            pose = self.plan.scene.bodies[parent].pose
            body.position = (BASE_X + pose.x, pose.y)  # as the shared body (_Shard.__init__)
        return body

    def rebuild(self, locals_: np.ndarray, place: bool = True) -> None:
        """Make local copies fresh: new constraints and shapes on their bodies, in place.

        Per copy: its constraints leave the space back to front (Chipmunk fills a hole
        with the array's last element, so the last copy's block moves intact), then its
        shapes (which drops their cached contacts); its bodies stay where they are in the
        body array, so a batch read keeps every copy in its block. With ``place``, each
        body gets a new body's state: zero velocities, then (with no shapes its centre
        of gravity is zero) the initial angle and position, as ``make_body`` and the
        first build leave them. Its shapes get their initial friction and are added again
        with the copy's fixed hash ids (the body's mass data is accumulated from them
        again, in the same order), and the constraints, re-initialised in place (zero
        impulses), are added again. Every body's bias velocities (left by the last solve,
        used by the next step) are zeroed by a position update of zero time. Direct
        Chipmunk calls bound to locals, no pymunk bookkeeping.

        ``place=False`` leaves out the velocity and pose calls, for a caller that writes
        every moving body's pose and velocity next (:meth:`PackedBackend.write_states`):
        those writes set angle, position (from the angle, the centre of gravity and the
        position alone), velocity and angular velocity whatever they were, so the result
        is the same bits.
        """
        ptr = self.ptr
        rm_con, rm_shape = cp.space_remove_constraint, cp.space_remove_shape
        add_con, add_shape = cp.space_add_constraint, cp.space_add_shape
        set_v, set_w = cp.body_set_velocity, cp.body_set_angular_velocity
        update = cp.body_update_position
        off, set_bias = cp.constraint_set_collide_bodies, cp.constraint_set_error_bias
        set_a, set_p = cp.body_set_angle, cp.body_set_position
        set_fric, set_counter = cp.shape_set_friction, cp.space_set_shape_id_counter
        zero = (0.0, 0.0)
        stride = self.plan.moving_shapes
        parts, recipe = self.parts, self.recipe
        for cl in locals_.tolist():
            cons = parts[cl][2]
            adds, inits, shape_ptrs, _, fric, biased = recipe[cl]
            for con in reversed(cons):
                rm_con(ptr, con)
            for sp in shape_ptrs:
                rm_shape(ptr, sp)
            for sp, f in fric:
                set_fric(sp, f)
            set_counter(ptr, cl * stride)
            for bp, angle, pos, sps in adds:
                if place:
                    set_v(bp, zero)
                    set_w(bp, 0.0)
                update(bp, 0.0)  # zeroes the bias velocities the last solve left
                if place:
                    set_a(bp, angle)
                    set_p(bp, pos)
                for sp in sps:
                    add_shape(ptr, sp)
            for (init, args), con in zip(inits, cons, strict=True):
                init(*args)
                off(con, 0)
                add_con(ptr, con)
            for con, bias in biased:  # Init reset the joints' own error biases
                set_bias(con, bias)

    def fetch(self) -> None:
        """Batch-read the shard into its read buffer (C only: releases the GIL)."""
        self.rfa.num = 0
        cp.space_each_body(self.ptr, GET, self.rdata)

    def set_forces(self, forces: np.ndarray) -> None:
        """Hold ``(n_local, n_moving, 3)`` forces (local copy order) for the next steps."""
        n, kd = self.copies.size, self.kd
        self.fbuf[: n * kd * 3].reshape(n, kd, 3)[:] = forces

    def step(self, dt: float) -> None:
        """Write the held forces and take one physics step (releases the GIL in C)."""
        self.ffa.num = 0
        cp.space_each_body(self.ptr, SET, self.fdata)
        cp.space_step(self.ptr, dt)


class PackedBackend:
    """Copies packed in one pymunk Space per thread shard.

    Args:
        scene: The scene.
        layout: Its constant layout.
        num_envs: Copies.
        num_threads: Shards, stepped concurrently (bit-identical for every value).
        env_spacing: Requested spacing; rounded up to a power of two.

    Raises:
        ValueError: If ``env_spacing <= 0`` or ``num_envs * spacing > CAPACITY``.
    """

    name = "packed"

    def __init__(
        self, scene: Scene, layout: Layout, num_envs: int, num_threads: int, env_spacing: float
    ) -> None:
        if env_spacing <= 0:
            raise ValueError(
                f"World: layout='packed' needs env_spacing > 0 metres, got {env_spacing!r}"
            )
        spacing = packed_spacing(env_spacing)
        if num_envs * spacing > CAPACITY:
            raise ValueError(
                f"World: num_envs must be at most {int(CAPACITY // spacing)} for "
                f"layout='packed' at spacing {spacing} m (env_spacing {env_spacing} rounded up "
                f"to a power of two; a shard spans {CAPACITY:g} m of copies), got "
                f"num_envs={num_envs}; lower env_spacing or use fewer copies "
                "(layout='isolated' has no such cap but needs far more memory per copy)"
            )
        shards = min(num_threads, num_envs)
        check_world_memory(
            num_envs, "packed", estimate(scene, layout, "packed", shards), memory_left()
        )
        self.spacing = spacing
        self._n = num_envs
        self._nb = len(layout.body_paths)
        self._layout = layout
        self._plan = _Plan(scene, layout, num_envs, spacing)
        self._split = np.array_split(np.arange(num_envs), min(num_threads, num_envs))
        self._parts = [slice(int(p[0]), int(p[-1]) + 1) for p in self._split]
        # shards whose held forces changed since their buffer was last written
        self._pending = [True] * len(self._split)
        #: Called as ``on_read(rows)`` (in the calling thread) after rows of ``raw`` are read.
        self.on_read: Callable[[slice | np.ndarray], None] | None = None
        self._every = np.arange(num_envs)
        self._all_shards = list(range(len(self._split)))
        self._every.flags.writeable = False  # handed out by step()
        self._shard_of = np.zeros(num_envs, dtype=np.int64)
        self._local = np.zeros(num_envs, dtype=np.int64)
        for k, part in enumerate(self._split):
            self._shard_of[part] = k
            self._local[part] = np.arange(part.size)
        self._workers = ShardWorkers(len(self._split)) if len(self._split) > 1 else None
        self.raw = np.zeros((num_envs, self._nb, 6))
        static = ~layout.dynamic
        self.raw[:, static, 0:3] = layout.initial[static]
        self._forces = np.zeros((num_envs, self._nb, 3))
        mv = self._plan.moving
        # the moving bodies as a slice when they are contiguous (cheaper numpy)
        self._mv: slice | np.ndarray = (
            slice(int(mv[0]), int(mv[-1]) + 1)
            if mv.size and np.array_equal(mv, np.arange(mv[0], mv[-1] + 1))
            else mv
        )
        # position of each (moving) body in a copy's block of the shard buffers
        self._moving_index = np.full(self._nb, -1, dtype=np.int64)
        self._moving_index[mv] = np.arange(mv.size)
        self._jobs: dict[tuple[float, bool], Callable[[int], None]] = {}
        #: Copy origins along x in their shard's space.
        self.origin_x = self._plan.origin_x
        self._fric_vals: np.ndarray | None = None
        self._arb_buf = ArbiterBuffer()  # reused by every contact read
        self.rebuild(np.arange(num_envs))

    # ------------------------------------------------------------------ state
    def read(self, ids: np.ndarray) -> np.ndarray:
        """Batch-read the shards holding ``ids`` (one C call each); returns the copies read.

        When every shard is needed and there are threads, each shard thread fetches its
        own (C only); the numpy work runs here once for all shards (:meth:`_store`).
        """
        if ids.size == 0:
            return ids
        self.sync()
        if ids.size < self._n:  # a few copies (after resets): store only their rows
            shards = self._shards_of(ids)
            for k in shards:
                self._shards[k].fetch()
            self._store_rows(ids, shards)
            return ids
        self._fetch_all(self._fetch_shard)
        return self._every

    def _shards_of(self, ids: np.ndarray) -> list[int]:
        """The shards holding copies ``ids``, ascending."""
        if len(self._split) == 1:
            return self._all_shards
        return np.unique(self._shard_of[ids]).tolist()

    def _store_rows(self, ids: np.ndarray, shards: list[int]) -> None:
        """Copy copies ``ids`` from their shards' last fetch into ``raw``, then ``on_read``.

        The same values as :meth:`_store` for those rows (the same subtraction of the
        origin); the other rows of ``raw`` are left as they were.
        """
        mv, ox = self._mv, self._plan.origin_x
        shard_of, local = self._shard_of[ids], self._local[ids]
        for k in shards:
            shard = self._shards[k]
            mine = slice(None) if len(self._split) == 1 else shard_of == k
            sel, loc = ids[mine], local[mine]
            n, kd = shard.copies.size, shard.kd
            block = shard.rbuf[: n * kd * 6].reshape(n, kd, 6)
            rows = block[loc]
            rows[:, :, 0] -= ox[sel, None]
            if isinstance(mv, slice):
                self.raw[sel, mv, :] = rows
            else:
                self.raw[sel[:, None], mv] = rows
        if self.on_read is not None:
            self.on_read(ids)

    def stepped(self, ids: np.ndarray) -> np.ndarray:
        """The copies a step advances: every copy (they share their shards' spaces)."""
        return self._every

    def contact_states(self, rows: np.ndarray) -> np.ndarray:
        """Fresh states of body rows, x in the shard's frame (:meth:`body_rows`)."""
        return self.body_rows(rows, shard_frame=True)

    def body_rows(self, rows: np.ndarray, shard_frame: bool = False) -> np.ndarray:
        """Fresh state of body rows ``copy * nb + body`` (moving bodies), ``(m, 6)``.

        Fetches every shard but stores nothing into ``raw``: a few rows gathered from the
        shard buffers, x in the copy's frame (the subtraction :meth:`_store` makes), or
        with ``shard_frame`` as the shard's space holds it (``x + origin_x`` of the copy
        frame's x, exactly: both lie in one binade).
        """
        self.sync()
        if self._workers is not None:
            self._workers.run(self._fetch_shard, len(self._shards))
        else:
            self._shards[0].fetch()
        nb = self._nb
        copies, bodies = rows // nb, rows % nb
        out = np.empty((rows.size, 6))
        for k, shard in enumerate(self._shards):
            mine = slice(None) if len(self._shards) == 1 else self._shard_of[copies] == k
            c, b = copies[mine], bodies[mine]
            flat = shard.rbuf[: shard.copies.size * shard.kd * 6].reshape(-1, 6)
            st = flat[self._local[c] * shard.kd + self._moving_index[b]]
            if not shard_frame:
                st[:, 0] -= self._plan.origin_x[c]
            out[mine] = st
        return out

    def _fetch_shard(self, k: int) -> None:
        self._shards[k].fetch()

    def _store(self) -> None:
        """Copy every shard's last fetch into ``raw`` (copy frames), then ``on_read``.

        Runs in the calling thread, after the shard threads: numpy calls on small arrays
        hold the GIL between short releases, so two threads doing them at once mostly
        take turns (and pay for the hand-overs); done once for all shards they are fewer
        and larger.
        """
        for k in range(len(self._shards)):
            self._store_shard(k)
        if self.on_read is not None:
            self.on_read(slice(None))

    def _fetch_all(self, job: Callable[[int], None]) -> None:
        """Run ``job(k)`` (ending with a fetch) for every shard, then store them all.

        With threads, this thread stores its own shard (0), and ``on_read`` handles its
        rows, while the others finish (their threads run C only: no GIL contention).
        """
        workers = self._workers
        if workers is None:
            job(0)
            self._store()
            return
        workers.submit(job, len(self._shards))
        if workers.ok:
            self._store_shard(0)
            if self.on_read is not None:
                self.on_read(self._parts[0])
        workers.wait()
        for k in range(1, len(self._shards)):
            self._store_shard(k)
        if self.on_read is not None:
            self.on_read(slice(self._parts[1].start, self._n))

    def _store_shard(self, k: int) -> None:
        """Copy shard ``k``'s last fetch into its rows of ``raw`` (copy frames)."""
        shard, part = self._shards[k], self._parts[k]
        raw, mv = self.raw, self._mv
        n, kd = shard.copies.size, shard.kd
        raw[part, mv, :] = shard.rbuf[: n * kd * 6].reshape(n, kd, 6)
        raw[part, mv, 0] -= self._plan.origin_x[part, None]

    def set_forces(self, ids: np.ndarray, forces: np.ndarray) -> None:
        """Hold body forces/torques ``(len(ids), n_bodies, 3)``, written before every step.

        They are copied into the shards' batch buffers at the next step.
        """
        if ids.size == self._n:  # every copy: a plain copy, no fancy indexing
            self._forces[...] = forces
            self._pending = [True] * len(self._split)
        else:
            self._forces[ids] = forces
            for k in np.unique(self._shard_of[ids]).tolist():
                self._pending[k] = True

    def step(self, dt: float, ids: np.ndarray, read: bool = False) -> np.ndarray:
        """One physics step of every copy (a shared space cannot step a subset).

        Changed forces are copied into the shards' batch buffers here; then each shard
        (in its own thread when there are several) writes them, steps and, with ``read``,
        batch-reads its bodies: C calls only, which release the GIL, so the shards run
        truly in parallel. The read states are then stored into ``raw`` here.

        Returns:
            The copies whose state was read after the step (all, or none).
        """
        pending = self._pending
        if True in pending:
            self.sync()  # the threads may still be stepping with the old buffers
            for k, shard in enumerate(self._shards):
                if pending[k]:
                    pending[k] = False
                    shard.set_forces(self._forces[self._parts[k], self._mv, :])
        job = self._jobs.get((dt, read))
        if job is None:
            if len(self._jobs) > 8:  # a varying dt: keep the cache small
                self._jobs.clear()
            job = self._jobs[(dt, read)] = partial(self._step_shard, dt, read)
        if read:
            self._fetch_all(job)
            return self._every
        if self._workers is None:
            job(0)
        else:  # pipelined: the next step's job queues behind this one
            self._workers.submit(job, len(self._shards))
        return ids[:0]

    def _step_shard(self, dt: float, read: bool, k: int) -> None:
        shard = self._shards[k]
        shard.step(dt)
        if read:
            shard.fetch()

    def sync(self) -> None:
        """Wait until the shard threads have finished every step handed to them.

        A step without a read returns once the calling thread's shard has stepped; the
        other shards' steps run on (each thread takes its jobs in order), so consecutive
        steps do not wait for each other. Everything that touches a shard other than
        through a step waits here first.
        """
        if self._workers is not None and self._workers.busy:
            self._workers.wait()

    def rebuild(self, ids: np.ndarray, place: bool = True) -> None:
        """Make copies ``ids`` (distinct) fresh, in place (the first call builds the shards).

        Also when every copy of a shard is reset: its copies are rebuilt in place like any
        others (each exactly a fresh copy), ~10x cheaper than building a new space (new
        pymunk bodies and shapes for every copy). ``place=False``: the caller writes every
        moving body's state next (see :meth:`_Shard.rebuild`).
        """
        self.sync()
        if ids.size == 0:
            return
        fresh = getattr(self, "_shards", None) is None
        if fresh:
            self._shards = [_Shard(self._plan, part) for part in self._split]
            self._id_dirty = self._shapes_dirty = True
            self._fric_vals = None
        elif len(self._split) == 1:  # one shard: local indices are the copy indices
            self._shards[0].rebuild(np.sort(ids), place)
        else:
            hit = np.zeros(self._n, dtype=bool)
            hit[ids] = True
            for k, part in enumerate(self._split):
                mask = hit[part]
                if mask.any():  # the same bodies (same ids) re-added, also for all copies
                    self._shards[k].rebuild(self._local[part[mask]], place)
        self._forces[ids] = 0.0
        # a rebuilt shard has a fresh buffer, a partial rebuild moves blocks: rewrite all
        self._pending = [True] * len(self._split)

    def write_states(self, ids: np.ndarray, poses: np.ndarray, vels: np.ndarray) -> None:
        """Set poses/velocities of the moving bodies of (just rebuilt) copies ``ids``.

        Per-body Chipmunk setters (the calls of pymunk's property setters, without their
        Python wrappers); a batch write would rewrite every copy of the shard.
        """
        self.sync()
        mv = self._plan.moving.tolist()
        ox = self._plan.origin_x.tolist()
        set_angle, set_pos = cp.body_set_angle, cp.body_set_position
        set_vel, set_w = cp.body_set_velocity, cp.body_set_angular_velocity
        p = poses[:, mv].tolist()
        v = vels[:, mv].tolist()
        shards, shard_of, local = self._shards, self._shard_of.tolist(), self._local.tolist()
        for c, prow, vrow in zip(ids.tolist(), p, v, strict=True):
            ptrs = shards[shard_of[c]].recipe[local[c]][3]
            o = ox[c]
            # per body, angle first: setting the angle turns a body about its centre of
            # gravity (each setter touches only its body: no contacts since the rebuild)
            for ptr, (x, y, a), (vx, vy, w) in zip(ptrs, prow, vrow, strict=True):
                set_angle(ptr, a)
                set_pos(ptr, (o + x, y))
                set_vel(ptr, (vx, vy))
                set_w(ptr, w)

    def set_friction(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Set the friction of the shapes of bodies ``rows`` (flat ``copy * nb + body``)."""
        self.sync()
        table = self._shape_table()
        setf = cp.shape_set_friction
        if self._one_shape:  # a shape per body: its pointer, no inner loop
            single = self._single
            for r, v in zip(rows.tolist(), values.tolist(), strict=True):
                setf(single[r], v)
            return
        for r, v in zip(rows.tolist(), values.tolist(), strict=True):
            for sp in table[r]:
                setf(sp, v)

    def _shape_table(self) -> list[tuple]:
        """Shape pointers of every body row ``copy * nb + body`` (moving bodies; cached)."""
        self.sync()
        if self._shapes_dirty:
            nb = self._nb
            table: list[tuple] = [()] * (self._n * nb)
            for shard in self._shards:
                for cl, c in enumerate(shard.copies.tolist()):
                    for b, own in zip(self._plan.moving.tolist(), shard.parts[cl][1], strict=True):
                        table[c * nb + b] = tuple(map(cp.shape_ptr, own))
            self._shapes = table
            self._shapes_dirty = False
            self._one_shape = all(len(t) == 1 for t in table if t)
            self._single = [t[0] if len(t) == 1 else None for t in table]
        return self._shapes

    # ------------------------------------------------------------------ contacts, rays
    def _id_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.sync()
        if self._id_dirty:
            keys, vals = [], []
            nb = self._nb
            for shard in self._shards:
                for cl, bodies in enumerate(shard.bodies):
                    c = int(shard.copies[cl])
                    for b, body in enumerate(bodies):
                        if body is not None:
                            keys.append(body.id)
                            vals.append(c * nb + b)
                for b, body in shard.shared.items():
                    keys.append(body.id)
                    vals.append(-2 - b)  # shared: belongs to the copy of the other body
            k = np.array(keys, dtype=np.uint64)
            order = np.argsort(k, kind="stable")
            self._table = (k[order], np.array(vals, dtype=np.int64)[order])
            self._id_dirty = False
        return self._table[0], self._table[1], np.zeros(0)

    def arbiters(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Last step's arbiters of all copies (rows ``c*nb+b`` of A and B, counts, floats).

        See ``sum_arbiters`` for the floats; -1 marks a body of no copy.
        """
        self.sync()
        ints, fl = self._arb_buf.read([shard.ptr for shard in self._shards])
        table, vals, _ = self._id_table()
        ra = lookup(table, vals, ints[:, 0])
        rb = lookup(table, vals, ints[:, 1])
        nb = self._nb
        # a shared body (encoded -2 - b) takes the copy of the body it touches
        for mine, other in ((ra, rb), (rb, ra)):
            shared = mine <= -2
            copy = np.where(other >= 0, other // nb, -1)
            ok = shared & (copy >= 0)
            mine[ok] = copy[ok] * nb + (-2 - mine[ok])
            mine[shared & ~ok] = -1
        return ra, rb, ints[:, 2].astype(np.int64), fl

    def friction_arbiters(
        self, ids: np.ndarray, codes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last step's contacts between friction bodies and the main static material.

        Args:
            ids: Copies (the packed layout reads every copy of its spaces).
            codes: ``(n_bodies,)`` per body: 1 for a moving body whose regime is chosen,
                2 for a body of the main static material, 0 otherwise (constant).

        Returns:
            ``(rows, count, floats)`` of those arbiters: the friction body's row
            ``copy * nb + body``, the contact count and the floats of ``sum_arbiters``.
        """
        self.sync()
        # fl views the reused buffer: friction_contacts returns copies
        ints, fl = self._arb_buf.read([shard.ptr for shard in self._shards], copy=False)
        table, _, _ = self._id_table()
        if self._fric_vals is None:
            nb = self._nb
            vals = self._table[1]
            shared = vals <= -2
            b = np.where(shared, -2 - vals, vals % nb)
            code = codes[b]
            self._fric_vals = np.where(code == 1, vals, np.where(code == 2, -2, -1))
        return friction_contacts(table, self._fric_vals, ints, fl)

    def segment_first(
        self, body: int, start: np.ndarray, end: np.ndarray, ids: np.ndarray
    ) -> np.ndarray:
        """Alpha of the first hit of one ray per copy of ``ids`` (NaN: none).

        Row ``k`` of ``start``/``end`` (copy frame) belongs to copy ``ids[k]``; shapes of
        ``body``'s collision group in that copy are ignored.
        """
        self.sync()
        out = np.full(ids.size, np.nan)
        ox = self._plan.origin_x
        for k, c in enumerate(ids.tolist()):
            shard = self._shards[self._shard_of[c]]
            hit = shard.space.segment_query_first(
                (float(ox[c] + start[k, 0]), float(start[k, 1])),
                (float(ox[c] + end[k, 0]), float(end[k, 1])),
                0.0,
                self._plan.copy_filter(c, body),
            )
            if hit is not None:
                out[k] = hit.alpha
        return out

    def body_at(self, env: int, x: float, y: float, tolerance: float) -> int | None:
        """Index of the moving body of copy ``env`` whose shapes are nearest (x, y)."""
        self.sync()
        bodies = self._shards[self._shard_of[env]].bodies[self._local[env]]
        moving = {b: bodies[b] for b in self._plan.moving.tolist()}
        return nearest_body(moving, float(self._plan.origin_x[env] + x), y, tolerance)

    def close(self) -> None:
        """Stop the shard threads (if any), after the steps handed to them."""
        if self._workers is not None:
            self._workers.close()
            self._workers = None
