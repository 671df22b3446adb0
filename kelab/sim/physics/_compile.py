"""Compile one environment copy of a Scene into its own pymunk Space (internal).

Every copy lives in its own ``pymunk.Space`` in its own frame (origin at (0, 0)), built by
the same sequence of calls, so every copy computes bit-identically to a lone copy (see
docs/world.md, "Exactness"). This module holds the pure construction; the World owns the
spaces, the batched buffers and the stepping.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pymunk

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics._filters import FilterClasses, filter_classes, isolated_filter
from kelab.sim.scene.joints import FixedJoint, PrismaticJoint, RevoluteJoint, SpringJoint
from kelab.sim.scene.scene import Scene
from kelab.sim.scene.shapes import Box, Circle, Material, Polygon, Pose, Segment

#: Tangential sliding speed (m/s) below which a sliding body sticks again (static friction).
STATIC_SPEED_THRESHOLD = 0.01
#: Tangential sliding speed (m/s) above which a sticking body slides (dynamic friction);
#: above STATIC_SPEED_THRESHOLD: a little hysteresis, so a creeping contact does not flicker.
SLIDE_SPEED_THRESHOLD = 0.02
#: Shape collision types of the friction model (docs/world.md, "Materials").
MOVING_TYPE = 1
OTHER_STATIC_TYPE = 2
#: Half length of a prismatic groove without limits, metres.
UNLIMITED_TRAVEL = 1.0e4


@dataclass(frozen=True)
class JointLayout:
    """Constant geometry of one joint, shared by all copies (numbers in copy frames)."""

    kind: str  # "revolute" | "prismatic" | "fixed" | "spring"
    parent: int  # body index, or -1 for the copy's ground frame
    child: int
    anchor_parent: tuple[float, float]  # parent-frame anchor
    anchor_child: tuple[float, float]  # child-frame anchor
    axis: tuple[float, float]  # prismatic axis in the parent frame
    rel_angle0: float  # initial child.angle - parent.angle
    rest_length: float
    actuator: str  # "none" | "effort" | "pd"
    limit: float
    kp: float
    kd: float
    limits: tuple[float, float] | None
    stiffness: float
    damping: float
    error_bias: float | None = None  # Chipmunk's errorBias of its constraints; None: default


@dataclass(frozen=True)
class Layout:
    """Everything the World needs to know about how a Scene maps onto a Space."""

    body_paths: tuple[str, ...]
    joint_paths: tuple[str, ...]
    body_rows: (
        np.ndarray
    )  # (n_bodies,) row of each moving body in a space's batch buffer, -1: static
    n_rows: int  # rows of a batch buffer per space (>= bodies it visits, incl. pymunk's own)
    dynamic: np.ndarray  # (n_bodies,) bool: body moves (dynamic or kinematic)
    cog: np.ndarray  # (n_bodies, 2) centre of gravity in the body frame
    mass: np.ndarray  # (n_bodies,)
    moment: np.ndarray  # (n_bodies,)
    roll_radius: np.ndarray  # (n_bodies,) largest circle radius (0: not round)
    roll_mu: np.ndarray  # (n_bodies,) rolling friction coefficient
    initial: np.ndarray  # (n_bodies, 3) initial poses in the copy frame
    groups: np.ndarray  # (n_bodies,) collision group of each body's shapes
    joints: tuple[JointLayout, ...]
    needs_handler: bool  # static != dynamic friction, or restitutions differ
    # the friction model (needs_handler): per body, the pymunk friction/elasticity of its
    # shapes while sticking / sliding (moving bodies: the combined coefficient with the
    # main static material, whose shapes carry 1.0; other bodies: sqrt of their own)
    stick_value: np.ndarray  # (n_bodies,)
    slide_value: np.ndarray  # (n_bodies,)
    bounce_value: np.ndarray  # (n_bodies,)
    main_static: np.ndarray  # (n_bodies,) bool: a static body of the main static material
    # (static, dynamic friction, restitution) of the main static material, what a moving
    # body's values combine with: the same for every copy (static bodies never change)
    main_material: tuple[float, float, float]
    callback_pairs: tuple[tuple[int, int], ...]  # collision type pairs left to pre_solve
    # per body, what pre_solve combines: sqrt(static friction), sqrt(dynamic friction),
    # restitution of its material, (n_bodies, 3) (the rows of _friction.FrictionTable)
    pair_values: np.ndarray
    filters: FilterClasses  # the users' collision filters, as classes (_filters.py)


#: Allowed overlap of touching shapes before pymunk pushes them apart, in metres. pymunk's
#: default (0.1) is meant for pixel units and lets metre-scale bodies sink 10 cm into the
#: ground; 2 mm is Box2D's order of magnitude and keeps resting contacts quiet.
COLLISION_SLOP = 0.002


def new_space(gravity: tuple[float, float]) -> pymunk.Space:
    """Return an empty Space configured the way every World space is (both layouts)."""
    space = pymunk.Space()
    space.gravity = tuple(gravity)
    space.collision_slop = COLLISION_SLOP
    # cached arbiters == arbiters touching in the last step (exact contact forces)
    space.collision_persistence = 1
    return space


def _rotate(v: tuple[float, float], angle: float) -> tuple[float, float]:
    c, s = math.cos(angle), math.sin(angle)
    return (c * v[0] - s * v[1], s * v[0] + c * v[1])


def make_layout(scene: Scene) -> Layout:
    """Compute the constant layout of a scene (no pymunk objects are kept)."""
    bodies = scene.bodies
    paths = tuple(b.path for b in bodies)
    index = {p: i for i, p in enumerate(paths)}
    dynamic = np.array([b.spec.body_type != "static" for b in bodies], dtype=bool)
    n_dyn = int(dynamic.sum())
    # A batch read visits a space's moving bodies first, in the order they were added
    # (cpSpaceEachBody: dynamic array, then static array). Static bodies never move, so
    # they are not read at all: their pose is their initial pose. (The space's own static
    # body is created lazily by pymunk 7 when ``Space.static_body`` is first read, so its
    # place among the static bodies depends on the scene: never rely on it.)
    rows = np.full(len(bodies), -1, dtype=np.int64)
    rows[dynamic] = np.arange(n_dyn)
    # probe geometry with throwaway bodies (mass, moment, centre of gravity)
    cog = np.zeros((len(bodies), 2))
    mass = np.zeros(len(bodies))
    moment = np.zeros(len(bodies))
    roll_r = np.zeros(len(bodies))
    roll_mu = np.zeros(len(bodies))
    space = pymunk.Space()
    for i, inst in enumerate(bodies):
        body = make_body(inst.spec, inst.pose)
        shapes = make_shapes(body, inst.spec)
        space.add(body, *shapes)
        if inst.spec.body_type == "dynamic":
            cog[i] = tuple(body.center_of_gravity)
            mass[i] = body.mass
            moment[i] = body.moment
        circles = [s.radius for s in inst.spec.shapes if isinstance(s, Circle)]
        if circles and inst.spec.material.rolling_friction > 0:
            roll_r[i] = max(circles)
            roll_mu[i] = inst.spec.material.rolling_friction
    groups = _groups(scene, index)
    filters = filter_classes(scene)
    joints = tuple(_joint_layout(j, index, bodies) for j in scene.joints)
    mats = [b.spec.material for b in bodies]
    needs = any(m.static_friction != m.dynamic_friction for m in mats) or (
        len({m.restitution for m in mats}) > 1
    )
    initial = np.array([(b.pose.x, b.pose.y, b.pose.angle) for b in bodies], dtype=np.float64)
    model = _friction_model(scene, dynamic, groups, needs)
    return Layout(
        body_paths=paths,
        joint_paths=tuple(j.path for j in scene.joints),
        body_rows=rows,
        n_rows=len(bodies) + 1,
        dynamic=dynamic,
        cog=cog,
        mass=mass,
        moment=moment,
        roll_radius=roll_r,
        roll_mu=roll_mu,
        initial=initial.reshape(len(bodies), 3),
        groups=groups,
        joints=joints,
        needs_handler=needs,
        filters=filters,
        **model,
    )


def _friction_model(scene: Scene, dynamic: np.ndarray, groups: np.ndarray, needs: bool) -> dict:
    """Per-body shape values of the callback-free static/dynamic friction model.

    The main static material is the one of most static shapes (ties: the first). Its
    shapes carry friction and elasticity 1.0, so a contact of a moving shape with them
    uses the moving shape's value alone: the Box2D combination with that material,
    ``sqrt(mu_a * mu_b)`` of the static or the dynamic coefficients (the regime is chosen
    per moving body after every step, see _contacts.Contacts.update_friction) and
    ``max(e_a, e_b)``.
    Contacts that this cannot express (two moving shapes, a moving shape and a static
    shape of another material) keep the ``pre_solve`` callback, registered for those
    collision-type pairs only.
    """
    bodies = scene.bodies
    nb = len(bodies)
    mats = [b.spec.material for b in bodies]
    stick = np.array([math.sqrt(m.static_friction) for m in mats], dtype=np.float64)
    slide = np.array([math.sqrt(m.dynamic_friction) for m in mats], dtype=np.float64)
    bounce = np.array([math.sqrt(m.restitution) for m in mats], dtype=np.float64)
    main = np.zeros(nb, dtype=bool)
    pairs: list[tuple[int, int]] = []
    if needs:
        keys = [(m.static_friction, m.dynamic_friction, m.restitution) for m in mats]
        count: dict[tuple[float, float, float], int] = {}
        for i in np.flatnonzero(~dynamic).tolist():
            if bodies[i].spec.shapes:
                count[keys[i]] = count.get(keys[i], 0) + len(bodies[i].spec.shapes)
        if count:
            best = max(count.values())
            gs, gd, gr = next(k for k, v in count.items() if v == best)  # first of the most
            main = np.array([not dynamic[i] and keys[i] == (gs, gd, gr) for i in range(nb)])
        else:  # no static shape: nothing for the moving shapes to combine with
            gs = gd = 1.0
            gr = 0.0
        for i in range(nb):
            m = mats[i]
            if main[i]:
                stick[i] = slide[i] = bounce[i] = 1.0
            elif dynamic[i]:
                stick[i] = math.sqrt(m.static_friction * gs)
                slide[i] = math.sqrt(m.dynamic_friction * gd)
                bounce[i] = max(m.restitution, gr)
        if len({int(g) for g in groups[dynamic]}) > 1:
            pairs.append((MOVING_TYPE, MOVING_TYPE))
        if any(not dynamic[i] and not main[i] and bodies[i].spec.shapes for i in range(nb)):
            pairs.append((MOVING_TYPE, OTHER_STATIC_TYPE))
    return {
        "stick_value": stick,
        "slide_value": slide,
        "bounce_value": bounce,
        "main_static": main,
        "main_material": (gs, gd, gr) if needs else (1.0, 1.0, 0.0),
        "callback_pairs": tuple(pairs),
        "pair_values": np.array(
            [
                (math.sqrt(m.static_friction), math.sqrt(m.dynamic_friction), m.restitution)
                for m in mats
            ],
            dtype=np.float64,
        ).reshape(nb, 3),
    }


def shape_values(
    layout: Layout, coefficients: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The friction model's shape values for per-copy material coefficients.

    ``coefficients``: ``(k, n_bodies, 4)`` static, dynamic and rolling friction and
    restitution per copy and body (``World.body_friction`` / ``body_restitution``; static
    bodies keep the scene's). Returns ``(stick, slide, bounce)``, each ``(k, n_bodies)``:
    what :func:`_friction_model` gives the scene's materials (the same arithmetic, so the
    scene's own coefficients give :attr:`Layout.stick_value` etc. bit for bit), for each
    copy. Without the model (:attr:`Layout.needs_handler` False) a shape carries
    ``sqrt`` of its dynamic friction and restitution (the World then keeps static ==
    dynamic and the scene's one restitution).
    """
    mu_s, mu_d, e = coefficients[..., 0], coefficients[..., 1], coefficients[..., 3]
    if not layout.needs_handler:
        return np.sqrt(mu_d), np.sqrt(mu_d), np.sqrt(e)
    gs, gd, gr = layout.main_material
    moving = layout.dynamic  # static bodies keep the scene's values
    stick = np.where(moving, np.sqrt(mu_s * gs), layout.stick_value)
    slide = np.where(moving, np.sqrt(mu_d * gd), layout.slide_value)
    bounce = np.where(moving, np.maximum(e, gr), layout.bounce_value)
    return stick, slide, bounce


def collision_type(layout: Layout, body: int) -> int:
    """Collision type of a body's shapes under the friction model (0: main static)."""
    if layout.dynamic[body]:
        return MOVING_TYPE
    return 0 if layout.main_static[body] or not layout.needs_handler else OTHER_STATIC_TYPE


def apply_values(shapes: list[pymunk.Shape], layout: Layout, body: int) -> None:
    """Give a body's shapes their initial friction model values (sticking) and type."""
    f = float(layout.stick_value[body])
    e = float(layout.bounce_value[body])
    t = collision_type(layout, body)
    for s in shapes:
        cp.shape_set_friction(cp.shape_ptr(s), f)
        cp.shape_set_elasticity(cp.shape_ptr(s), e)
        if t:
            s.collision_type = t


def register_callbacks(space: pymunk.Space, layout: Layout, materials: dict) -> None:
    """Register ``pre_solve`` for the collision-type pairs the model leaves to it."""
    for a, b in layout.callback_pairs:
        space.on_collision(a, b, pre_solve=pre_solve, data=materials)


def _groups(scene: Scene, index: dict[str, int]) -> np.ndarray:
    """One collision group per robot without self-collision, else one per body."""
    groups = np.arange(1, len(scene.bodies) + 1, dtype=np.int64)
    next_group = len(scene.bodies) + 1
    for robot in scene.robots:
        if not robot.self_collide:
            for path in robot.body_paths:
                groups[index[path]] = next_group
            next_group += 1
    return groups


def _joint_layout(inst, index: dict[str, int], bodies) -> JointLayout:
    spec = inst.spec
    parent = -1 if inst.parent_path is None else index[inst.parent_path]
    child = index[inst.child_path]
    ppose = Pose.identity() if parent < 0 else bodies[parent].pose
    cpose = bodies[child].pose
    rel0 = cpose.angle - ppose.angle
    actuator, limit, kp, kd = "none", 0.0, 0.0, 0.0
    act = getattr(spec, "actuator", None)
    if act is not None:
        if hasattr(act, "kp"):
            actuator, limit, kp, kd = "pd", act.limit, act.kp, act.kd
        else:
            actuator, limit = "effort", act.limit
    axis = (1.0, 0.0)
    rest = 0.0
    if isinstance(spec, SpringJoint):
        kind = "spring"
        anchor_p = tuple(spec.anchor_parent)
        anchor_c = tuple(spec.anchor_child)
        rest = spec.rest_length
    else:
        kind = {RevoluteJoint: "revolute", PrismaticJoint: "prismatic", FixedJoint: "fixed"}[
            type(spec)
        ]
        anchor_p = tuple(getattr(spec, "anchor", (0.0, 0.0)))
        if kind == "fixed":
            anchor_p = ppose.inverse().transform_point((cpose.x, cpose.y))
        world = ppose.transform_point(anchor_p)
        anchor_c = cpose.inverse().transform_point(world)
        if kind == "prismatic":
            ax = spec.axis
            norm = math.hypot(ax[0], ax[1])
            axis = (ax[0] / norm, ax[1] / norm)
    limits = getattr(spec, "limits", None)
    correction = getattr(spec, "error_correction", None)
    return JointLayout(
        kind=kind,
        parent=parent,
        child=child,
        anchor_parent=(float(anchor_p[0]), float(anchor_p[1])),
        anchor_child=(float(anchor_c[0]), float(anchor_c[1])),
        axis=axis,
        rel_angle0=rel0,
        rest_length=rest,
        actuator=actuator,
        limit=float(limit),
        kp=float(kp),
        kd=float(kd),
        limits=None if limits is None else (float(limits[0]), float(limits[1])),
        stiffness=float(getattr(spec, "stiffness", 0.0)),
        damping=float(getattr(spec, "damping", 0.0)),
        # Chipmunk's errorBias: the fraction of the error left after 1 s
        error_bias=None if correction is None else (1.0 - correction) ** 60,
    )


def make_body(spec, pose: Pose) -> pymunk.Body:
    if spec.body_type == "static":
        body = pymunk.Body(body_type=pymunk.Body.STATIC)
    elif spec.body_type == "kinematic":
        body = pymunk.Body(body_type=pymunk.Body.KINEMATIC)
    else:
        body = pymunk.Body()  # mass, moment and centre of gravity come from the shapes
    body.position = (pose.x, pose.y)
    body.angle = pose.angle
    return body


def make_shapes(body: pymunk.Body, spec) -> list[pymunk.Shape]:
    shapes: list[pymunk.Shape] = []
    for shape in spec.shapes:
        if isinstance(shape, Circle):
            off = shape.offset
            shapes.append(pymunk.Circle(body, shape.radius, (off.x, off.y)))
        elif isinstance(shape, (Box, Polygon)):
            shapes.append(pymunk.Poly(body, list(shape.local_points())))
        elif isinstance(shape, Segment):
            a, b = shape.local_points()
            shapes.append(pymunk.Segment(body, a, b, shape.radius))
        else:  # pragma: no cover - the scene validates shape types
            raise ValueError(f"unsupported shape {shape!r}")
    if spec.body_type == "dynamic":
        total = spec.resolved_mass()
        for s, w in zip(shapes, mass_weights(spec), strict=True):
            s.mass = float(total * w)
    _apply_material(shapes, spec.material)
    return shapes


def mass_weights(spec) -> np.ndarray:
    """The share of a dynamic body's mass each of its shapes carries: by area.

    Shape ``k`` of a body of mass ``m`` carries ``float(m * weights[k])`` (one shape: all
    of it, exactly ``m``).
    """
    areas = np.array([s.area() for s in spec.shapes], dtype=np.float64)
    return areas / areas.sum() if areas.sum() > 0 else np.full(len(areas), 1 / len(areas))


def _apply_material(shapes: list[pymunk.Shape], material: Material) -> None:
    # pymunk multiplies the two shapes' values: sqrt makes the product the geometric mean
    for s in shapes:
        s.friction = math.sqrt(material.dynamic_friction)
        s.elasticity = math.sqrt(material.restitution)


class CopySpace:
    """One environment copy: a pymunk Space plus its bodies, shapes and constraints.

    The bodies, shapes and constraints are created once; :meth:`rebuild` moves them into
    a fresh Space in their initial state (the same Chipmunk calls as the first build, on
    bodies put back to a new body's state, constraints re-initialised in place), so a
    rebuilt copy is bit-identical to a new one. Everything goes through Chipmunk directly
    (kelab.sim.physics._chipmunk): pymunk's own ``Space.add``/``remove`` bookkeeping is never
    used for these objects, so their pymunk ``space`` attributes stay None.
    """

    def __init__(self, scene: Scene, layout: Layout, materials: dict | None) -> None:
        """Create the copy's objects and assemble them at the initial configuration."""
        self._scene = scene
        self._layout = layout
        self._handler = materials is not None
        # registers the friction model's pre-solve in C on a new space (use_pre_solve)
        self._pre_solve_c: Callable[[object], None] | None = None
        self.bodies: list[pymunk.Body] = []
        self.body_shapes: list[list[pymunk.Shape]] = []
        self.shape_material: dict[pymunk.Shape, tuple[float, float, float]] = {}
        for i, inst in enumerate(scene.bodies):
            body = make_body(inst.spec, inst.pose)
            shapes = make_shapes(body, inst.spec)
            filt = isolated_filter(layout.filters, int(layout.groups[i]), i)
            m = inst.spec.material
            for s in shapes:
                s.filter = filt
                self.shape_material[s] = (
                    math.sqrt(m.static_friction),
                    math.sqrt(m.dynamic_friction),
                    m.restitution,
                )
            if layout.needs_handler:
                apply_values(shapes, layout, i)
            self.bodies.append(body)
            self.body_shapes.append(shapes)
        # joints to the copy's ground frame hang on this static body: the state of a
        # space's static body (identity transform, no mass), one for every space the copy
        # gets, so each rebuild re-initialises the same constraints in place
        self._ground = pymunk.Body(body_type=pymunk.Body.STATIC)
        calls, biases = [], []
        for jl in layout.joints:
            a = self._ground if jl.parent < 0 else self.bodies[jl.parent]
            made = constraint_calls(jl, cp.body_ptr(a), cp.body_ptr(self.bodies[jl.child]))
            calls.extend(made)
            biases.extend([jl.error_bias] * len(made))
        #: cpConstraint pointers (freed when garbage collected, leaving their space first)
        self.constraints: list = new_constraints(calls)
        self._biases = error_biases(self.constraints, biases)
        self._inits = [
            reinit_call(ctor, c, args)
            for c, (ctor, args) in zip(self.constraints, calls, strict=True)
        ]
        #: The C type of each constraint (``cp.CONSTRAINT_INITS``): what its warm start is.
        self.constraint_types: list[str] = [cp.CONSTRAINT_INITS[ctor][1] for ctor, _ in calls]
        self._body_ptrs = [cp.body_ptr(b) for b in self.bodies]
        self._shape_ptrs = [[cp.shape_ptr(s) for s in shapes] for shapes in self.body_shapes]
        # per moving body, what rebuild() resets: its initial pose, its shapes' friction
        self._resets = []
        for i, inst in enumerate(scene.bodies):
            if layout.dynamic[i]:
                f = float(layout.stick_value[i])
                fric = [(sp, f) for sp in self._shape_ptrs[i]] if layout.needs_handler else []
                pose = inst.pose
                self._resets.append((self._body_ptrs[i], (pose.x, pose.y), pose.angle, fric))
        self.space = self._assemble(first=True)

    @property
    def body_ptrs(self) -> list:
        """The ``cpBody *`` of each body, in scene order."""
        return self._body_ptrs

    def set_reset_friction(self, values: np.ndarray) -> None:
        """The friction each moving body's shapes get back at a rebuild, ``(moving bodies,)``.

        The friction model's sticking values (per-copy materials), the moving bodies in
        scene order; nothing without it.
        """
        if self._layout.needs_handler:
            self._resets = [
                (bp, pos, angle, [(sp, f) for sp, _ in fric])
                for (bp, pos, angle, fric), f in zip(self._resets, values.tolist(), strict=True)
            ]

    @property
    def shape_ptrs(self) -> list:
        """The ``cpShape *`` of every shape, body by body in scene order (one flat list)."""
        return [sp for sps in self._shape_ptrs for sp in sps]

    def _assemble(self, first: bool = False) -> pymunk.Space:
        """Add the (fresh-state) bodies, shapes and constraints to a new Space.

        Chipmunk calls in the order pymunk's ``Space.add(body, *shapes)`` makes them (a
        new space numbers its shapes from 0 again), then the constraints, re-initialised
        in place after the first build (zero warm-start impulses, as new ones).
        """
        space = new_space(self._scene.gravity)
        self.space = space
        ptr = cp.space_ptr(space)
        add_body, add_shape = cp.space_add_body, cp.space_add_shape
        for bp, sps in zip(self._body_ptrs, self._shape_ptrs, strict=True):
            add_body(ptr, bp)
            for sp in sps:
                add_shape(ptr, sp)
        off, add_con = cp.constraint_set_collide_bodies, cp.space_add_constraint
        for (init, args), con in zip(self._inits, self.constraints, strict=True):
            if not first:
                init(*args)
                off(con, 0)
            add_con(ptr, con)
        if not first:  # Init reset the joints' own error biases
            set_bias = cp.constraint_set_error_bias
            for con, bias in self._biases:
                set_bias(con, bias)
        if self._pre_solve_c is not None:
            self._pre_solve_c(ptr)
        elif self._handler and self._layout.needs_handler:
            register_callbacks(space, self._layout, self.shape_material)
        return space

    def use_pre_solve(self, register: Callable[[object], None]) -> None:
        """Let ``register(space_ptr)`` give this copy's spaces their pre-solve (in C).

        Applied to the present space now and to every space a rebuild makes, instead of
        the Python :func:`pre_solve` (kelab/sim/physics/_friction.py: the same rule).
        """
        self._pre_solve_c = register
        register(cp.space_ptr(self.space))

    def rebuild(self) -> None:
        """Make this copy fresh: a new Space with the same objects in their initial state.

        The constraints, shapes and bodies leave the old space. Each moving body gets a new
        body's state: velocities, then ``cpBodyUpdatePosition(body, 0)`` clears the bias
        velocities (it moves the body by ``(v + v_bias) * 0``), force and torque, then the
        pose in the order of :func:`make_body`; with its shapes removed its mass, moment and
        centre of gravity are zero, as a new body's (Chipmunk accumulates them again from
        the shapes). Its shapes get their initial (sticking) friction.
        """
        old = cp.space_ptr(self.space)
        for con in self.constraints:
            cp.space_remove_constraint(old, con)
        rm_shape, rm_body = cp.space_remove_shape, cp.space_remove_body
        for bp, sps in zip(self._body_ptrs, self._shape_ptrs, strict=True):
            for sp in sps:
                rm_shape(old, sp)
            rm_body(old, bp)
        # every moving body back to a new body's state (see above)
        set_v, set_w = cp.body_set_velocity, cp.body_set_angular_velocity
        set_f, set_t = cp.body_set_force, cp.body_set_torque
        set_p, set_a = cp.body_set_position, cp.body_set_angle
        update, set_fric = cp.body_update_position, cp.shape_set_friction
        zero = (0.0, 0.0)
        for bp, pos, angle, fric in self._resets:
            set_v(bp, zero)
            set_w(bp, 0.0)
            update(bp, 0.0)
            set_f(bp, zero)
            set_t(bp, 0.0)
            set_p(bp, pos)
            set_a(bp, angle)
            for sp, f in fric:
                set_fric(sp, f)
        self.space = self._assemble()


def _free_constraint(ptr: object) -> None:
    # as pymunk does for its own constraints: leave the space first (if still in one)
    space = cp.constraint_get_space(ptr)
    if space != cp.NULL:
        cp.space_remove_constraint(space, ptr)
    cp.constraint_free(ptr)


def constraint_calls(
    jl: JointLayout, pa: object, pb: object, shift: tuple[float, float] | None = None
) -> list[tuple[object, tuple]]:
    """Return the Chipmunk constructor calls of one joint, as ``(constructor, args)`` pairs.

    ``pa``/``pb`` are the parent's and the child's ``cpBody`` pointers. The arguments are
    computed once; :func:`new_constraints` runs the calls (every reset of a reused copy
    runs the same calls, so its constraints are bit-identical to the first ones).

    Args:
        jl: The joint's constant geometry.
        pa: Parent ``cpBody *`` (a space's static body for joints to the ground frame).
        pb: Child ``cpBody *``.
        shift: Added to the parent-frame anchor (the copy origin when ``pa`` is the static
            body of a space shared by several copies); None adds nothing.
    """
    px, py = jl.anchor_parent
    if shift is not None:
        px, py = px + shift[0], py + shift[1]
    out: list[tuple[object, tuple]] = []
    if jl.kind == "revolute":
        out.append((cp.pivot_joint_new, (pa, pb, (px, py), jl.anchor_child)))
    elif jl.kind == "fixed":
        out.append((cp.pivot_joint_new, (pa, pb, (px, py), jl.anchor_child)))
        out.append((cp.gear_joint_new, (pa, pb, jl.rel_angle0, 1.0)))
    elif jl.kind == "prismatic":
        lo, hi = jl.limits if jl.limits is not None else (-UNLIMITED_TRAVEL, UNLIMITED_TRAVEL)
        ax, ay = jl.axis
        if shift is None:
            ga = (px + ax * lo, py + ay * lo)
            gb = (px + ax * hi, py + ay * hi)
        else:  # the groove in the copy frame, then shifted (same rounding as a lone copy)
            qx, qy = jl.anchor_parent
            ga = (qx + ax * lo + shift[0], qy + ay * lo + shift[1])
            gb = (qx + ax * hi + shift[0], qy + ay * hi + shift[1])
        out.append((cp.groove_joint_new, (pa, pb, ga, gb, jl.anchor_child)))
        out.append((cp.gear_joint_new, (pa, pb, jl.rel_angle0, 1.0)))
    elif jl.kind == "spring":
        out.append(
            (
                cp.damped_spring_new,
                (pa, pb, (px, py), jl.anchor_child, jl.rest_length, jl.stiffness, jl.damping),
            )
        )
    if jl.kind == "revolute" and jl.limits is not None:
        lo, hi = jl.limits
        out.append((cp.rotary_limit_joint_new, (pa, pb, lo + jl.rel_angle0, hi + jl.rel_angle0)))
    return out


def error_biases(constraints: list, biases: list[float | None]) -> list[tuple[object, float]]:
    """Set each constraint's ``errorBias`` where its joint has one; return those pairs.

    ``biases`` holds, per constraint, its joint's :attr:`JointLayout.error_bias` (None:
    Chipmunk's default). Re-initialising a constraint resets its bias, so every rebuild
    sets the returned pairs again (C calls only, none for joints without one).
    """
    pairs = [(c, b) for c, b in zip(constraints, biases, strict=True) if b is not None]
    set_bias = cp.constraint_set_error_bias
    for c, b in pairs:
        set_bias(c, b)
    return pairs


def new_constraints(calls: list[tuple[object, tuple]], managed: bool = True) -> list:
    """Run constructor calls of :func:`constraint_calls`; return the new constraints.

    They are plain ``cpConstraint`` pointers with ``collide_bodies`` off, made without
    pymunk's Python wrappers. ``managed``: freed when garbage collected (leaving their
    space first); otherwise the caller frees them with :func:`free_constraints`.
    """
    off = cp.constraint_set_collide_bodies
    out = []
    for ctor, args in calls:
        c = ctor(*args)
        off(c, 0)
        out.append(c)
    if managed:
        gc, free = cp.managed, _free_constraint
        out = [gc(c, free) for c in out]
    return out


def reinit_call(ctor: object, constraint: object, args: tuple) -> tuple[object, tuple]:
    """The call that re-initialises ``constraint`` (made by ``ctor(*args)``) in place.

    Run on a constraint outside any space, it leaves what the constructor left (zero
    accumulated impulses, default max force and bias), without freeing and allocating.
    Run ``cpConstraintSetCollideBodies(c, 0)`` after it, as :func:`new_constraints` does.
    """
    return cp.constraint_reinit_call(ctor, constraint, args)


def free_constraints(constraints: list) -> None:
    """Free unmanaged constraints of :func:`new_constraints` (leaving their space first)."""
    for c in constraints:
        _free_constraint(c)


def build_copy(scene: Scene, layout: Layout) -> CopySpace:
    """Build one copy's Space at its initial configuration."""
    return CopySpace(scene, layout, materials={})


def pre_solve(arbiter: pymunk.Arbiter, space: pymunk.Space, data: dict) -> None:
    """Pick static or dynamic friction from the sliding speed; restitution = max."""
    sa, sb = arbiter.shapes
    ma = data.get(sa)
    mb = data.get(sb)
    if ma is None or mb is None:
        return
    points = arbiter.contact_point_set.points
    if points:
        p = points[0].point_a
        va = sa.body.velocity_at_world_point(p)
        vb = sb.body.velocity_at_world_point(p)
        n = arbiter.normal
        rx, ry = vb.x - va.x, vb.y - va.y
        vn = rx * n.x + ry * n.y
        tx, ty = rx - vn * n.x, ry - vn * n.y
        sliding = tx * tx + ty * ty >= STATIC_SPEED_THRESHOLD * STATIC_SPEED_THRESHOLD
    else:
        sliding = True
    arbiter.friction = ma[1] * mb[1] if sliding else ma[0] * mb[0]
    arbiter.restitution = max(ma[2], mb[2])
