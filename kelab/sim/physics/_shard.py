"""The packed layout's shards: one pymunk Space holding a run of copies (internal).

:class:`Plan` holds the constant facts every shard of a packed World shares (origins,
which static shapes become one stretched ground, hash cells, collision filters);
:class:`Shard` builds one shard's space and rebuilds its copies on reset. The backend
across shards, with their threads, is _packed.py. See docs/world.md, "Layouts".

Construction choices that make a copy's result independent of its neighbours and of the
sharding (so ``num_threads`` never changes a bit):

- copies never touch: each copy's shapes carry category bit ``i % 31`` and collide only with
  that bit and the shared ground's bit 31; robots without self-collision get one group per
  copy. Copies with the same bit are ``31 * spacing`` apart. The users' collision filters
  take bits of their own, and fewer copies' slots (_filters.PackedFilters).
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
import weakref
from typing import NamedTuple

import numpy as np
import pymunk

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._batch import FORCE, GET, NO_INTS, READ, SET
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
from kelab.sim.physics._filters import PackedFilters
from kelab.sim.physics._friction import FrictionTable, friction_module
from kelab.sim.physics._guard import native_module
from kelab.sim.physics._limits import STATE_BOUND
from kelab.sim.physics._reset import KeptReset, eligible
from kelab.sim.scene.scene import Scene
from kelab.sim.scene.shapes import Box

#: x of copy 0's origin in a shard space: mid binade [2**20, 2**21), grid 2**-32 m.
BASE_X = 1.5 * 2.0**20
#: Metres of copy origins a shard can hold (num_envs * spacing must not exceed it).
CAPACITY = 2.0**16
#: Smallest spatial hash cell (m): 2**31 cells of it span 134e6 m, far beyond every
#: coordinate a step can reach from within the World's limits (_limits.STATE_LIMITS).
MIN_CELL = 2.0**-4
#: Hash ids of static shapes start here (far from every moving shape's id).
_STATIC_IDS = 1 << 56
#: Longest piece of a ray that _first_hit_near queries by one bounding box, in cells.
_PIECE_CELLS = 8


class JointTables(NamedTuple):
    """Where a C read computes its rows' joint state (the C calls take it as a tuple).

    The World's joint cache's arrays and the C helper's ``joint_revs`` tables
    (kelab/sim/kinematics.py; every joint revolute or fixed).
    """

    pos: np.ndarray
    """float64 ``(num_envs, n_joints)``: the joint positions, written in place."""
    vel: np.ndarray
    """float64 ``(num_envs, n_joints)``: the joint velocities, written in place."""
    cols: np.ndarray
    """int64: the revolute joints' columns."""
    child: np.ndarray
    """int64: each one's child body."""
    parent: np.ndarray
    """int64: each one's parent body (-1: the world)."""
    rel: np.ndarray
    """float64: each one's initial relative angle."""


class StateWrite(NamedTuple):
    """A reset's state write and read-back for copies of one shard (C helper only).

    The reset copies' states, with the shard's tables (every local copy's, indexed by the
    local copies being reset): :meth:`Shard.reset_states` writes and reads them right
    after the rebuild, in the same C call where the copies are reset in place
    (_native_reset.c ``reset``'s ``then``).
    """

    poses: np.ndarray
    """float64 ``(copies, bodies, 3)``: x, y, angle of every body of each reset copy."""
    vels: np.ndarray
    """float64 ``(copies, bodies, 3)``: vx, vy, w."""
    out: np.ndarray
    """The World's state rows (``raw``) the bodies are read into."""
    addrs: np.ndarray
    """uint64 ``(local copies * moving,)``: every moving body's ``cpBody *``."""
    rows: np.ndarray
    """int64, the same length: each body's row of ``out``."""
    origins: np.ndarray
    """float64, the same length: each body's copy's origin x (added on write, subtracted
    on read)."""
    moving: np.ndarray
    """int64: the moving bodies' indices into ``poses``' bodies (the plan's)."""
    forces: np.ndarray | None = None
    """The World's held forces ``(num_envs, bodies, 3)`` (a row per row of ``out``): the
    reset copies' rows are zeroed; None: left alone."""
    joints: JointTables | None = None
    """Where the reset copies' joint state is computed from the rows read
    (``JointCache.reset_tables``); None: not."""


def body_writes(
    poses: np.ndarray, vels: np.ndarray, moving: np.ndarray, ox: np.ndarray
) -> np.ndarray:
    """The C helper's ``write_bodies`` rows: angle, x + origin, y, vx, vy, w per moving body.

    ``poses`` and ``vels`` ``(copies, bodies, 3)``, ``moving`` their moving bodies' indices,
    ``ox`` ``(copies,)`` the copies' origins x; returns ``(copies, len(moving), 6)``.

    >>> body_writes(np.array([[[1.0, 2.0, 0.5]]]), np.zeros((1, 1, 3)), np.array([0]),
    ...             np.array([10.0])).tolist()
    [[[0.5, 11.0, 2.0, 0.0, 0.0, 0.0]]]
    """
    states = np.empty((poses.shape[0], moving.size, 6))  # C order, whatever the inputs' order
    states[:, :, 0:3] = poses[:, moving][:, :, _ANGLE_FIRST]
    states[:, :, 1] += ox[:, None]  # x + origin
    states[:, :, 3:6] = vels[:, moving]
    return states


#: A pose's columns (x, y, angle) in the order the C helper's write_bodies takes them.
_ANGLE_FIRST = np.array([2, 0, 1])


def packed_spacing(env_spacing: float) -> float:
    """Return ``env_spacing`` rounded up to a power of two (metres)."""
    return 2.0 ** math.ceil(math.log2(env_spacing))


class Plan:
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
        spans = []  # (body, shape, its span along x) of the repeated shapes
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
                if not flat:
                    spans.append((b, k, max(xs) - min(xs)))
        # bodies built per copy: moving ones, per-copy statics, shared statics with repeats
        self.per_copy_static = [
            b
            for b in np.flatnonzero(static).tolist()
            if bodies[b].per_environment or b in self.repeat
        ]
        self.shared_bodies = sorted(self.stretch)
        self.moving_shapes = sum(len(bodies[b].spec.shapes) for b in self.moving.tolist())
        self.group_stride = int(layout.groups.max()) + 1 if nb else 1
        #: The shape filters: copies apart (copies of one slot are ``slots`` spacings apart)
        self.filters = PackedFilters(
            layout.filters,
            layout.groups,
            self.group_stride,
            [*self.moving.tolist(), *self.per_copy_static],
            self.shared_bodies,
        )
        slots = self.filters.slots
        for b, k, span in spans:
            if span >= (slots - 1) * spacing:
                raise ValueError(
                    f"World: layout='packed' repeats shared shape {k} of {bodies[b].path!r} in "
                    f"every copy, and it spans {span:g} m along x, which would reach copies "
                    f"{slots} spacings away (spacing {spacing} m); use an env_spacing > "
                    f"{span / (slots - 1):g}, a flat Box ground (Terrain.plane, built once), "
                    "or layout='isolated'"
                )
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
        return self.filters.copy(c, body)


#: C calls, each ``(function, args)``, made in order.
Calls = tuple[tuple[object, tuple], ...]


class Recipe(NamedTuple):
    """The C calls that rebuild one copy of a shard (made once by ``Shard._add_moving``)."""

    adds: list[tuple]
    """Per moving body: (body pointer, initial angle, initial position, shape pointers)."""
    inits: list[tuple]
    """The constraints' re-init calls (each constructor with its arguments)."""
    shape_ptrs: list
    """Every moving shape's pointer, in the order the adds hold them."""
    body_ptrs: list
    """Every moving body's pointer (``adds[k][0]``)."""
    frictions: list[tuple]
    """(shape pointer, initial friction) where the layout needs a friction handler."""
    biased: list[tuple]
    """(constraint, error bias) of the joints that set one."""


def _free_parts(parts: list[tuple[list, list, list]]) -> None:
    """Free the unmanaged constraints of a shard's copies (its finalizer)."""
    for _, _, cons in parts:
        free_constraints(cons)


class Shard:
    """One shard: a pymunk Space with copies ``copies`` (global indices, ascending)."""

    def __init__(
        self, plan: Plan, copies: np.ndarray, friction: FrictionTable | None = None
    ) -> None:
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
                s.filter = plan.filters.ground(b)
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
        self.recipe: list[Recipe | None] = [None] * n  # per copy: the C calls of a rebuild
        self._shape_body: np.ndarray | slice | None = None  # each moving shape's body
        # per place flag, per copy: the rebuild's calls, in two flat sequences around the
        # friction writes (made lazily; the frictions are read from _reset_fric then)
        self._calls: dict[bool, list[tuple | None]] = {True: [None] * n, False: [None] * n}
        # per copy: its static joint anchors by parent (-1: ground frame; see _anchor)
        self.anchors: list[dict[int, pymunk.Body]] = [{} for _ in range(n)]
        # the constraints are unmanaged pointers (a rebuild frees the old ones at once):
        # free the last ones with the shard (before its space goes, which detaches them)
        weakref.finalize(self, _free_parts, self.parts)
        for cl in range(n):
            self.parts.append(self._create_moving(cl))
            self._add_moving(cl, first=True)
        # per copy, per moving shape (the recipe's order): the friction a rebuild or an
        # in-place reset gives back, the friction model's sticking value for the scene's
        # materials until a copy's own are set (set_reset_friction); None without the model
        self._reset_fric: np.ndarray | None = None
        if lay.needs_handler:
            self._reset_fric = np.array(
                [[f for _, f in r.frictions] for r in self.recipe if r is not None],
                dtype=np.float64,
            ).reshape(n, plan.moving_shapes)
        self._native_module = native_module()  # the C helper, or None
        #: the friction model in C (kelab/sim/physics/_friction.py), or None
        self.friction_c = self._friction(friction)
        if self.friction_c is not None and friction is not None and friction.pairs:
            friction.register(self.ptr, self.friction_c)
        elif lay.needs_handler:
            register_callbacks(space, lay, self.materials)
        #: Whether each step chooses its copies' friction regimes (the regime rule in C)
        self.chooses = self.friction_c is not None and friction is not None and friction.chooses
        self._space_addrs = np.array([cp.address(self.ptr)], dtype=np.uint64)
        self._copy_ids = np.ascontiguousarray(copies, dtype=np.int64)
        #: resets that keep the copies' shapes and constraints in the space (None: no C
        #: helper, or a scene it does not apply to; see _reset.py)
        self.kept = self._kept()
        kd = plan.moving.size
        self.kd = kd
        self.nbodies = n * kd + 1 + len(self.shared) + n * len(plan.per_copy_static)
        self.rbuf, self.rdata, self.rfa = self._buffer(self.nbodies * 6, READ)
        # read_into's tables: per moving body of each copy, its cpBody *, its row of the
        # World's (num_envs * nb, 6) state array and its copy's origin
        nb = len(lay.body_paths)
        #: every moving body's ``cpBody *`` (uint64), copy by copy in body order
        self.body_addrs = np.array(
            [cp.address(b) for r in self.recipe if r is not None for b in r.body_ptrs],
            dtype=np.uint64,
        )
        self._read_rows = (copies[:, None] * nb + plan.moving).ravel().astype(np.int64)
        self._read_origins = np.repeat(plan.origin_x[copies], kd)
        self._never_sleeps = space.sleep_time_threshold == math.inf
        self.fbuf, self.fdata, self.ffa = self._buffer(self.nbodies * 3, FORCE)
        #: The C helper's whole step of this shard, reading into the World's rows (made
        #: by :meth:`bind`; None: without the helper, :meth:`step` and a read)
        self.stepper: object | None = None

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
        self.recipe[cl] = Recipe(
            adds,
            inits,
            [p for add in adds for p in add[3]],
            [add[0] for add in adds],
            fric,
            biased,
        )

    def set_reset_friction(self, locals_: np.ndarray, values: np.ndarray) -> None:
        """The friction local copies' moving shapes get back at a rebuild.

        ``values``: ``(len(locals_), moving bodies)``, the friction model's sticking value
        of each body for the copy's materials; only where the layout has the model (else
        a rebuild keeps the shapes' friction). One table, which the rebuilds and the
        in-place resets (:class:`KeptReset`) read when they run.
        """
        if self._reset_fric is None or not locals_.size:
            return
        if self._shape_body is None:  # one value per shape, in the recipe's order
            counts = [len(s) for s in self.parts[0][1]] if self.parts else []
            body = np.repeat(np.arange(self.kd), counts)
            one = body.size == self.kd  # one shape a body: the columns as they are
            self._shape_body = slice(None) if one else body
        self._reset_fric[locals_] = values[:, self._shape_body]

    def _friction(self, table: FrictionTable | None) -> object | None:
        """The C helper's friction model over this shard's bodies (None: Python's rules).

        Every body with shapes in the space gets its row: a copy's own bodies
        ``copy * nb + body``, the stretched ground its shared row.
        """
        module = friction_module()
        if table is None or module is None or not (table.pairs or table.chooses):
            return None
        nb = table.nb
        bodies = [(cp.address(cp.body_ptr(body)), table.shared_row(b))
                  for b, body in self.shared.items()]  # fmt: skip
        shapes: list[list] = [[] for _ in range(table.num_envs * nb)]
        moving = self.plan.moving.tolist()
        for cl, c in enumerate(self.copies.tolist()):
            for b, body in enumerate(self.bodies[cl]):
                if body is not None:
                    bodies.append((cp.address(cp.body_ptr(body)), c * nb + b))
            for b, own in zip(moving, self.parts[cl][1], strict=True):
                shapes[c * nb + b] = [cp.shape_ptr(s) for s in own]
        return table.native(module, bodies, shapes, self.plan.origin_x)

    def _kept(self) -> KeptReset | None:
        """The in-place resets of this shard, where the C helper is built and they apply."""
        module = self._native_module
        bodies, shapes = [p[0] for p in self.parts], [p[1] for p in self.parts]
        if module is None or not eligible(self.space, bodies, shapes):
            return None
        recipes = [r for r in self.recipe if r is not None]
        # a -0.0 pose would be written back as +0.0 by the realignment: keep the rebuild
        if any(v == 0.0 and math.copysign(1.0, v) < 0
               for r in recipes for _, angle, pos, _ in r.adds for v in (angle, *pos)):  # fmt: skip
            return None
        constraints = [
            [(c, cp.ctype_of(args[0])) for c, (_, args) in zip(p[2], r.inits, strict=True)]
            for p, r in zip(self.parts, recipes, strict=True)
        ]
        if any(t not in cp.CONSTRAINT_MIRRORS for own in constraints for _, t in own):
            return None  # a constraint type whose layout is not mirrored
        adds = [r.adds for r in recipes]
        return KeptReset(
            module, self.ptr, adds, constraints, self._reset_fric, self.plan.moving_shapes
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
            body.position = (BASE_X + pose.x, pose.y)  # as the shared body (Shard.__init__)
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
        Chipmunk calls, no pymunk bookkeeping, per copy in one flat sequence
        (:meth:`_rebuild_calls`).

        ``place=False`` leaves out the velocity and pose calls, for a caller that writes
        every moving body's pose and velocity next (:meth:`PackedBackend.write_states`):
        those writes set angle, position (from the angle, the centre of gravity and the
        position alone), velocity and angular velocity whatever they were, so the result
        is the same bits.
        """
        kept = self.kept
        if kept is not None and kept.reset(locals_, place):
            return
        seqs = self._calls[place]
        fric, set_friction = self._reset_fric, cp.shape_set_friction
        for cl in locals_.tolist():
            seq = seqs[cl]
            if seq is None:
                seq = seqs[cl] = self._rebuild_calls(cl, place)
            head, shapes, tail = seq
            for call, args in head:
                call(*args)
            if fric is not None:  # the copy's frictions as they are now
                for sp, f in zip(shapes, fric[cl].tolist(), strict=True):
                    set_friction(sp, f)
            for call, args in tail:
                call(*args)
        if kept is not None:
            kept.resync()  # the rebuild moved the copies' constraint blocks

    def reset_states(
        self,
        locals_: np.ndarray,
        poses: np.ndarray,
        vels: np.ndarray,
        forces: np.ndarray | None = None,
        joints: JointTables | None = None,
    ) -> None:
        """Rebuild local copies ``locals_`` (ascending), write their states, read them back.

        ``poses`` and ``vels`` ``(len(locals_), bodies, 3)``, C-ordered float64, read into
        the World's rows (:meth:`bind`'s ``raw``). With the in-place reset (:attr:`kept`)
        all three are one C call without the GIL; else :meth:`rebuild`, then the C
        helper's ``write_bodies`` and ``read_rows``: the same setters and getters in the
        same order, so the same bits (C helper only). ``forces`` and ``joints``: as
        :class:`StateWrite`'s, after the read (in that call, or here the same values).
        """
        m = self._state_tables[-1].size
        if m:  # (the C call finds a copy's rows by its moving bodies')
            write = StateWrite(poses, vels, *self._state_tables, forces, joints)
        else:
            write = StateWrite(poses, vels, *self._state_tables)
        kept = self.kept
        if kept is not None and kept.reset(locals_, False, write):
            if not m:
                self._after_read(locals_, forces, joints)
            return
        native = self._native_module
        self.rebuild(locals_, False)
        at = (locals_[:, None] * m + np.arange(m)).ravel()
        addrs, origins = write.addrs[at], write.origins[at]
        native.write_bodies(addrs, body_writes(poses, vels, write.moving, origins[::m]))
        native.read_rows(addrs, write.out, write.rows[at], origins)
        self._after_read(locals_, forces, joints)

    def _after_read(
        self, locals_: np.ndarray, forces: np.ndarray | None, joints: JointTables | None
    ) -> None:
        """:class:`StateWrite`'s ``forces`` and ``joints`` of :meth:`reset_states`, here."""
        copies = self.copies[locals_]
        if forces is not None:
            forces[copies] = 0.0
        if joints is not None:
            j, raw = joints, self._state_tables[0]
            self._native_module.joint_revs(
                raw, raw.shape[1], j.pos, j.vel, j.pos.shape[1], *j[2:], copies
            )

    def _rebuild_calls(self, cl: int, place: bool) -> tuple[Calls, tuple[object, ...], Calls]:
        """Local copy ``cl``'s rebuild (:meth:`rebuild`) as flat sequences of C calls.

        Made once per copy and ``place``: every argument is fixed per copy (its bodies,
        shapes and constraints are reused), and a flat ``call(*args)`` loop is cheaper
        than walking the recipe's nested lists each time: ``set_body_states`` of 12 of
        256 Humanoid copies, 67 -> 64 us per copy (the rest is Chipmunk's own work).
        Returns the calls before the friction writes, the shapes those write (their
        values read from the copy's row of the reset frictions at each rebuild: a
        copy's materials change without remaking these) and the calls after them.
        """
        ptr = self.ptr
        cons = self.parts[cl][2]
        adds, inits, shape_ptrs, _, fric, biased = self.recipe[cl]
        zero = (0.0, 0.0)
        head: list[tuple[object, tuple]] = []
        head += [(cp.space_remove_constraint, (ptr, con)) for con in reversed(cons)]
        head += [(cp.space_remove_shape, (ptr, sp)) for sp in shape_ptrs]
        seq: list[tuple[object, tuple]] = []
        seq.append((cp.space_set_shape_id_counter, (ptr, cl * self.plan.moving_shapes)))
        for bp, angle, pos, sps in adds:
            if place:
                seq += [(cp.body_set_velocity, (bp, zero)),
                        (cp.body_set_angular_velocity, (bp, 0.0))]  # fmt: skip
            # zeroes the bias velocities the last solve left
            seq.append((cp.body_update_position, (bp, 0.0)))
            if place:
                seq += [(cp.body_set_angle, (bp, angle)), (cp.body_set_position, (bp, pos))]
            seq += [(cp.space_add_shape, (ptr, sp)) for sp in sps]
        for (init, args), con in zip(inits, cons, strict=True):
            seq += [(init, args), (cp.constraint_set_collide_bodies, (con, 0)),
                    (cp.space_add_constraint, (ptr, con))]  # fmt: skip
        # Init reset the joints' own error biases
        seq += [(cp.constraint_set_error_bias, (con, bias)) for con, bias in biased]
        return tuple(head), tuple(sp for sp, _ in fric), tuple(seq)

    def fetch(self) -> None:
        """Batch-read the shard into its read buffer (C only: releases the GIL)."""
        self.rfa.num = 0
        cp.space_each_body(self.ptr, GET, self.rdata)

    def read_into(self, native: object, raw: np.ndarray) -> None:
        """Read the moving bodies into their rows of ``raw`` (copy frames), in C.

        What :meth:`fetch` and the backend's store of its buffer give, bit for bit (the
        same Chipmunk getters, the same subtraction of the origin), without the buffer or
        the static bodies, and without the GIL.
        """
        native.read_rows(self.body_addrs, raw, self._read_rows, self._read_origins)

    def bind(self, raw: np.ndarray, forces: np.ndarray | None = None) -> None:
        """Step in one C call, reading into ``raw`` (the World's state rows; C helper only).

        The helper's ``Stepper`` runs :meth:`step`'s three C calls and :meth:`read_into`'s
        as one (the same calls, in the same order: the same bits), releasing the GIL
        once: the thread stepping this shard takes the GIL once per step instead of at
        every call's return, so the two threads of a 2-thread World hand it to each other
        far less often (each hand-over waits for the other thread to give it up). While it
        reads it checks the values against ``STATE_BOUND`` (the limits' fast check).

        ``forces``: the World's held forces ``(num_envs, n_bodies, 3)`` (the backend's own
        array, written in place), each body's read at its row, as ``raw``'s; None: this
        shard's buffer, :meth:`set_forces`.
        """
        native = self._native_module
        if native is None:
            return
        #: :meth:`reset_states`' tables: out, and per moving body of every local copy its
        #: ``cpBody *``, its row of ``raw`` and its copy's origin x; the moving bodies
        self._state_tables = (
            raw,
            self.body_addrs,
            self._read_rows,
            self._read_origins,
            np.ascontiguousarray(self.plan.moving, dtype=np.int64),
        )
        self.stepper = native.Stepper(
            cp.address(self.ptr),
            self.body_addrs,
            self.fbuf if forces is None else forces,
            self._never_sleeps,
            self.friction_c if self.chooses else None,
            self._copy_ids,
            raw,
            self._read_rows,
            self._read_origins,
            STATE_BOUND,
            forces is not None,
        )

    def set_forces(self, forces: np.ndarray) -> None:
        """Hold ``(n_local, n_moving, 3)`` forces (local copy order) for the next steps."""
        n, kd = self.copies.size, self.kd
        self.fbuf[: n * kd * 3].reshape(n, kd, 3)[:] = forces

    def step(self, dt: float) -> None:
        """Write the held forces, take one physics step, choose the friction regimes.

        Each in C, releasing the GIL (the regimes where the C helper runs the friction
        model: ``_friction.py``; else the World chooses them after the step).

        With the C helper the forces go to the moving bodies only (the static bodies' rows
        of the buffer are zeros and stay unread), written to their fields: the setters
        the batch write calls also wake the body, which in a space that never sleeps
        writes an idle time of 0 where it is 0 already (tests/sim/test_packed_reset.py).
        """
        native = self._native_module
        if native is not None:
            native.write_forces(self.body_addrs, self.fbuf, self._never_sleeps)
        else:
            self.ffa.num = 0
            cp.space_each_body(self.ptr, SET, self.fdata)
        cp.space_step(self.ptr, dt)
        if self.chooses:  # the friction regimes for the next step, in C (no GIL)
            self.friction_c.update(self._space_addrs, self._copy_ids)

    def segment_first(
        self, start: tuple[float, float], end: tuple[float, float], filt: pymunk.ShapeFilter
    ) -> float:
        """Alpha of the first hit of the ray ``start -> end`` (space frame; NaN: none).

        What ``segment_query_first`` (radius 0) gives in a space without a spatial hash:
        the least alpha below 1 of the shapes ``filt`` lets through (sensors too, in
        pymunk 7), from each shape's own segment query.

        Chipmunk's hash walk is wrong for a ray that starts exactly on a cell edge and
        runs towards lower x (or y): it starts in the cell above (right of) the edge,
        which the ray never enters, and then visits every cell one cell's alpha after the
        ray enters it, so it stops once a hit found so far (the stretched ground is in
        every bucket) lies before that late visit, missing a nearer shape in the cell.
        Such rays test the shapes near the ray instead (:func:`_first_hit_near`); every
        other ray keeps the walk, so its results do not change.
        """
        inv = 1.0 / self.plan.cell  # the walk's cell coordinates, as Chipmunk's
        ax, ay = start[0] * inv, start[1] * inv
        late = (end[0] * inv < ax and ax.is_integer()) or (end[1] * inv < ay and ay.is_integer())
        if late:
            return _first_hit_near(self.space, start, end, filt, self.plan.cell)
        hit = self.space.segment_query_first(start, end, 0.0, filt)
        return math.nan if hit is None else hit.alpha


def _first_hit_near(
    space: pymunk.Space,
    start: tuple[float, float],
    end: tuple[float, float],
    filt: pymunk.ShapeFilter,
    cell: float,
) -> float:
    """``segment_query_first``'s alpha from the shapes whose boxes meet the ray's (NaN: none).

    The ray is cut into pieces of at most ``_PIECE_CELLS`` cells, each queried by its
    bounding box (padded by 1/1024 of a cell, far above the rounding of its ends), in
    order, until the least alpha found lies before the next piece: a shape the ray meets
    has its bounding box meet the piece's, so the least alpha is exact. Each shape's
    alpha is its own segment query with the whole ray, the call Chipmunk's first-hit
    query makes, so the result is the walk's when the walk is right.
    """
    (sx, sy), (ex, ey) = start, end
    n = max(1, math.ceil(math.hypot(ex - sx, ey - sy) / (_PIECE_CELLS * cell)))
    pad = cell / 1024.0
    best = 1.0  # Chipmunk keeps a hit below alpha 1 only
    seen: set[pymunk.Shape] = set()
    cuts = [(sx + (ex - sx) * k / n, sy + (ey - sy) * k / n) for k in range(1, n)]
    ends = [(sx, sy), *cuts, (ex, ey)]
    for k in range(n):
        if best <= k / n:  # a shape not met yet starts after alpha k / n
            break
        (x0, y0), (x1, y1) = ends[k], ends[k + 1]
        box = pymunk.BB(min(x0, x1) - pad, min(y0, y1) - pad, max(x0, x1) + pad, max(y0, y1) + pad)
        for shape in space.bb_query(box, filt):
            if shape in seen:
                continue
            seen.add(shape)
            hit = shape.segment_query(start, end, 0.0)
            if hit is not None and hit.alpha < best:
                best = hit.alpha
    return best if best < 1.0 else math.nan
