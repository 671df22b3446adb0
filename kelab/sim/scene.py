"""Immutable scene description: bodies, joints, robots, props, terrain, sensors, cameras.

A :class:`SceneBuilder` collects items at absolute paths (``"/World/Robot"``) and
``build()`` returns a :class:`Scene`: frozen dataclasses all the way down, flattened into
the ordered bodies, joints, sensors, sites and cameras that the World and the renderer
consume, JSON-round-trippable and fingerprinted. See docs/scene.md.

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
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

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
    _vec2,
    shape_lowest_point,
)

if TYPE_CHECKING:
    from kelab.sim.assets import Asset

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


def _name(owner: str, attr: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip() or "/" in value:
        raise ValueError(
            f"{owner}.{attr} must be a non-empty string without '/' or surrounding spaces, "
            f"got {value!r}"
        )
    return value


def _check_path(value: object, what: str = "path") -> str:
    ok = (
        isinstance(value, str)
        and value.startswith("/")
        and value != "/"
        and not value.endswith("/")
        and all(part and part == part.strip() for part in value[1:].split("/"))
    )
    if not ok:
        raise ValueError(
            f"{what} must be an absolute path like '/World/Robot' (leading '/', no empty, "
            f"trailing or space-padded parts), got {value!r}"
        )
    return value  # type: ignore[return-value]


def _tuple_of(owner: str, attr: str, value: object, types: tuple[type, ...]) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
        raise ValueError(f"{owner}.{attr} must be a tuple, got {value!r}")
    for i, item in enumerate(value):
        if not isinstance(item, types):
            allowed = ", ".join(t.__name__ for t in types)
            raise ValueError(f"{owner}.{attr}[{i}] must be one of {allowed}, got {item!r}")
    return tuple(value)


# --------------------------------------------------------------------------- descriptions


@dataclass(frozen=True)
class BodySpec:
    """One rigid body of a robot (or the body behind a Prop or Terrain).

    Attributes:
        name: Body name, unique within its robot.
        shapes: One or more shapes, each placed by its ``offset`` in the body frame.
        mass: kg, > 0; None computes it as the shapes' total area times material.density.
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
        if self.body_type not in BODY_TYPES:
            raise ValueError(
                f"BodySpec {self.name!r}: body_type must be one of {BODY_TYPES}, "
                f"got {self.body_type!r}"
            )
        if self.mass is not None:
            _set(self, "mass", _positive("BodySpec", "mass", self.mass))
        if not isinstance(self.material, Material):
            raise ValueError(f"BodySpec.material must be a Material, got {self.material!r}")
        if not isinstance(self.initial_pose, Pose):
            raise ValueError(f"BodySpec.initial_pose must be a Pose, got {self.initial_pose!r}")
        if not isinstance(self.render, RenderHint):
            raise ValueError(f"BodySpec.render must be a RenderHint, got {self.render!r}")
        if self.body_type == "dynamic" and self.mass is None and self.area() <= 0.0:
            raise ValueError(
                f"BodySpec {self.name!r}: mass is None and the shapes have zero area "
                "(zero-radius segments), so no mass can be computed; give mass=... in kg"
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
        if not isinstance(self.offset, Pose):
            raise ValueError(f"Site.offset must be a Pose, got {self.offset!r}")


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
        if not isinstance(self.self_collide, bool):
            raise ValueError(
                f"RobotDescription.self_collide must be True or False, got {self.self_collide!r}"
            )
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
        for joint in joints:
            for attr in ("parent", "child"):
                ref = getattr(joint, attr)
                if ref not in body_names and not (attr == "parent" and ref == WORLD):
                    allowed = body_names + ([WORLD] if attr == "parent" else [])
                    raise ValueError(
                        f"RobotDescription {self.name!r}: joint {joint.name!r} has "
                        f"{attr}={ref!r}, which is not a body of this robot; use one of "
                        f"{allowed}"
                    )
        for site in sites:
            if site.body not in body_names:
                raise ValueError(
                    f"RobotDescription {self.name!r}: site {site.name!r} is on body "
                    f"{site.body!r}, which is not a body of this robot; use one of {body_names}"
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

    def _bind(self, view: Any) -> None:
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
        self.body_spec("prop")  # validates every field with BodySpec's messages

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
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"SensorSpec.name must be a non-empty string, got {self.name!r}")
        if self.kind not in SENSOR_KINDS:
            raise ValueError(f"SensorSpec.kind must be one of {SENSOR_KINDS}, got {self.kind!r}")
        if not isinstance(self.config, SensorConfig):
            raise ValueError(
                f"sensor {self.name!r}: sensor must be a ke.SensorConfig, got {self.config!r}"
            )
        _set(self, "params", tuple((str(k), v) for k, v in self.params))

    def param(self, key: str) -> Any:
        """Return the value of parameter ``key`` (KeyError if absent)."""
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(f"sensor {self.name!r} has no parameter {key!r}")


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


@dataclass(frozen=True)
class CameraSpec:
    """A 2D view.

    Attributes:
        name: Unique camera name.
        center: World point at the centre of the view, metres.
        zoom: Pixels per metre, > 0.
    """

    name: str
    center: Vec2 = (0.0, 0.0)
    zoom: float = 100.0

    def __post_init__(self) -> None:
        _name("CameraSpec", "name", self.name)
        _set(self, "center", _vec2("CameraSpec", "center", self.center))
        _set(self, "zoom", _positive("CameraSpec", "zoom", self.zoom))


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


# ------------------------------------------------------------------------ the scene


@dataclass(frozen=True)
class Scene:
    """An immutable, flattened, fingerprinted scene. Build one with :class:`SceneBuilder`.

    Attributes:
        gravity: ``(gx, gy)`` in m/s².
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
        _set(self, "gravity", _vec2("Scene", "gravity", self.gravity))
        for attr, types in (
            ("bodies", (BodyInstance,)),
            ("joints", (JointInstance,)),
            ("sensors", (SensorSpec,)),
            ("sites", (SiteInstance,)),
            ("cameras", (CameraSpec,)),
            ("robots", (RobotInstance,)),
        ):
            _set(self, attr, _tuple_of("Scene", attr, getattr(self, attr), types))
        _validate_scene(self)

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
        out: dict[str, Any] = {"format": SCENE_FORMAT, "version": SCENE_VERSION}
        for f in dataclasses.fields(self):
            out[f.name] = _encode(getattr(self, f.name))
        return out

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Scene:
        """Rebuild a Scene from ``to_dict()`` output (also after a JSON round trip)."""
        if not isinstance(data, dict) or data.get("format") != SCENE_FORMAT:
            raise ValueError(
                f"Scene.from_dict expects a dict with format={SCENE_FORMAT!r} "
                "(the output of Scene.to_dict())"
            )
        if data.get("version") != SCENE_VERSION:
            raise ValueError(
                f"Scene.from_dict: version {data.get('version')!r} is not supported; "
                f"this KELab reads version {SCENE_VERSION}"
            )
        kwargs = {f.name: _decode(data[f.name]) for f in dataclasses.fields(Scene)}
        return Scene(**kwargs)

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


def _validate_scene(scene: Scene) -> None:
    paths: set[str] = set()

    def claim(path: str, what: str) -> None:
        _check_path(path, what)
        if path in paths:
            raise ValueError(
                f"path {path!r} is used twice in the scene ({what}); paths must be unique"
            )
        paths.add(path)

    for robot in scene.robots:
        claim(robot.path, "robot path")
    for body in scene.bodies:
        claim(body.path, "body path")
    body_paths = {b.path for b in scene.bodies}
    for joint in scene.joints:
        claim(joint.path, "joint path")
        for ref in (joint.parent_path, joint.child_path):
            if ref is not None and ref not in body_paths:
                raise ValueError(f"joint {joint.path!r} refers to unknown body {ref!r}")
    joint_paths = {j.path for j in scene.joints}
    for kind, items in (
        ("sensor", scene.sensors),
        ("site", scene.sites),
        ("camera", scene.cameras),
    ):
        names = [item.name for item in items]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"{kind} name {name!r} is used twice; {kind} names must be unique")
    for sensor in scene.sensors:
        known = joint_paths if sensor.kind == "joint" else body_paths
        if sensor.target not in known:
            raise ValueError(f"sensor {sensor.name!r} targets unknown path {sensor.target!r}")
    for site in scene.sites:
        if site.body not in body_paths:
            raise ValueError(f"site {site.name!r} is on unknown body {site.body!r}")


# ---------------------------------------------------------------------- (de)serialise

_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Pose, Circle, Box, Polygon, Segment, Material, RenderHint, BodySpec, Site,
        RobotDescription, EffortActuator, PDActuator, RevoluteJoint, PrismaticJoint,
        FixedJoint, SpringJoint, SensorConfig, BodyInstance, JointInstance, SensorSpec,
        SiteInstance, CameraSpec, RobotInstance,
    )
}  # fmt: skip


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if _CLASSES.get(cls.__name__) is not cls:
            raise TypeError(f"cannot serialise {cls.__name__} in a scene")
        out: dict[str, Any] = {"type": cls.__name__}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if cls is SensorConfig and isinstance(item, int):
                item = float(item)  # SensorConfig keeps user ints; canonicalise them
            out[f.name] = _encode(item)
        return out
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot serialise non-finite number {value!r} in a scene")
        return value + 0.0
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cannot serialise {value!r} ({type(value).__name__}) in a scene")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        name = value.get("type")
        cls = _CLASSES.get(name)  # type: ignore[arg-type]
        if cls is None:
            raise ValueError(f"Scene.from_dict: unknown type {name!r}; known: {sorted(_CLASSES)}")
        kwargs = {k: _decode(v) for k, v in value.items() if k != "type"}
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"Scene.from_dict: bad fields for {name}: {exc}") from None
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


# The builder lives in its own module (it imports this one); a Scene and its builder are one
# concept to users, so ``from kelab.sim.scene import SceneBuilder`` works too, lazily.
def __getattr__(name: str) -> Any:
    if name == "SceneBuilder":
        from kelab.sim.builder import SceneBuilder

        return SceneBuilder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
