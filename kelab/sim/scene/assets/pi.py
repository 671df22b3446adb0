"""``kelab/robot/pi:v1``: a planar quadruped 0.5 m long with PD-controlled legs.

Root frame: origin on the ground (y = 0) below the centre of the torso; +X is forward.
At the identity pose it stands on four straight vertical legs whose round feet touch
y = 0. Bodies (metres, kg): torso 0.50 x 0.10 (4 kg, centre at 0.37 m); per leg a thigh
0.04 x 0.15 (0.5 kg) and a shin 0.03 x 0.15 with a 0.02 m radius foot (0.3 kg). Hips at
x = ±0.20 (``fl``/``fr`` front, ``rl``/``rr`` rear; left and right share the plane).
Joints ``hip_<leg>`` (torso -> thigh) and ``knee_<leg>`` (thigh -> shin), positive =
counter-clockwise, each with ``PDActuator(kp=20, kd=0.2, limit=12)`` (N·m/rad, N·m·s/rad,
N·m); the gains are explicit-integration stable at 120 Hz for these inertias.
"""

from __future__ import annotations

from kelab.sim.scene.items import BodySpec, RobotDescription, Site
from kelab.sim.scene.joints import PDActuator, RevoluteJoint
from kelab.sim.scene.shapes import Box, Circle, Material, Pose, RenderHint

TORSO_LENGTH, TORSO_HEIGHT = 0.50, 0.10
THIGH_LENGTH, SHIN_LENGTH, FOOT_RADIUS = 0.15, 0.15, 0.02
HIP_X = 0.20
KNEE_Y = FOOT_RADIUS + SHIN_LENGTH  # 0.17
HIP_Y = KNEE_Y + THIGH_LENGTH  # 0.32
TORSO_Y = HIP_Y + 0.05  # hips sit 0.05 m below the torso centre
LEGS = (("fl", HIP_X), ("fr", HIP_X), ("rl", -HIP_X), ("rr", -HIP_X))
GAINS = {"kp": 20.0, "kd": 0.2, "limit": 12.0}


def description() -> RobotDescription:
    """Return the quadruped description (see the module docstring)."""
    shell = Material(static_friction=0.6, dynamic_friction=0.5, density=800.0)
    rubber = Material(static_friction=1.0, dynamic_friction=0.8, density=1200.0)
    bodies = [
        BodySpec(
            name="torso",
            shapes=(Box(TORSO_LENGTH, TORSO_HEIGHT),),
            mass=4.0,
            material=shell,
            initial_pose=Pose(0.0, TORSO_Y),
            render=RenderHint(color=(200, 60, 60), layer=0),
        )
    ]
    joints = []
    sites = [Site("imu", "torso", Pose(0.0, 0.0))]
    for leg, x in LEGS:
        near = leg.endswith("l")
        color = (90, 90, 100) if near else (60, 60, 70)
        layer = 1 if near else -1
        bodies.append(
            BodySpec(
                name=f"thigh_{leg}",
                shapes=(Box(0.04, THIGH_LENGTH),),
                mass=0.5,
                material=shell,
                initial_pose=Pose(x, KNEE_Y + THIGH_LENGTH / 2.0),
                render=RenderHint(color=color, layer=layer),
            )
        )
        bodies.append(
            BodySpec(
                name=f"shin_{leg}",
                shapes=(
                    Box(0.03, SHIN_LENGTH),
                    Circle(FOOT_RADIUS, offset=Pose(0.0, -SHIN_LENGTH / 2.0)),
                ),
                mass=0.3,
                material=rubber,
                initial_pose=Pose(x, FOOT_RADIUS + SHIN_LENGTH / 2.0),
                render=RenderHint(color=color, layer=layer),
            )
        )
        joints.append(
            RevoluteJoint(
                name=f"hip_{leg}",
                parent="torso",
                child=f"thigh_{leg}",
                anchor=(x, HIP_Y - TORSO_Y),
                limits=(-1.2, 1.2),
                actuator=PDActuator(**GAINS),
            )
        )
        joints.append(
            RevoluteJoint(
                name=f"knee_{leg}",
                parent=f"thigh_{leg}",
                child=f"shin_{leg}",
                anchor=(0.0, -THIGH_LENGTH / 2.0),
                limits=(-2.4, 2.4),
                actuator=PDActuator(**GAINS),
            )
        )
        sites.append(Site(f"foot_{leg}", f"shin_{leg}", Pose(0.0, -SHIN_LENGTH / 2.0)))
    return RobotDescription(
        name="pi", bodies=tuple(bodies), joints=tuple(joints), sites=tuple(sites)
    )
