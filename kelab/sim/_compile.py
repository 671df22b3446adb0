"""Compile one environment copy of a Scene into its own pymunk Space (internal).

Every copy lives in its own ``pymunk.Space`` in its own frame (origin at (0, 0)), built by
the same sequence of calls, so every copy computes bit-identically to a lone copy (see
docs/world.md, "Exactness"). This module holds the pure construction; the World owns the
spaces, the batched buffers and the stepping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pymunk

from kelab.sim.joints import FixedJoint, PrismaticJoint, RevoluteJoint, SpringJoint
from kelab.sim.scene import Box, Circle, Polygon, Pose, Scene, Segment
from kelab.sim.shapes import Material

#: Relative tangential speed (m/s) below which a contact uses static friction.
STATIC_SPEED_THRESHOLD = 0.01
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
    joints = tuple(_joint_layout(j, index, bodies) for j in scene.joints)
    mats = [b.spec.material for b in bodies]
    needs = any(m.static_friction != m.dynamic_friction for m in mats) or (
        len({m.restitution for m in mats}) > 1
    )
    initial = np.array([(b.pose.x, b.pose.y, b.pose.angle) for b in bodies], dtype=np.float64)
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
    )


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
        areas = np.array([s.area() for s in spec.shapes], dtype=np.float64)
        total = spec.resolved_mass()
        weights = areas / areas.sum() if areas.sum() > 0 else np.full(len(areas), 1 / len(areas))
        for s, w in zip(shapes, weights, strict=True):
            s.mass = float(total * w)
    _apply_material(shapes, spec.material)
    return shapes


def _apply_material(shapes: list[pymunk.Shape], material: Material) -> None:
    # pymunk multiplies the two shapes' values: sqrt makes the product the geometric mean
    for s in shapes:
        s.friction = math.sqrt(material.dynamic_friction)
        s.elasticity = math.sqrt(material.restitution)


class CopySpace:
    """One environment copy: a pymunk Space plus its bodies and constraints."""

    def __init__(self, scene: Scene, layout: Layout, materials: dict | None) -> None:
        """Build the copy at its initial configuration (deterministic call sequence)."""
        space = pymunk.Space()
        space.gravity = tuple(scene.gravity)
        # cached arbiters == arbiters touching in the last step (exact contact forces)
        space.collision_persistence = 1
        self.space = space
        self.bodies: list[pymunk.Body] = []
        self.shape_material: dict[pymunk.Shape, tuple[float, float, float]] = {}
        self.body_group: list[int] = []
        for i, inst in enumerate(scene.bodies):
            body = make_body(inst.spec, inst.pose)
            shapes = make_shapes(body, inst.spec)
            group = int(layout.groups[i])
            for s in shapes:
                s.filter = pymunk.ShapeFilter(group=group)
                m = inst.spec.material
                self.shape_material[s] = (
                    math.sqrt(m.static_friction),
                    math.sqrt(m.dynamic_friction),
                    m.restitution,
                )
            space.add(body, *shapes)
            self.bodies.append(body)
        self.constraints: list[pymunk.Constraint] = []
        for jl in layout.joints:
            self.constraints.extend(self._joint(jl))
        if materials is not None and layout.needs_handler:
            space.on_collision(pre_solve=pre_solve, data=self.shape_material)

    def _joint(self, jl: JointLayout) -> list[pymunk.Constraint]:
        a = self.space.static_body if jl.parent < 0 else self.bodies[jl.parent]
        out = make_constraints(jl, a, self.bodies[jl.child])
        self.space.add(*out)
        return out


def make_constraints(
    jl: JointLayout, a: pymunk.Body, b: pymunk.Body, shift: tuple[float, float] | None = None
) -> list[pymunk.Constraint]:
    """Return the pymunk constraints of one joint between ``a`` (parent) and ``b`` (child).

    Args:
        jl: The joint's constant geometry.
        a: Parent body (a space's static body for joints to the ground frame).
        b: Child body.
        shift: Added to the parent-frame anchor (the copy origin when ``a`` is the static
            body of a space shared by several copies); None adds nothing.
    """
    px, py = jl.anchor_parent
    if shift is not None:
        px, py = px + shift[0], py + shift[1]
    out: list[pymunk.Constraint] = []
    if jl.kind == "revolute":
        out.append(pymunk.PivotJoint(a, b, (px, py), jl.anchor_child))
    elif jl.kind == "fixed":
        out.append(pymunk.PivotJoint(a, b, (px, py), jl.anchor_child))
        out.append(pymunk.GearJoint(a, b, jl.rel_angle0, 1.0))
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
        out.append(pymunk.GrooveJoint(a, b, ga, gb, jl.anchor_child))
        out.append(pymunk.GearJoint(a, b, jl.rel_angle0, 1.0))
    elif jl.kind == "spring":
        out.append(
            pymunk.DampedSpring(
                a, b, (px, py), jl.anchor_child, jl.rest_length, jl.stiffness, jl.damping
            )
        )
    if jl.kind == "revolute" and jl.limits is not None:
        lo, hi = jl.limits
        out.append(pymunk.RotaryLimitJoint(a, b, lo + jl.rel_angle0, hi + jl.rel_angle0))
    for c in out:
        c.collide_bodies = False
    return out


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
