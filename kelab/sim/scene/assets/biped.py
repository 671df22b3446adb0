"""``kelab/robot/biped:v2`` (and ``:v1``): a planar 1.40 m biped with torque-controlled legs.

Root frame: origin on the ground (y = 0) directly below the hips; +X is forward. At the
identity pose the robot stands straight with both soles on y = 0. Bodies (metres, kg):
torso 0.30 x 0.50 (40 kg, top at 1.40 m), thighs 0.10 x 0.42 (7 kg), shins 0.08 x 0.42
(3.5 kg), feet 0.24 x 0.06 (1 kg, extending 0.16 m forward of the ankle). Joints
``hip_l/r`` (torso -> thigh), ``knee_l/r`` (thigh -> shin), ``ankle_l/r`` (shin -> foot),
positive = counter-clockwise (hip flexion is positive, knee flexion negative), each with
an EffortActuator (hip 150 N·m, knee 150 N·m, ankle 40 N·m). Left and right legs lie in
the same plane; the robot does not self-collide.

v2 (2026-12-01) differs from v1 in its joints alone: every joint corrects 30 % of its
drift every 1/60 s (``error_correction=0.3``; v1 keeps Chipmunk's 10 %) and the ankles
are limited to 40 N·m (v1: 80). Under a walking policy's torques v1's 1 kg feet pulled
their ankles up to 25 cm apart at impacts (3.4 cm on average); v2's, at most 5.7 cm (0.9
cm on average; docs/tasks.md, "Joint drift"). ``kelab/Humanoid-v0`` uses v2; v1 stays
as it was, so tasks built on it keep their dynamics (and their scene fingerprints).
"""

from __future__ import annotations

from kelab.sim.scene.items import BodySpec, RobotDescription, Site
from kelab.sim.scene.joints import EffortActuator, RevoluteJoint
from kelab.sim.scene.shapes import Box, Material, Pose, RenderHint

FOOT_LENGTH, FOOT_HEIGHT, FOOT_FORWARD = 0.24, 0.06, 0.04
SHIN_LENGTH, THIGH_LENGTH, TORSO_HEIGHT = 0.42, 0.42, 0.50
ANKLE_Y = FOOT_HEIGHT
KNEE_Y = ANKLE_Y + SHIN_LENGTH
HIP_Y = KNEE_Y + THIGH_LENGTH
HEIGHT = HIP_Y + TORSO_HEIGHT  # 1.40 m

TORQUE_LIMITS = {"hip": 150.0, "knee": 150.0, "ankle": 40.0}
"""v2's actuator limits, N·m (v1: the ankles at 80)."""
ERROR_CORRECTION = 0.3
"""v2's fraction of a joint's drift corrected every 1/60 s (v1: None, Chipmunk's 0.1)."""
_V1_TORQUE_LIMITS = {"hip": 150.0, "knee": 150.0, "ankle": 80.0}
JOINT_LIMITS = {"hip": (-0.8, 1.8), "knee": (-2.4, 0.05), "ankle": (-0.7, 0.7)}


def _leg(
    side: str,
    color: tuple[int, int, int],
    layer: int,
    torques: dict[str, float],
    correction: float | None,
) -> tuple[list[BodySpec], list]:
    skin = Material(static_friction=0.9, dynamic_friction=0.8, density=1000.0)
    sole = Material(static_friction=1.0, dynamic_friction=0.9, density=1000.0)
    bodies = [
        BodySpec(
            name=f"thigh_{side}",
            shapes=(Box(0.10, THIGH_LENGTH),),
            mass=7.0,
            material=skin,
            initial_pose=Pose(0.0, KNEE_Y + THIGH_LENGTH / 2.0),
            render=RenderHint(color=color, layer=layer),
        ),
        BodySpec(
            name=f"shin_{side}",
            shapes=(Box(0.08, SHIN_LENGTH),),
            mass=3.5,
            material=skin,
            initial_pose=Pose(0.0, ANKLE_Y + SHIN_LENGTH / 2.0),
            render=RenderHint(color=color, layer=layer),
        ),
        BodySpec(
            name=f"foot_{side}",
            shapes=(Box(FOOT_LENGTH, FOOT_HEIGHT),),
            mass=1.0,
            material=sole,
            initial_pose=Pose(FOOT_FORWARD, FOOT_HEIGHT / 2.0),
            render=RenderHint(color=color, layer=layer),
        ),
    ]
    joints = [
        RevoluteJoint(
            name=f"{kind}_{side}",
            parent=parent,
            child=f"{child}_{side}",
            anchor=anchor,
            limits=JOINT_LIMITS[kind],
            actuator=EffortActuator(limit=torques[kind]),
            error_correction=correction,
        )
        for kind, parent, child, anchor in (
            ("hip", "torso", "thigh", (0.0, -TORSO_HEIGHT / 2.0)),
            ("knee", f"thigh_{side}", "shin", (0.0, -THIGH_LENGTH / 2.0)),
            ("ankle", f"shin_{side}", "foot", (0.0, -SHIN_LENGTH / 2.0)),
        )
    ]
    return bodies, joints


def description() -> RobotDescription:
    """Return ``kelab/robot/biped:v2`` (see the module docstring)."""
    return _description(TORQUE_LIMITS, ERROR_CORRECTION)


def description_v1() -> RobotDescription:
    """Return ``kelab/robot/biped:v1``: 80 N·m ankles, Chipmunk's joint correction."""
    return _description(_V1_TORQUE_LIMITS, None)


def _description(torques: dict[str, float], correction: float | None) -> RobotDescription:
    torso = BodySpec(
        name="torso",
        shapes=(Box(0.30, TORSO_HEIGHT),),
        mass=40.0,
        material=Material(static_friction=0.8, dynamic_friction=0.6, density=1000.0),
        initial_pose=Pose(0.0, HIP_Y + TORSO_HEIGHT / 2.0),
        render=RenderHint(color=(120, 130, 150), layer=0),
    )
    left_bodies, left_joints = _leg("l", (80, 140, 200), 1, torques, correction)
    right_bodies, right_joints = _leg("r", (60, 100, 150), -1, torques, correction)
    sites = (
        Site("imu", "torso", Pose(0.0, 0.0)),
        Site("head", "torso", Pose(0.0, TORSO_HEIGHT / 2.0)),
        Site("toe_l", "foot_l", Pose(FOOT_LENGTH / 2.0, -FOOT_HEIGHT / 2.0)),
        Site("heel_l", "foot_l", Pose(-FOOT_LENGTH / 2.0, -FOOT_HEIGHT / 2.0)),
        Site("toe_r", "foot_r", Pose(FOOT_LENGTH / 2.0, -FOOT_HEIGHT / 2.0)),
        Site("heel_r", "foot_r", Pose(-FOOT_LENGTH / 2.0, -FOOT_HEIGHT / 2.0)),
    )
    return RobotDescription(
        name="biped",
        bodies=(torso, *left_bodies, *right_bodies),
        joints=(*left_joints, *right_joints),
        sites=sites,
        self_collide=False,
    )
