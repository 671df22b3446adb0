"""The flattened form of a built scene: bodies, joints, sensors, sites, cameras, robots.

One instance per item, each at its path.

``SceneBuilder.build`` turns what a task added (:mod:`kelab.sim.scene.items`) into these, and a
:class:`~kelab.sim.scene.Scene` holds them in order; each validates its own fields
(paths, types, ranges), and ``Scene`` checks how they refer to one another
(:mod:`kelab.sim.scene._checks`). Re-exported by :mod:`kelab.sim.scene`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kelab._validate import check_choice
from kelab.sim.scene.fields import (
    Vec2,
    check_path,
    field_flag,
    field_label,
    field_name,
    field_positive,
    field_tuple,
    field_vec2,
    set_field,
    short_repr,
)
from kelab.sim.scene.items import BodySpec
from kelab.sim.scene.joints import JOINT_TYPES, WORLD, Joint
from kelab.sim.scene.sensor_config import SensorConfig
from kelab.sim.scene.sensor_kinds import (
    SENSOR_KINDS,
    WORLD_FRAME,
    ZOOM_FIX,
    ZOOM_MAX,
    ZOOM_MIN,
    check_params,
)
from kelab.sim.scene.shapes import COORD_MAX, Pose, field_pose

__all__ = [
    "ZOOM_MAX",
    "ZOOM_MIN",
    "BodyInstance",
    "CameraSpec",
    "JointInstance",
    "RobotInstance",
    "SensorSpec",
    "SiteInstance",
]


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
        check_path(self.path, "BodyInstance.path")
        if not isinstance(self.spec, BodySpec):
            raise ValueError(
                f"BodyInstance {self.path!r}: spec must be a BodySpec, got "
                f"{short_repr(self.spec)}; build scenes with ke.SceneBuilder or "
                "Scene.from_dict(scene.to_dict())"
            )
        field_pose(f"BodyInstance {self.path!r}", "pose", self.pose)
        field_flag(f"BodyInstance {self.path!r}", "per_environment", self.per_environment)


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
        check_path(self.path, "JointInstance.path")
        owner = f"JointInstance {self.path!r}"
        if not isinstance(self.spec, JOINT_TYPES):
            raise ValueError(
                f"{owner}: spec must be a RevoluteJoint, PrismaticJoint, FixedJoint or "
                f"SpringJoint, got {short_repr(self.spec)}; build scenes with ke.SceneBuilder"
            )
        if self.parent_path is not None:
            check_path(self.parent_path, f"{owner}: parent_path")
        check_path(self.child_path, f"{owner}: child_path")
        field_flag(owner, "per_environment", self.per_environment)
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
        kind: ``"imu"``, ``"joint"``, ``"contact"``, ``"rangefinder"``, ``"pose"`` or
            ``"camera"`` (``SENSOR_KINDS``).
        target: Body path (joint path for ``"joint"``; a camera's may be ``"/"``, the
            copy's own frame: fixed to the world).
        config: Degradation pipeline settings.
        params: Extra ``(key, value)`` pairs (rangefinder: angle, max_range, offset).
    """

    name: str
    kind: str
    target: str
    config: SensorConfig = field(default_factory=SensorConfig)
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        field_label("SensorSpec", "name", self.name)
        check_choice(self.kind, "SensorSpec.kind", SENSOR_KINDS)
        kind = SENSOR_KINDS[self.kind]
        if not (kind.target == "frame" and self.target == WORLD_FRAME):
            check_path(self.target, f"sensor {self.name!r}: target")
        if not isinstance(self.config, SensorConfig):
            raise ValueError(
                f"sensor {self.name!r}: sensor must be a ke.SensorConfig (SensorSpec.config), "
                f"got {short_repr(self.config)}"
            )
        set_field(self, "params", check_params(self.name, self.kind, self.params))
        kind.check_config(self.name, self.kind, self.config)
        noise = self.config.noise
        if isinstance(noise, tuple) and len(noise) != kind.width:
            raise ValueError(
                f"sensor {self.name!r}: SensorConfig.noise must be one number or {kind.width} "
                f"(one per value: {kind.values}), got {len(noise)} numbers {short_repr(noise)}"
            )

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

    def __post_init__(self) -> None:
        field_label("SiteInstance", "name", self.name)
        check_path(self.body, f"site {self.name!r}: body")
        field_pose(f"site {self.name!r}", "offset", self.offset)


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
        field_name("CameraSpec", "name", self.name)
        set_field(self, "center", field_vec2("CameraSpec", "center", self.center, limit=COORD_MAX))
        zoom = field_positive(
            "CameraSpec", "zoom", self.zoom, lo=ZOOM_MIN, hi=ZOOM_MAX, unit=" px/m", fix=ZOOM_FIX
        )
        set_field(self, "zoom", zoom)


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
        check_path(self.path, "RobotInstance.path")
        owner = f"RobotInstance {self.path!r}"
        field_name(owner, "name", self.name)
        field_pose(owner, "initial_pose", self.initial_pose)
        for attr in ("body_paths", "joint_paths"):
            paths = field_tuple(owner, attr, getattr(self, attr), (str,))
            seen: set[str] = set()
            for i, path in enumerate(paths):
                check_path(path, f"{owner}: {attr}[{i}]")
                if path.rsplit("/", 1)[0] != self.path:
                    raise ValueError(
                        f"{owner}: {attr}[{i}] must be directly under the robot path, like "
                        f"'{self.path}/<name>', got {path!r}"
                    )
                if path in seen:
                    raise ValueError(f"{owner}: {attr} lists {path!r} twice; list it once")
                seen.add(path)
            set_field(self, attr, paths)
        if not self.body_paths:
            raise ValueError(f"{owner}: body_paths is empty; a robot has at least one body")
        field_flag(owner, "self_collide", self.self_collide)
        field_flag(owner, "per_environment", self.per_environment)
