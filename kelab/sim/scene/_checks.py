"""Scene-wide checks: paths, references, the joint graph and robots' parts.

What no single dataclass can check on its own, run by ``Scene.__post_init__`` so that a Scene
that exists never crashes a World (docs/scene.md, "Validation").
"""

from __future__ import annotations

from collections.abc import Sequence

from kelab.errors import UserError
from kelab.sim.scene.fields import check_path, short_repr
from kelab.sim.scene.instances import (
    BodyInstance,
    CameraSpec,
    JointInstance,
    RobotInstance,
    SensorSpec,
    SiteInstance,
)
from kelab.sim.scene.sensor_kinds import SENSOR_KINDS, WORLD_FRAME


def validate_scene(
    *,
    robots: Sequence[RobotInstance],
    bodies: Sequence[BodyInstance],
    joints: Sequence[JointInstance],
    sensors: Sequence[SensorSpec],
    sites: Sequence[SiteInstance],
    cameras: Sequence[CameraSpec],
) -> None:
    """Check what no single field can: unique paths and names, references, the joint graph.

    Args:
        robots: A scene's robots, and so on: the fields of ``Scene``.
        bodies: Its bodies.
        joints: Its joints.
        sensors: Its sensors.
        sites: Its sites.
        cameras: Its cameras.

    Raises:
        UserError: Naming the first problem found.
    """
    paths: set[str] = set()

    def claim(path: str, what: str) -> None:
        check_path(path, what)
        if path in paths:
            raise UserError(
                f"path {path!r} is used twice in the scene ({what}); paths must be unique, so "
                "rename one"
            )
        paths.add(path)

    for robot in robots:
        claim(robot.path, "robot path")
    for body in bodies:
        claim(body.path, "body path")
    body_at = {b.path: b for b in bodies}
    body_paths = set(body_at)
    for joint in joints:
        claim(joint.path, "joint path")
        for ref in (joint.parent_path, joint.child_path):
            if ref is not None and ref not in body_paths:
                raise UserError(
                    f"joint {joint.path!r} refers to unknown body {ref!r}; use one of the "
                    f"body paths {short_repr(sorted(body_paths))}"
                )
        _check_joint_bodies(joint, body_at)
    joint_at = {j.path: j for j in joints}
    joint_paths = set(joint_at)
    _check_robots(robots, body_at, joint_at)
    for kind, items in (
        ("sensor", sensors),
        ("site", sites),
        ("camera", cameras),
    ):
        seen: set[str] = set()
        for item in items:
            if item.name in seen:
                raise UserError(
                    f"{kind} name {item.name!r} is used twice; {kind} names must be unique, so "
                    "rename one"
                )
            seen.add(item.name)
    for sensor in sensors:
        target = SENSOR_KINDS[sensor.kind].target
        known = joint_paths if target == "joint" else body_paths
        if target == "frame":
            known = known | {WORLD_FRAME}
        if sensor.target not in known:
            raise UserError(
                f"sensor {sensor.name!r} targets unknown path {sensor.target!r}; a "
                f"{sensor.kind} sensor must target one of {short_repr(sorted(known))}"
            )
    for site in sites:
        if site.body not in body_paths:
            raise UserError(
                f"site {site.name!r} is on unknown body {site.body!r}; use one of the body "
                f"paths {short_repr(sorted(body_paths))}"
            )


def _check_joint_bodies(joint: JointInstance, bodies: dict[str, BodyInstance]) -> None:
    """Refuse joints the physics cannot solve: static children, two immovable bodies.

    Joints may form closed chains (a four-bar linkage, two joints between one pair): the
    solver handles loops, so cycles are allowed. A joint of a body to itself is refused by
    JointInstance.
    """
    child = bodies[joint.child_path]
    parent = None if joint.parent_path is None else bodies[joint.parent_path]
    if child.spec.body_type == "static":
        raise UserError(
            f"joint {joint.path!r}: child_path must be a dynamic or kinematic body, got the "
            f"static body {joint.child_path!r}; swap parent and child, or make the body "
            "dynamic"
        )
    parent_type = "static" if parent is None else parent.spec.body_type
    if child.spec.body_type != "dynamic" and parent_type != "dynamic":
        raise UserError(
            f"joint {joint.path!r}: at least one of its bodies must be dynamic, got a "
            f"{parent_type} parent {joint.parent_path or 'ground frame'!r} and a "
            f"{child.spec.body_type} child {joint.child_path!r}; two bodies of infinite mass "
            "cannot be constrained, so remove the joint or make one body dynamic"
        )
    if joint.per_environment != child.per_environment:
        raise UserError(
            f"joint {joint.path!r}: per_environment must match its child body's "
            f"({child.per_environment}), got {joint.per_environment}; add joints with "
            "ke.SceneBuilder"
        )
    if parent is not None and parent.per_environment and not joint.per_environment:
        raise UserError(
            f"joint {joint.path!r}: a shared joint (per_environment=False) cannot hang from "
            f"the per-copy body {parent.path!r}; make both shared or both per copy"
        )


def _check_robots(
    robots: Sequence[RobotInstance],
    bodies: dict[str, BodyInstance],
    joints: dict[str, JointInstance],
) -> None:
    """Each robot lists existing bodies and joints of its own, each in one robot only."""
    owner: dict[str, str] = {}
    for robot in robots:
        mine = set(robot.body_paths)
        for path in robot.body_paths + robot.joint_paths:
            if path not in bodies and path not in joints:
                raise UserError(
                    f"robot {robot.path!r} lists {path!r}, which is not a "
                    f"{'body' if path in mine else 'joint'} of the scene; list only its own "
                    "bodies and joints"
                )
            if path in owner:
                raise UserError(
                    f"{path!r} is listed by robots {owner[path]!r} and {robot.path!r}; a body "
                    "or joint belongs to one robot, so list it once"
                )
            owner[path] = robot.path
        for path in robot.body_paths:
            if path not in bodies:
                raise UserError(
                    f"robot {robot.path!r}: body_paths must list bodies, got the joint "
                    f"{path!r}; move it to joint_paths"
                )
            if bodies[path].per_environment != robot.per_environment:
                raise UserError(
                    f"robot {robot.path!r}: body {path!r} must have per_environment="
                    f"{robot.per_environment} like its robot, got "
                    f"{bodies[path].per_environment}"
                )
        for path in robot.joint_paths:
            joint = joints.get(path)
            if joint is None:
                raise UserError(
                    f"robot {robot.path!r}: joint_paths must list joints, got the body "
                    f"{path!r}; move it to body_paths"
                )
            for ref in (joint.parent_path, joint.child_path):
                if ref is not None and ref not in mine:
                    raise UserError(
                        f"robot {robot.path!r}: joint {path!r} must connect bodies of the "
                        f"robot (or the ground frame), got {ref!r}; list it in body_paths"
                    )
