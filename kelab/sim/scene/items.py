"""What a task adds to a scene: robots (bodies, joints, sites), props and terrain.

These frozen dataclasses are the authoring vocabulary, each validating its own fields in
``__post_init__``: :class:`BodySpec`, :class:`Site` and :class:`RobotDescription` describe
a robot (the assets in :mod:`kelab.sim.scene.assets` are made of them); :class:`Robot`,
:class:`Prop` and :class:`Terrain` are what ``SceneBuilder.add`` places at a path. The
flattened form a built Scene holds is in :mod:`kelab.sim.scene.instances`. All re-exported by
:mod:`kelab.sim.scene`; see docs/scene.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kelab._validate import check_choice
from kelab.errors import UserError
from kelab.sim.scene.collision import CollisionFilter
from kelab.sim.scene.fields import (
    field_flag,
    field_name,
    field_number,
    field_positive,
    field_tuple,
    set_field,
    short_repr,
)
from kelab.sim.scene.joints import JOINT_TYPES, WORLD, Joint
from kelab.sim.scene.shapes import (
    MASS_MAX,
    MASS_MIN,
    SHAPE_TYPES,
    Box,
    Material,
    Pose,
    RenderHint,
    Shape,
    field_pose,
    shape_lowest_point,
)

__all__ = [
    "BODY_TYPES",
    "BodySpec",
    "Prop",
    "Robot",
    "RobotAsset",
    "RobotDescription",
    "Site",
    "Terrain",
]

BODY_TYPES = ("dynamic", "static", "kinematic")


class RobotAsset(Protocol):
    """What ``Robot`` needs of an asset (``ke.Asset`` is one): its robot description."""

    @property
    def description(self) -> RobotDescription:
        """The robot it describes."""
        ...


# --------------------------------------------------------------------------- descriptions


@dataclass(frozen=True)
class BodySpec:
    """One rigid body of a robot (or the body behind a Prop or Terrain).

    Attributes:
        name: Body name, unique within its robot.
        shapes: One or more shapes, each placed by its ``offset`` in the body frame.
        mass: kg, in [MASS_MIN, MASS_MAX] (1e-6..1e6); None computes it as the shapes'
            total area times material.density (a dynamic body's result must be in range).
        material: Friction, restitution and density of every shape of the body.
        initial_pose: Pose relative to the robot (or prop) root frame.
        render: How to draw the body.
        body_type: ``"dynamic"``, ``"static"`` or ``"kinematic"``.
        collision: Which shapes the body's shapes collide with (``ke.CollisionFilter``);
            the default collides with everything (docs/scene.md, "Collision filtering").
    """

    name: str
    shapes: tuple[Shape, ...]
    mass: float | None = None
    material: Material = field(default_factory=Material)
    initial_pose: Pose = field(default_factory=Pose.identity)
    render: RenderHint = field(default_factory=RenderHint)
    body_type: str = "dynamic"
    collision: CollisionFilter = field(default_factory=CollisionFilter)

    def __post_init__(self) -> None:
        field_name("BodySpec", "name", self.name)
        shapes = self.shapes
        if isinstance(shapes, SHAPE_TYPES):
            shapes = (shapes,)
        shapes = field_tuple("BodySpec", "shapes", shapes, SHAPE_TYPES)
        if not shapes:
            raise UserError(f"BodySpec {self.name!r}: shapes is empty; give at least one shape")
        set_field(self, "shapes", shapes)
        check_choice(self.body_type, f"BodySpec {self.name!r}: body_type", BODY_TYPES)
        if self.mass is not None:
            mass = field_positive(
                "BodySpec", "mass", self.mass, lo=MASS_MIN, hi=MASS_MAX, unit=" kg"
            )
            set_field(self, "mass", mass)
        if not isinstance(self.material, Material):
            raise UserError(
                f"BodySpec.material must be a Material, got {short_repr(self.material)}; "
                "use ke.Material(...)"
            )
        field_pose("BodySpec", "initial_pose", self.initial_pose)
        if not isinstance(self.render, RenderHint):
            raise UserError(
                f"BodySpec.render must be a RenderHint, got {short_repr(self.render)}; "
                "use ke.RenderHint(...)"
            )
        if not isinstance(self.collision, CollisionFilter):
            raise UserError(
                f"BodySpec.collision must be a CollisionFilter, got {short_repr(self.collision)}; "
                "use ke.CollisionFilter(group=..., categories=..., mask=...)"
            )
        if self.body_type == "dynamic" and self.mass is None:
            area = self.area()
            if area <= 0.0:
                raise UserError(
                    f"BodySpec {self.name!r}: mass is None and the shapes have zero area "
                    "(zero-radius segments), so no mass can be computed; give mass=... in kg"
                )
            mass = self.resolved_mass()
            if not MASS_MIN <= mass <= MASS_MAX:
                raise UserError(
                    f"BodySpec {self.name!r}: the computed mass must be in [{MASS_MIN:g}, "
                    f"{MASS_MAX:g}] kg, got {mass:g} kg (area {area:g} m² × density "
                    f"{self.material.density:g} kg/m²); give mass=... in kg or change "
                    "Material.density"
                )

    def area(self) -> float:
        """Return the total area of the shapes in square metres (overlaps counted twice)."""
        return sum(shape.area() for shape in self.shapes)

    def resolved_mass(self) -> float:
        """Return ``mass``, or the shapes' area times ``material.density`` when mass is None."""
        return self.mass if self.mass is not None else self.area() * self.material.density


@dataclass(frozen=True)
class Site:
    """A named frame attached to a body (sensor mount, end effector, marker).

    Attributes:
        name: Site name, unique within the robot.
        body: Name of the body it is attached to.
        offset: Pose in the body frame.
    """

    name: str
    body: str
    offset: Pose = field(default_factory=Pose.identity)

    def __post_init__(self) -> None:
        field_name("Site", "name", self.name)
        field_name("Site", "body", self.body)
        field_pose("Site", "offset", self.offset)


@dataclass(frozen=True)
class RobotDescription:
    """An articulated robot: bodies connected by joints, with sites.

    Body initial poses and world-parented joint anchors are in the robot's root frame,
    which ``Robot.initial_pose`` places in the world. Bodies, joints and sites share one
    name space (they become paths ``<robot path>/<name>``).

    Attributes:
        name: Description name, e.g. ``"cartpole"``.
        bodies: Bodies in a fixed order (the first is the root/base body).
        joints: Joints in a fixed order (this order is the robot's joint order).
        sites: Named frames on bodies.
        self_collide: Whether bodies of this robot collide with each other.
    """

    name: str
    bodies: tuple[BodySpec, ...]
    joints: tuple[Joint, ...] = ()
    sites: tuple[Site, ...] = ()
    self_collide: bool = False

    def __post_init__(self) -> None:
        field_name("RobotDescription", "name", self.name)
        bodies = field_tuple("RobotDescription", "bodies", self.bodies, (BodySpec,))
        joints = field_tuple("RobotDescription", "joints", self.joints, JOINT_TYPES)
        sites = field_tuple("RobotDescription", "sites", self.sites, (Site,))
        set_field(self, "bodies", bodies)
        set_field(self, "joints", joints)
        set_field(self, "sites", sites)
        if not bodies:
            raise UserError(f"RobotDescription {self.name!r}: bodies is empty; add a BodySpec")
        field_flag("RobotDescription", "self_collide", self.self_collide)
        seen: dict[str, str] = {}
        for kind, items in (("body", bodies), ("joint", joints), ("site", sites)):
            for item in items:
                if item.name == WORLD:
                    raise UserError(
                        f"RobotDescription {self.name!r}: {kind} name {WORLD!r} is reserved "
                        "for the ground frame; rename it"
                    )
                if item.name in seen:
                    raise UserError(
                        f"RobotDescription {self.name!r}: {kind} name {item.name!r} is already "
                        f"used by a {seen[item.name]}; body, joint and site names must be unique"
                    )
                seen[item.name] = kind
        body_names = [b.name for b in bodies]
        known = set(body_names)
        for joint in joints:
            for attr in ("parent", "child"):
                ref = getattr(joint, attr)
                if ref not in known and not (attr == "parent" and ref == WORLD):
                    allowed = body_names + ([WORLD] if attr == "parent" else [])
                    raise UserError(
                        f"RobotDescription {self.name!r}: joint {joint.name!r} has "
                        f"{attr}={ref!r}, which is not a body of this robot; use one of "
                        f"{short_repr(allowed)}"
                    )
        for site in sites:
            if site.body not in known:
                raise UserError(
                    f"RobotDescription {self.name!r}: site {site.name!r} is on body "
                    f"{site.body!r}, which is not a body of this robot; use one of "
                    f"{short_repr(body_names)}"
                )

    def body(self, name: str) -> BodySpec:
        """Return the body called ``name`` (KeyError listing the names if unknown)."""
        for body in self.bodies:
            if body.name == name:
                return body
        raise KeyError(f"robot {self.name!r} has no body {name!r}; bodies: {self.body_names}")

    def joint(self, name: str) -> Joint:
        """Return the joint called ``name`` (KeyError listing the names if unknown)."""
        for joint in self.joints:
            if joint.name == name:
                return joint
        raise KeyError(f"robot {self.name!r} has no joint {name!r}; joints: {self.joint_names}")

    @property
    def body_names(self) -> tuple[str, ...]:
        """Body names in description order."""
        return tuple(b.name for b in self.bodies)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joint names in description order."""
        return tuple(j.name for j in self.joints)

    def body_poses(self, root: Pose | None = None) -> dict[str, Pose]:
        """Return each body's initial pose in the frame that ``root`` is given in.

        Args:
            root: Pose of the robot root frame; identity when None.
        """
        root = root if root is not None else Pose.identity()
        return {b.name: root.compose(b.initial_pose) for b in self.bodies}

    def lowest_point(self, root: Pose | None = None) -> float:
        """Return the lowest Y reached by any shape at the initial configuration."""
        poses = self.body_poses(root)
        return min(shape_lowest_point(s, poses[b.name]) for b in self.bodies for s in b.shapes)


# ----------------------------------------------------------------------- scene items


class _FromView:
    """A runtime attribute of a `Robot`, read from its bound view.

    What ``Robot.__getattr__`` does, without the failed ordinary lookup first: for the
    attributes a task reads every step, that lookup was ~2 us of each read (#42.1).
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, robot: Robot | None, owner: type | None = None) -> Any:
        if robot is None:
            return self
        view = robot.__dict__.get("_view")
        if view is None:
            return robot.__getattr__(self.name)  # raises, naming what to do
        return getattr(view, self.name)


class Robot:
    """The handle a task keeps for a robot: an asset placed at an initial pose.

    ``SceneBuilder.add(robot, at=...)`` sets ``robot.path``. The runtime methods
    (``find_joints``, joint state...) are attached when an environment binds it to the
    World's view (`bind_view`).

    Args:
        asset: An ``Asset`` (``Asset.from_registry(...)``) or a RobotDescription.
        initial_pose: Pose of the robot root frame in the environment copy's frame.

    Example:
        >>> import kelab as ke
        >>> robot = ke.Robot(asset=ke.Asset.from_registry("kelab/robot/cartpole:v1"))
        >>> robot.description.joint_names
        ('slider_to_cart', 'cart_to_pole')
    """

    # the runtime attributes tasks read every step (the others: __getattr__)
    joint_pos = _FromView()
    joint_vel = _FromView()
    root_pose = _FromView()
    root_velocity = _FromView()
    set_joint_effort_target = _FromView()
    set_joint_position_target = _FromView()

    def __init__(
        self, asset: RobotAsset | RobotDescription, initial_pose: Pose | None = None
    ) -> None:
        description = asset if isinstance(asset, RobotDescription) else None
        if description is None:
            description = getattr(asset, "description", None)
        if not isinstance(description, RobotDescription):
            raise UserError(
                f"Robot.asset must be an Asset or a RobotDescription, got {asset!r}; "
                "use ke.Asset.from_registry('kelab/robot/cartpole:v1')"
            )
        pose = Pose.identity() if initial_pose is None else initial_pose
        if not isinstance(pose, Pose):
            raise UserError(f"Robot.initial_pose must be a Pose, got {initial_pose!r}")
        self.asset = asset
        self.description: RobotDescription = description
        self.initial_pose: Pose = pose
        self.path: str | None = None

    def __repr__(self) -> str:
        return (
            f"Robot({self.description.name!r}, initial_pose={self.initial_pose!r}, "
            f"path={self.path!r})"
        )

    def bind_view(self, view: object) -> None:
        """Attach the runtime view this handle delegates to (the World's ``RobotView``).

        An environment binds every robot its task holds (``world.robot(robot.path)``)
        before ``Task.on_start``; from then on ``robot.find_joints(...)``, ``joint_pos``
        and the other runtime methods are the view's. Binding again replaces the view.

        Args:
            view: The runtime view, e.g. ``world.robot(robot.path)``.
        """
        self.__dict__["_view"] = view

    def __getattr__(self, name: str) -> Any:
        # runtime methods (find_joints, joint_pos, reset...) come from the bound view
        view = self.__dict__.get("_view")
        if view is None or name.startswith("__"):
            raise AttributeError(
                f"ke.Robot has no attribute {name!r} until an environment or World binds it "
                "(runtime methods such as find_joints() work from Task.on_start() on)"
            )
        return getattr(view, name)


@dataclass(frozen=True)
class Prop:
    """A free rigid body that is not part of a robot (ball, box, obstacle).

    Attributes:
        shape: The body's shape (or a tuple of shapes).
        mass: kg, > 0; None computes it from the area and material.density.
        material: None uses ``Material()``.
        initial_pose: Pose in the environment copy's frame.
        render: How to draw it.
        body_type: ``"dynamic"``, ``"static"`` or ``"kinematic"``.
        collision: Which shapes it collides with (``ke.CollisionFilter``); the default
            collides with everything.
    """

    shape: Shape | tuple[Shape, ...]
    mass: float | None = None
    material: Material | None = None
    initial_pose: Pose = field(default_factory=Pose.identity)
    render: RenderHint = field(default_factory=lambda: RenderHint(color=(230, 120, 40)))
    body_type: str = "dynamic"
    collision: CollisionFilter = field(default_factory=CollisionFilter)

    def __post_init__(self) -> None:
        if self.material is None:
            set_field(self, "material", Material())
        field_pose("Prop", "initial_pose", self.initial_pose)
        self.body_spec("prop")  # validates every other field with BodySpec's messages

    def body_spec(self, name: str) -> BodySpec:
        """Return the BodySpec of this prop, named ``name``."""
        shapes = self.shape if isinstance(self.shape, (tuple, list)) else (self.shape,)
        return BodySpec(
            name=name,
            shapes=tuple(shapes),
            mass=self.mass,
            material=self.material,  # type: ignore[arg-type]
            initial_pose=Pose.identity(),
            render=self.render,
            body_type=self.body_type,
            collision=self.collision,
        )


@dataclass(frozen=True)
class Terrain:
    """Static ground geometry.

    Attributes:
        name: Name; ``add(terrain, at="/")`` places it at ``"/<name>"``.
        shapes: Shapes in the terrain frame.
        material: Surface material.
        pose: Pose of the terrain frame.
        render: How to draw it.
    """

    name: str
    shapes: tuple[Shape, ...]
    material: Material = field(default_factory=Material)
    pose: Pose = field(default_factory=Pose.identity)
    render: RenderHint = field(default_factory=lambda: RenderHint(color=(90, 110, 90), layer=-1))

    def __post_init__(self) -> None:
        field_name("Terrain", "name", self.name)
        field_pose("Terrain", "pose", self.pose)
        spec = self.body_spec()
        set_field(self, "shapes", spec.shapes)

    @staticmethod
    def plane(
        name: str = "ground",
        height: float = 0.0,
        material: Material | None = None,
        half_width: float = 500.0,
        thickness: float = 1.0,
    ) -> Terrain:
        """Return flat ground whose top surface is at ``y = height``.

        Args:
            name: Terrain name.
            height: Y of the top surface, metres.
            material: None uses ``Material()``.
            half_width: The ground spans x in [-half_width, half_width], metres.
            thickness: Depth of the static box below the surface (resists tunnelling).
        """
        height = field_number("Terrain.plane", "height", height)
        half_width = field_positive("Terrain.plane", "half_width", half_width)
        thickness = field_positive("Terrain.plane", "thickness", thickness)
        box = Box(2.0 * half_width, thickness, offset=Pose(0.0, -thickness / 2.0))
        return Terrain(
            name=name,
            shapes=(box,),
            material=Material() if material is None else material,
            pose=Pose(0.0, height),
        )

    def body_spec(self) -> BodySpec:
        """Return the static BodySpec of this terrain."""
        return BodySpec(
            name=self.name,
            shapes=self.shapes,
            mass=None,
            material=self.material,
            initial_pose=Pose.identity(),
            render=self.render,
            body_type="static",
        )
