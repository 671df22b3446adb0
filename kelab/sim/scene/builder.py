"""SceneBuilder: what a task's ``build(scene)`` receives; ``build()`` freezes a Scene.

Items (robots, props, terrain) are added at unique absolute paths, sensors, sites and
cameras by name; ``build()`` flattens everything into the immutable `Scene` of
`kelab.sim.scene`. See docs/scene.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kelab._validate import check_bool, check_choice, must
from kelab.errors import UserError
from kelab.sim.scene.fields import check_path, field_number, field_positive, field_vec2
from kelab.sim.scene.instances import (
    BodyInstance,
    CameraSpec,
    JointInstance,
    RobotInstance,
    SensorSpec,
    SiteInstance,
)
from kelab.sim.scene.items import Prop, Robot, Terrain
from kelab.sim.scene.joints import (
    WORLD,
    Joint,
    PrismaticJoint,
    RevoluteJoint,
    SpringJoint,
)
from kelab.sim.scene.scene import Scene
from kelab.sim.scene.sensor_config import SensorConfig
from kelab.sim.scene.sensor_kinds import SENSOR_KINDS, WORLD_FRAME
from kelab.sim.scene.shapes import GRAVITY_MAX, Pose


def _world_joint(joint: Joint, root: Pose) -> Joint:
    """Express a world-parented joint's anchor/axis (root frame) in the ground frame."""
    if joint.parent != WORLD:
        return joint
    if isinstance(joint, RevoluteJoint):
        return dataclasses.replace(joint, anchor=root.transform_point(joint.anchor))
    if isinstance(joint, PrismaticJoint):
        return dataclasses.replace(
            joint, anchor=root.transform_point(joint.anchor), axis=root.rotate_vector(joint.axis)
        )
    if isinstance(joint, SpringJoint):
        return dataclasses.replace(joint, anchor_parent=root.transform_point(joint.anchor_parent))
    return joint


SceneItem = Robot | Prop | Terrain


class SceneBuilder:
    """Collects scene items at paths, then ``build()`` returns the immutable Scene.

    Args:
        gravity: ``(gx, gy)`` in m/s².

    Example:
        >>> import kelab as ke
        >>> scene = ke.SceneBuilder()
        >>> scene.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
        '/ground'
        >>> robot = ke.Robot(asset=ke.Asset.from_registry("kelab/robot/cartpole:v1"))
        >>> scene.add(robot, at="/World/Robot")
        '/World/Robot'
        >>> scene.imu("pole.imu", "/World/Robot/pole")
        >>> len(scene.build().joints)
        2
    """

    def __init__(self, gravity: tuple[float, float] = (0.0, -9.81)) -> None:
        self.gravity = field_vec2("SceneBuilder", "gravity", gravity, limit=GRAVITY_MAX)
        self._bodies: list[BodyInstance] = []
        self._joints: list[JointInstance] = []
        self._sensors: list[SensorSpec] = []
        self._sites: list[SiteInstance] = []
        self._cameras: list[CameraSpec] = []
        self._robots: list[RobotInstance] = []
        self._paths: dict[str, str] = {}  # path -> what claimed it
        self._objects: dict[int, list[str]] = {}  # id(prop/terrain) -> body paths
        self._keep: list[object] = []  # keep added objects alive so their ids stay unique

    def _claim(self, path: str, what: str) -> None:
        if path in self._paths:
            raise UserError(
                f"path {path!r} is already used by a {self._paths[path]}; every path in a scene "
                "must be unique, choose another 'at'"
            )
        self._paths[path] = what

    def add(self, item: SceneItem, at: str, per_environment: bool | None = None) -> str:
        """Add a Robot, Prop or Terrain at the absolute path ``at``.

        Args:
            item: What to add.
            at: Absolute path such as ``"/World/Robot"``; ``"/"`` is allowed for a Terrain,
                whose path becomes ``"/<name>"``.
            per_environment: One per environment copy (True) or one shared (False).
                None means True, except for Terrain which defaults to False.

        Returns:
            The item's path.

        Raises:
            UserError: For a bad or duplicate path or an unsupported item.
        """
        if per_environment is None:
            per_environment = not isinstance(item, Terrain)
        per_environment = check_bool(
            per_environment,
            "SceneBuilder.add: per_environment",
            "None picks the default (True; False for a Terrain)",
        )
        if isinstance(item, Terrain) and at == "/":
            at = "/" + item.name
        path = check_path(at, "at")
        if isinstance(item, Robot):
            self._add_robot(item, path, per_environment)
        elif isinstance(item, (Prop, Terrain)):
            spec = (
                item.body_spec(path.rsplit("/", 1)[1])
                if isinstance(item, Prop)
                else item.body_spec()
            )
            pose = item.initial_pose if isinstance(item, Prop) else item.pose
            self._claim(path, type(item).__name__.lower())
            self._bodies.append(BodyInstance(path, spec, pose, per_environment))
            self._objects.setdefault(id(item), []).append(path)
            self._keep.append(item)
        else:
            raise UserError(
                f"SceneBuilder.add: item must be a ke.Robot, ke.Prop or ke.Terrain, got {item!r}"
            )
        return path

    def _add_robot(self, robot: Robot, path: str, per_environment: bool) -> None:
        if any(r.path == robot.path for r in self._robots) and robot.path is not None:
            raise UserError(
                f"this Robot object was already added at {robot.path!r}; create another "
                "ke.Robot(...) to add a second copy"
            )
        desc, root = robot.description, robot.initial_pose
        new_paths = [path] + [f"{path}/{n}" for n in desc.body_names + desc.joint_names]
        new_paths += [f"{path}/{s.name}" for s in desc.sites]
        for p in new_paths:
            if p in self._paths:
                self._claim(p, "robot")  # raises, naming the path
        for p in new_paths:
            self._claim(p, f"part of robot {path!r}")
        bodies = tuple(
            BodyInstance(f"{path}/{b.name}", b, root.compose(b.initial_pose), per_environment)
            for b in desc.bodies
        )
        joints = tuple(
            JointInstance(
                f"{path}/{j.name}",
                _world_joint(j, root),
                None if j.parent == WORLD else f"{path}/{j.parent}",
                f"{path}/{j.child}",
                per_environment,
            )
            for j in desc.joints
        )
        self._bodies.extend(bodies)
        self._joints.extend(joints)
        self._sites.extend(
            SiteInstance(f"{path}/{s.name}", f"{path}/{s.body}", s.offset) for s in desc.sites
        )
        self._robots.append(
            RobotInstance(
                path=path,
                name=desc.name,
                initial_pose=root,
                body_paths=tuple(b.path for b in bodies),
                joint_paths=tuple(j.path for j in joints),
                self_collide=desc.self_collide,
                per_environment=per_environment,
            )
        )
        robot.path = path

    def _body_path(self, body: object, what: str) -> str:
        if isinstance(body, (Prop, Terrain)):
            paths = self._objects.get(id(body), [])
            if len(paths) != 1:
                why = "was not added" if not paths else f"was added at several paths {paths}"
                raise UserError(
                    f"{what}: this {type(body).__name__} {why}; add it first with "
                    "scene.add(...) or pass its path as a string"
                )
            return paths[0]
        known = [b.path for b in self._bodies]
        if isinstance(body, str) and body in known:
            return body
        raise UserError(
            f"{what}: body {body!r} is not in the scene; pass an added ke.Prop or one of the "
            f"body paths {known}"
        )

    def _sensor(
        self, name: str, kind: str, target: str, sensor: SensorConfig | None, params: tuple = ()
    ) -> None:
        if any(s.name == name for s in self._sensors):
            raise UserError(f"sensor name {name!r} is already used; choose another name")
        config = SensorConfig() if sensor is None else sensor
        self._sensors.append(SensorSpec(name, kind, target, config, params))

    def add_sensor(
        self,
        name: str,
        kind: str,
        target: Prop | str,
        sensor: SensorConfig | None = None,
        params: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        """Add a sensor of any kind of ``kelab.sim.scene.sensor_kinds.SENSOR_KINDS``.

        The methods below (``imu``, ``rangefinder``...) are this with their kind's
        parameters spelled out.

        Args:
            name: Unique sensor name.
            kind: A sensor kind, e.g. ``"imu"``.
            target: A joint path for a joint sensor; else an added Prop or a body path
                (a camera's may be ``"/"``: fixed to the world).
            sensor: Degradation settings; None means ideal.
            params: The kind's ``(key, value)`` parameters (a rangefinder's angle,
                max_range and offset; none for the others).
        """
        check_choice(kind, "SceneBuilder.add_sensor: kind", SENSOR_KINDS)
        what = f"{kind} sensor {name!r}"
        if SENSOR_KINDS[kind].target == "joint":
            known = [j.path for j in self._joints]
            if target not in known:
                raise UserError(f"{what}: joint {target!r} is not in the scene; use one of {known}")
        elif not (SENSOR_KINDS[kind].target == "frame" and target == WORLD_FRAME):
            target = self._body_path(target, what)
        self._sensor(name, kind, target, sensor, params)  # type: ignore[arg-type]

    def imu(self, name: str, body: Prop | str, sensor: SensorConfig | None = None) -> None:
        """Add an IMU (angular velocity and linear acceleration in the body frame).

        Args:
            name: Unique sensor name, e.g. ``"torso.imu"``.
            body: An added Prop or a body path such as ``"/World/Robot/torso"``.
            sensor: Degradation settings; None means ideal.
        """
        self._sensor(name, "imu", self._body_path(body, f"imu {name!r}"), sensor)

    def joint_sensor(self, name: str, joint: str, sensor: SensorConfig | None = None) -> None:
        """Add a joint position-and-velocity sensor.

        Args:
            name: Unique sensor name.
            joint: Joint path such as ``"/World/Robot/cart_to_pole"``.
            sensor: Degradation settings; None means ideal.
        """
        known = [j.path for j in self._joints]
        if joint not in known:
            raise UserError(
                f"joint_sensor {name!r}: joint {joint!r} is not in the scene; use one of {known}"
            )
        self._sensor(name, "joint", joint, sensor)

    def contact_sensor(
        self, name: str, body: Prop | str, sensor: SensorConfig | None = None
    ) -> None:
        """Add a contact sensor (total contact force on the body).

        Args:
            name: Unique sensor name.
            body: An added Prop or a body path.
            sensor: Degradation settings; None means ideal.
        """
        self._sensor(name, "contact", self._body_path(body, f"contact_sensor {name!r}"), sensor)

    def rangefinder(
        self,
        name: str,
        body: Prop | str,
        angle: float = 0.0,
        max_range: float = 10.0,
        offset: Pose | None = None,
        sensor: SensorConfig | None = None,
    ) -> None:
        """Add a rangefinder: distance along a ray from the body, up to ``max_range``.

        Args:
            name: Unique sensor name.
            body: An added Prop or a body path.
            angle: Ray direction in the body frame (after ``offset``), radians.
            max_range: Longest distance reported, metres, > 0.
            offset: Ray origin pose in the body frame.
            sensor: Degradation settings; None means ideal.
        """
        target = self._body_path(body, f"rangefinder {name!r}")
        offset = Pose.identity() if offset is None else offset
        if not isinstance(offset, Pose):
            raise UserError(must(f"rangefinder {name!r}: offset", "a Pose", offset))
        params = (
            ("angle", field_number("rangefinder", "angle", angle)),
            ("max_range", field_positive("rangefinder", "max_range", max_range)),
            ("offset", offset),
        )
        self._sensor(name, "rangefinder", target, sensor, params)

    def pose_sensor(self, name: str, body: Prop | str, sensor: SensorConfig | None = None) -> None:
        """Add a pose sensor (x, y, angle of the body in its copy's frame).

        Args:
            name: Unique sensor name.
            body: An added Prop or a body path.
            sensor: Degradation settings; None means ideal.
        """
        self._sensor(name, "pose", self._body_path(body, f"pose_sensor {name!r}"), sensor)

    def camera_sensor(
        self,
        name: str,
        body: Prop | str | None = None,
        *,
        size: tuple[int, int] = (64, 64),
        channels: int = 3,
        zoom: float = 20.0,
        offset: Pose | None = None,
        follow: str = "pose",
        background: tuple[int, int, int] = (0, 0, 0),
        sensor: SensorConfig | None = None,
    ) -> None:
        """Add a camera sensor: what a small camera sees, an image per copy (docs/sensors.md).

        ``world.read_sensor(name)`` gives ``(num_envs, height, width, channels)`` uint8:
        every visible body drawn in its ``RenderHint`` colour (layer order), anti-aliased,
        over ``background``. The image is drawn from the body poses the sensor holds, so
        ``SensorConfig.sample_interval`` and ``delay`` apply to it as to any sensor.

        Args:
            name: Unique sensor name.
            body: The body it is fixed to (an added Prop or a body path); None fixes it
                to the world (the copy's frame).
            size: ``(width, height)`` in pixels, each in [4, 1024].
            channels: 3 (RGB) or 1 (grayscale: the colours' luma).
            zoom: Pixels per metre.
            offset: The camera's pose (the image centre and its rotation) in the body's
                frame, or in the copy's frame when fixed to the world.
            follow: On a body: ``"pose"`` turns with it, ``"position"`` keeps its angle.
            background: ``(r, g, b)`` where no body is drawn.
            sensor: ``SensorConfig(sample_interval=..., delay=...)``; None means ideal.

        Example:
            >>> import kelab as ke
            >>> b = ke.SceneBuilder()
            >>> _ = b.add(ke.Prop(ke.Circle(0.2), initial_pose=ke.Pose(0.0, 1.0)), at="/Ball")
            >>> b.camera_sensor("eye", size=(32, 24), channels=1, zoom=10.0,
            ...                 offset=ke.Pose(0.0, 1.0))
            >>> world = ke.World(b.build(), num_envs=2)
            >>> world.read_sensor("eye").shape
            (2, 24, 32, 1)
        """
        target = WORLD_FRAME if body is None else self._body_path(body, f"camera_sensor {name!r}")
        offset = Pose.identity() if offset is None else offset
        params = (
            ("size", size),
            ("channels", channels),
            ("zoom", zoom),
            ("offset", offset),
            ("follow", follow),
            ("background", background),
        )
        self._sensor(name, "camera", target, sensor, params)

    def site(self, name: str, body: Prop | str, offset: Pose | None = None) -> None:
        """Add a named frame on a body.

        Args:
            name: Unique site name.
            body: An added Prop or a body path.
            offset: Pose in the body frame.
        """
        if not isinstance(name, str) or not name.strip():
            raise UserError(must("site name", "a non-empty string", name))
        if any(s.name == name for s in self._sites):
            raise UserError(f"site name {name!r} is already used; choose another name")
        offset = Pose.identity() if offset is None else offset
        if not isinstance(offset, Pose):
            raise UserError(must(f"site {name!r}: offset", "a Pose", offset))
        self._sites.append(SiteInstance(name, self._body_path(body, f"site {name!r}"), offset))

    def camera(
        self, name: str, center: tuple[float, float] = (0.0, 0.0), zoom: float = 100.0
    ) -> None:
        """Add a camera.

        Args:
            name: Unique camera name.
            center: World point at the view centre, metres.
            zoom: Pixels per metre, > 0.
        """
        if any(c.name == name for c in self._cameras):
            raise UserError(f"camera name {name!r} is already used; choose another name")
        self._cameras.append(CameraSpec(name, center, zoom))

    def build(self) -> Scene:
        """Return the immutable Scene of everything added so far."""
        return Scene(
            gravity=self.gravity,
            bodies=tuple(self._bodies),
            joints=tuple(self._joints),
            sensors=tuple(self._sensors),
            sites=tuple(self._sites),
            cameras=tuple(self._cameras),
            robots=tuple(self._robots),
        )
