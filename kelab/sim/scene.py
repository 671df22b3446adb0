"""Immutable scene description: bodies, joints, robots, props, terrain, sensors, cameras.

A :class:`SceneBuilder` collects items at absolute paths (``"/World/Robot"``) and
``build()`` returns a :class:`Scene`: frozen dataclasses all the way down, flattened into
the ordered bodies, joints, sensors, sites and cameras that the World and the renderer
consume, JSON-round-trippable and fingerprinted. See docs/scene.md.

Why this module is over 800 lines: it is the scene's whole vocabulary, about a dozen
small frozen dataclasses (the items a task adds and the flattened instances a Scene
holds), each validating its own fields in ``__post_init__``; they refer to one another
and round-trip through one JSON form, so splitting them would only spread one format
over several files. What is not the vocabulary has left: the builder (builder.py), the
cross-item checks (_scene_checks.py) and the JSON encoding (_scene_io.py).

Example:
    >>> import kelab as ke
    >>> b = ke.SceneBuilder()
    >>> b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    '/ground'
    >>> b.add(ke.Prop(ke.Circle(0.1), mass=0.5, initial_pose=ke.Pose(0.0, 0.1)), at="/World/Ball")
    '/World/Ball'
    >>> [body.path for body in b.build().bodies]
    ['/ground', '/World/Ball']
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kelab._validate import check_bool, check_choice, is_int, must
from kelab.sim._scene_checks import check_path as _check_path
from kelab.sim._scene_checks import validate_scene
from kelab.sim.joints import (
    JOINT_TYPES,
    WORLD,
    Actuator,
    EffortActuator,
    FixedJoint,
    Joint,
    PDActuator,
    PrismaticJoint,
    RevoluteJoint,
    SpringJoint,
)
from kelab.sim.sensors import SensorConfig
from kelab.sim.shapes import (
    ANGLE_MAX,
    COORD_MAX,
    GRAVITY_MAX,
    LENGTH_MAX,
    LENGTH_MIN,
    MASS_MAX,
    MASS_MIN,
    SHAPE_TYPES,
    Box,
    Circle,
    Material,
    Polygon,
    Pose,
    RenderHint,
    Segment,
    Shape,
    Vec2,
    _number,
    _positive,
    _set,
    _show,
    _vec2,
    shape_lowest_point,
)

if TYPE_CHECKING:
    from kelab.sim.assets import Asset
    from kelab.sim.robot_view import RobotView

__all__ = [
    "WORLD",
    "Actuator",
    "BodyInstance",
    "BodySpec",
    "Box",
    "CameraSpec",
    "Circle",
    "EffortActuator",
    "FixedJoint",
    "Joint",
    "JointInstance",
    "Material",
    "PDActuator",
    "Polygon",
    "Pose",
    "PrismaticJoint",
    "Prop",
    "RenderHint",
    "RevoluteJoint",
    "Robot",
    "RobotDescription",
    "RobotInstance",
    "Scene",
    "Segment",
    "SensorSpec",
    "Shape",
    "Site",
    "SiteInstance",
    "SpringJoint",
    "Terrain",
    "shape_lowest_point",
]

BODY_TYPES = ("dynamic", "static", "kinematic")
SENSOR_KINDS = ("imu", "joint", "contact", "rangefinder", "pose")
SCENE_FORMAT = "kelab.scene"
SCENE_VERSION = 1
ZOOM_MIN, ZOOM_MAX = 1e-3, 1e6
"""Range of ``CameraSpec.zoom`` in pixels per metre."""
MAX_DEPTH = 16
"""Deepest nesting ``Scene.from_dict`` reads (a real scene is at most 8 levels deep)."""


def _text(value: object, *, slash: bool) -> bool:
    return (
        isinstance(value, str)
        and bool(value.strip())
        and value == value.strip()
        and value.isprintable()
        and (slash or "/" not in value)
    )


def _name(owner: str, attr: str, value: object) -> str:
    if not _text(value, slash=False):
        raise ValueError(
            f"{owner}.{attr} must be a non-empty printable string without '/' or surrounding "
            f"spaces, got {_show(value)}; use a name such as 'pole'"
        )
    return value  # type: ignore[return-value]


def _label(owner: str, attr: str, value: object) -> str:
    """A sensor, site or camera name: printable, no surrounding spaces ('/' allowed)."""
    if not _text(value, slash=True):
        raise ValueError(
            f"{owner}.{attr} must be a non-empty printable string without surrounding "
            f"spaces, got {_show(value)}; use a name such as 'torso.imu'"
        )
    return value  # type: ignore[return-value]


def _flag(owner: str, attr: str, value: object) -> bool:
    return check_bool(value, f"{owner}.{attr}")


def _pose(owner: str, attr: str, value: object) -> Pose:
    if not isinstance(value, Pose):
        raise ValueError(
            f"{owner}.{attr} must be a Pose, got {_show(value)}; use ke.Pose(x, y, angle)"
        )
    return value


def _tuple_of(owner: str, attr: str, value: object, types: tuple[type, ...]) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
        raise ValueError(f"{owner}.{attr} must be a tuple, got {_show(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, types):
            allowed = ", ".join(t.__name__ for t in types)
            raise ValueError(f"{owner}.{attr}[{i}] must be one of {allowed}, got {_show(item)}")
    return tuple(value)


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
    """

    name: str
    shapes: tuple[Shape, ...]
    mass: float | None = None
    material: Material = field(default_factory=Material)
    initial_pose: Pose = field(default_factory=Pose.identity)
    render: RenderHint = field(default_factory=RenderHint)
    body_type: str = "dynamic"

    def __post_init__(self) -> None:
        _name("BodySpec", "name", self.name)
        shapes = self.shapes
        if isinstance(shapes, SHAPE_TYPES):
            shapes = (shapes,)
        shapes = _tuple_of("BodySpec", "shapes", shapes, SHAPE_TYPES)
        if not shapes:
            raise ValueError(f"BodySpec {self.name!r}: shapes is empty; give at least one shape")
        _set(self, "shapes", shapes)
        check_choice(self.body_type, f"BodySpec {self.name!r}: body_type", BODY_TYPES)
        if self.mass is not None:
            mass = _positive("BodySpec", "mass", self.mass, lo=MASS_MIN, hi=MASS_MAX, unit=" kg")
            _set(self, "mass", mass)
        if not isinstance(self.material, Material):
            raise ValueError(
                f"BodySpec.material must be a Material, got {_show(self.material)}; "
                "use ke.Material(...)"
            )
        _pose("BodySpec", "initial_pose", self.initial_pose)
        if not isinstance(self.render, RenderHint):
            raise ValueError(
                f"BodySpec.render must be a RenderHint, got {_show(self.render)}; "
                "use ke.RenderHint(...)"
            )
        if self.body_type == "dynamic" and self.mass is None:
            area = self.area()
            if area <= 0.0:
                raise ValueError(
                    f"BodySpec {self.name!r}: mass is None and the shapes have zero area "
                    "(zero-radius segments), so no mass can be computed; give mass=... in kg"
                )
            mass = self.resolved_mass()
            if not MASS_MIN <= mass <= MASS_MAX:
                raise ValueError(
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
        _name("Site", "name", self.name)
        _name("Site", "body", self.body)
        _pose("Site", "offset", self.offset)


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
        _name("RobotDescription", "name", self.name)
        bodies = _tuple_of("RobotDescription", "bodies", self.bodies, (BodySpec,))
        joints = _tuple_of("RobotDescription", "joints", self.joints, JOINT_TYPES)
        sites = _tuple_of("RobotDescription", "sites", self.sites, (Site,))
        _set(self, "bodies", bodies)
        _set(self, "joints", joints)
        _set(self, "sites", sites)
        if not bodies:
            raise ValueError(f"RobotDescription {self.name!r}: bodies is empty; add a BodySpec")
        _flag("RobotDescription", "self_collide", self.self_collide)
        seen: dict[str, str] = {}
        for kind, items in (("body", bodies), ("joint", joints), ("site", sites)):
            for item in items:
                if item.name == WORLD:
                    raise ValueError(
                        f"RobotDescription {self.name!r}: {kind} name {WORLD!r} is reserved "
                        "for the ground frame; rename it"
                    )
                if item.name in seen:
                    raise ValueError(
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
                    raise ValueError(
                        f"RobotDescription {self.name!r}: joint {joint.name!r} has "
                        f"{attr}={ref!r}, which is not a body of this robot; use one of "
                        f"{_show(allowed)}"
                    )
        for site in sites:
            if site.body not in known:
                raise ValueError(
                    f"RobotDescription {self.name!r}: site {site.name!r} is on body "
                    f"{site.body!r}, which is not a body of this robot; use one of "
                    f"{_show(body_names)}"
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


class Robot:
    """The handle a task keeps for a robot: an asset placed at an initial pose.

    ``SceneBuilder.add(robot, at=...)`` sets ``robot.path``. The runtime methods
    (``find_joints``, joint state...) are attached when a World binds it.

    Args:
        asset: An ``Asset`` (``Asset.from_registry(...)``) or a RobotDescription.
        initial_pose: Pose of the robot root frame in the environment copy's frame.

    Example:
        >>> import kelab as ke
        >>> robot = ke.Robot(asset=ke.Asset.from_registry("kelab/robot/cartpole:v1"))
        >>> robot.description.joint_names
        ('slider_to_cart', 'cart_to_pole')
    """

    def __init__(self, asset: Asset | RobotDescription, initial_pose: Pose | None = None) -> None:
        description = asset if isinstance(asset, RobotDescription) else None
        if description is None:
            description = getattr(asset, "description", None)
        if not isinstance(description, RobotDescription):
            raise ValueError(
                f"Robot.asset must be an Asset or a RobotDescription, got {asset!r}; "
                "use ke.Asset.from_registry('kelab/robot/cartpole:v1')"
            )
        pose = Pose.identity() if initial_pose is None else initial_pose
        if not isinstance(pose, Pose):
            raise ValueError(f"Robot.initial_pose must be a Pose, got {initial_pose!r}")
        self.asset = asset
        self.description: RobotDescription = description
        self.initial_pose: Pose = pose
        self.path: str | None = None

    def __repr__(self) -> str:
        return (
            f"Robot({self.description.name!r}, initial_pose={self.initial_pose!r}, "
            f"path={self.path!r})"
        )

    def _bind(self, view: RobotView) -> None:
        """Attach the runtime view (``World.robot(path)``) this handle delegates to."""
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
    """

    shape: Shape | tuple[Shape, ...]
    mass: float | None = None
    material: Material | None = None
    initial_pose: Pose = field(default_factory=Pose.identity)
    render: RenderHint = field(default_factory=lambda: RenderHint(color=(230, 120, 40)))
    body_type: str = "dynamic"

    def __post_init__(self) -> None:
        if self.material is None:
            _set(self, "material", Material())
        _pose("Prop", "initial_pose", self.initial_pose)
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
        _name("Terrain", "name", self.name)
        _pose("Terrain", "pose", self.pose)
        spec = self.body_spec()
        _set(self, "shapes", spec.shapes)

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
        height = _number("Terrain.plane", "height", height)
        half_width = _positive("Terrain.plane", "half_width", half_width)
        thickness = _positive("Terrain.plane", "thickness", thickness)
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


# ------------------------------------------------------------------- flattened view


@dataclass(frozen=True)
class BodyInstance:
    """One body of a built scene.

    Attributes:
        path: Unique path, e.g. ``"/World/Robot/pole"`` or ``"/World/Ball"``.
        spec: The body description (its ``initial_pose`` is relative to its root).
        pose: Initial pose in one environment copy's frame.
        per_environment: True: one per copy; False: one shared by all copies.
    """

    path: str
    spec: BodySpec
    pose: Pose
    per_environment: bool = True

    def __post_init__(self) -> None:
        _check_path(self.path, "BodyInstance.path")
        if not isinstance(self.spec, BodySpec):
            raise ValueError(
                f"BodyInstance {self.path!r}: spec must be a BodySpec, got {_show(self.spec)}; "
                "build scenes with ke.SceneBuilder or Scene.from_dict(scene.to_dict())"
            )
        _pose(f"BodyInstance {self.path!r}", "pose", self.pose)
        _flag(f"BodyInstance {self.path!r}", "per_environment", self.per_environment)


@dataclass(frozen=True)
class JointInstance:
    """One joint of a built scene.

    Attributes:
        path: ``"<robot path>/<joint name>"``.
        spec: The joint; for ``parent == "world"`` its anchor (and axis) are already
            expressed in the copy's ground frame.
        parent_path: Parent body path, or None for the copy's ground frame.
        child_path: Child body path.
        per_environment: Same as the robot's.
    """

    path: str
    spec: Joint
    parent_path: str | None
    child_path: str
    per_environment: bool = True

    def __post_init__(self) -> None:
        _check_path(self.path, "JointInstance.path")
        owner = f"JointInstance {self.path!r}"
        if not isinstance(self.spec, JOINT_TYPES):
            raise ValueError(
                f"{owner}: spec must be a RevoluteJoint, PrismaticJoint, FixedJoint or "
                f"SpringJoint, got {_show(self.spec)}; build scenes with ke.SceneBuilder"
            )
        if self.parent_path is not None:
            _check_path(self.parent_path, f"{owner}: parent_path")
        _check_path(self.child_path, f"{owner}: child_path")
        _flag(owner, "per_environment", self.per_environment)
        if self.parent_path == self.child_path:
            raise ValueError(
                f"{owner}: child_path must differ from parent_path, both are "
                f"{self.child_path!r}; a joint connects two different bodies (use None as "
                "parent_path for the ground frame)"
            )
        if (self.parent_path is None) != (self.spec.parent == WORLD):
            raise ValueError(
                f"{owner}: parent_path must be None exactly when spec.parent is {WORLD!r}, got "
                f"parent_path={self.parent_path!r} with spec.parent={self.spec.parent!r}; "
                "build scenes with ke.SceneBuilder"
            )


@dataclass(frozen=True)
class SensorSpec:
    """One sensor of a built scene.

    Attributes:
        name: Unique sensor name, e.g. ``"torso.imu"``.
        kind: ``"imu"``, ``"joint"``, ``"contact"``, ``"rangefinder"`` or ``"pose"``.
        target: Body path (joint path for ``"joint"``).
        config: Degradation pipeline settings.
        params: Extra ``(key, value)`` pairs (rangefinder: angle, max_range, offset).
    """

    name: str
    kind: str
    target: str
    config: SensorConfig = field(default_factory=SensorConfig)
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        _label("SensorSpec", "name", self.name)
        check_choice(self.kind, "SensorSpec.kind", SENSOR_KINDS)
        _check_path(self.target, f"sensor {self.name!r}: target")
        if not isinstance(self.config, SensorConfig):
            raise ValueError(
                f"sensor {self.name!r}: sensor must be a ke.SensorConfig (SensorSpec.config), "
                f"got {_show(self.config)}"
            )
        _set(self, "params", _sensor_params(self.name, self.kind, self.params))

    def param(self, key: str) -> Any:
        """Return the value of parameter ``key`` (KeyError if absent)."""
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(f"sensor {self.name!r} has no parameter {key!r}")


_RANGEFINDER_PARAMS = ("angle", "max_range", "offset")


def _sensor_params(name: str, kind: str, params: object) -> tuple[tuple[str, Any], ...]:
    """Check a sensor's ``(key, value)`` pairs: a rangefinder's three, nothing for others."""
    owner = f"sensor {name!r}"
    pairs = _tuple_of(owner, "params", params, (tuple, list))
    for i, pair in enumerate(pairs):
        if len(pair) != 2 or not isinstance(pair[0], str):
            raise ValueError(
                f"{owner}: params[{i}] must be a (key, value) pair with a str key, got "
                f"{_show(pair)}"
            )
    keys = tuple(k for k, _ in pairs)
    want = _RANGEFINDER_PARAMS if kind == "rangefinder" else ()
    if tuple(sorted(keys)) != want or len(set(keys)) != len(keys):
        raise ValueError(
            f"{owner}: a {kind} sensor's params must have the keys {list(want)}, got "
            f"{_show(list(keys))}; add sensors with the SceneBuilder methods"
        )
    if kind != "rangefinder":
        return ()
    values = dict(pairs)
    return (
        ("angle", _number(owner, "angle", values["angle"], limit=ANGLE_MAX)),
        (
            "max_range",
            _positive(owner, "max_range", values["max_range"], lo=LENGTH_MIN, hi=LENGTH_MAX),
        ),
        ("offset", _pose(owner, "offset", values["offset"])),
    )


@dataclass(frozen=True)
class SiteInstance:
    """A named frame of a built scene.

    Attributes:
        name: ``"<robot path>/<site name>"`` for robot sites, else the name given to
            ``SceneBuilder.site``.
        body: Path of the body it is attached to.
        offset: Pose in that body's frame.
    """

    name: str
    body: str
    offset: Pose

    def __post_init__(self) -> None:
        _label("SiteInstance", "name", self.name)
        _check_path(self.body, f"site {self.name!r}: body")
        _pose(f"site {self.name!r}", "offset", self.offset)


@dataclass(frozen=True)
class CameraSpec:
    """A 2D view.

    Attributes:
        name: Unique camera name.
        center: World point at the centre of the view, metres (within ±COORD_MAX).
        zoom: Pixels per metre, in [ZOOM_MIN, ZOOM_MAX] (1e-3..1e6).
    """

    name: str
    center: Vec2 = (0.0, 0.0)
    zoom: float = 100.0

    def __post_init__(self) -> None:
        _name("CameraSpec", "name", self.name)
        _set(self, "center", _vec2("CameraSpec", "center", self.center, limit=COORD_MAX))
        zoom = _positive("CameraSpec", "zoom", self.zoom, lo=ZOOM_MIN, hi=ZOOM_MAX, unit=" px/m")
        _set(self, "zoom", zoom)


@dataclass(frozen=True)
class RobotInstance:
    """A robot of a built scene.

    Attributes:
        path: The robot path, e.g. ``"/World/Robot"``.
        name: Its description name, e.g. ``"cartpole"``.
        initial_pose: Pose of its root frame in a copy's frame.
        body_paths: Paths of its bodies in description order.
        joint_paths: Paths of its joints in description order.
        self_collide: Whether its bodies collide with each other.
        per_environment: True: one per copy.
    """

    path: str
    name: str
    initial_pose: Pose
    body_paths: tuple[str, ...] = ()
    joint_paths: tuple[str, ...] = ()
    self_collide: bool = False
    per_environment: bool = True

    def __post_init__(self) -> None:
        _check_path(self.path, "RobotInstance.path")
        owner = f"RobotInstance {self.path!r}"
        _name(owner, "name", self.name)
        _pose(owner, "initial_pose", self.initial_pose)
        for attr in ("body_paths", "joint_paths"):
            paths = _tuple_of(owner, attr, getattr(self, attr), (str,))
            seen: set[str] = set()
            for i, path in enumerate(paths):
                _check_path(path, f"{owner}: {attr}[{i}]")
                if path.rsplit("/", 1)[0] != self.path:
                    raise ValueError(
                        f"{owner}: {attr}[{i}] must be directly under the robot path, like "
                        f"'{self.path}/<name>', got {path!r}"
                    )
                if path in seen:
                    raise ValueError(f"{owner}: {attr} lists {path!r} twice; list it once")
                seen.add(path)
            _set(self, attr, paths)
        if not self.body_paths:
            raise ValueError(f"{owner}: body_paths is empty; a robot has at least one body")
        _flag(owner, "self_collide", self.self_collide)
        _flag(owner, "per_environment", self.per_environment)


# ------------------------------------------------------------------------ the scene


@dataclass(frozen=True)
class Scene:
    """An immutable, flattened, fingerprinted scene. Build one with :class:`SceneBuilder`.

    Construction validates everything (each field's type and range, unique paths and names,
    the joint graph, robots' and sensors' references), so a Scene that exists never crashes
    a World (which may still refuse what a layout cannot do); see docs/scene.md.

    Attributes:
        gravity: ``(gx, gy)`` in m/s², each within ±GRAVITY_MAX (1e4).
        bodies: Bodies in insertion order (a robot's bodies in description order).
        joints: Joints in insertion order.
        sensors: Sensors in declaration order.
        sites: Named frames.
        cameras: Views.
        robots: Robots in insertion order.
    """

    gravity: Vec2 = (0.0, -9.81)
    bodies: tuple[BodyInstance, ...] = ()
    joints: tuple[JointInstance, ...] = ()
    sensors: tuple[SensorSpec, ...] = ()
    sites: tuple[SiteInstance, ...] = ()
    cameras: tuple[CameraSpec, ...] = ()
    robots: tuple[RobotInstance, ...] = ()

    def __post_init__(self) -> None:
        _set(self, "gravity", _vec2("Scene", "gravity", self.gravity, limit=GRAVITY_MAX))
        for attr, types in (
            ("bodies", (BodyInstance,)),
            ("joints", (JointInstance,)),
            ("sensors", (SensorSpec,)),
            ("sites", (SiteInstance,)),
            ("cameras", (CameraSpec,)),
            ("robots", (RobotInstance,)),
        ):
            _set(self, attr, _tuple_of("Scene", attr, getattr(self, attr), types))
        validate_scene(self)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 hex digest of the canonical JSON of ``to_dict()``."""
        return hashlib.sha256(self.canonical_json().encode("ascii")).hexdigest()

    def canonical_json(self) -> str:
        """Return ``to_dict()`` as JSON with sorted keys and no spaces (floats as repr)."""
        return json.dumps(
            self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
            allow_nan=False,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-compatible dict (lists, dicts, str, float, int, bool, None)."""
        from kelab.sim._scene_io import encode  # it imports this module

        out: dict[str, Any] = {"format": SCENE_FORMAT, "version": SCENE_VERSION}
        for f in dataclasses.fields(self):
            out[f.name] = encode(getattr(self, f.name))
        return out

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Scene:
        """Rebuild a Scene from ``to_dict()`` output (also after a JSON round trip).

        The dict is untrusted data: every object must have exactly its class's keys, every
        value is validated as in the constructors, nesting is bounded by ``MAX_DEPTH``, and
        every problem is a ValueError naming where it is (``bodies[2].spec.mass``).

        Args:
            data: A dict as returned by :meth:`to_dict`.

        Returns:
            The Scene, equal to the one that was serialised.

        Raises:
            ValueError: If the data is not a valid scene of this format and version.
        """
        from kelab.sim._scene_io import check_keys, decode  # it imports this module

        if not isinstance(data, dict):
            raise ValueError(
                f"Scene.from_dict: data must be a dict (the output of Scene.to_dict()), got "
                f"{type(data).__name__}"
            )
        if data.get("format") != SCENE_FORMAT:
            raise ValueError(
                f"Scene.from_dict expects a dict with format={SCENE_FORMAT!r}, got format "
                f"{_show(data.get('format', '<missing>'))}; pass the output of Scene.to_dict()"
            )
        version = data.get("version")
        if not (is_int(version) and version == SCENE_VERSION):
            raise ValueError(
                must(
                    "Scene.from_dict: version",
                    f"the int {SCENE_VERSION}",
                    version,
                    "it is the only version this KELab reads",
                )
            )
        names = [f.name for f in dataclasses.fields(Scene)]
        check_keys("Scene.from_dict", "the scene", data, ["format", "version", *names])
        kwargs = {name: decode(data[name], name, 1) for name in names}
        try:
            return Scene(**kwargs)
        except ValueError as exc:
            raise ValueError(f"Scene.from_dict: {exc}") from None

    def body(self, path: str) -> BodyInstance:
        """Return the body at ``path`` (KeyError listing the paths if unknown)."""
        for body in self.bodies:
            if body.path == path:
                return body
        raise KeyError(f"no body at {path!r}; bodies: {[b.path for b in self.bodies]}")

    def joint(self, path: str) -> JointInstance:
        """Return the joint at ``path`` (KeyError listing the paths if unknown)."""
        for joint in self.joints:
            if joint.path == path:
                return joint
        raise KeyError(f"no joint at {path!r}; joints: {[j.path for j in self.joints]}")

    def robot(self, path: str) -> RobotInstance:
        """Return the robot at ``path`` (KeyError listing the paths if unknown)."""
        for robot in self.robots:
            if robot.path == path:
                return robot
        raise KeyError(f"no robot at {path!r}; robots: {[r.path for r in self.robots]}")


# The builder lives in its own module (it imports this one); a Scene and its builder are one
# concept to users, so ``from kelab.sim.scene import SceneBuilder`` works too, lazily.
def __getattr__(name: str) -> Any:
    if name == "SceneBuilder":
        from kelab.sim.builder import SceneBuilder

        return SceneBuilder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
