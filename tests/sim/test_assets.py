from __future__ import annotations

import dataclasses
import math

import pytest

import kelab as ke
from kelab.sim.scene.shapes import shape_lowest_point

BUILTINS = (
    "kelab/robot/cartpole:v1", "kelab/robot/biped:v1", "kelab/robot/biped:v2", "kelab/robot/pi:v1",
)  # fmt: skip


def _bounds(spec: ke.BodySpec, pose: ke.Pose) -> tuple[float, float, float, float]:
    xs, ys = [], []
    for shape in spec.shapes:
        pad = getattr(shape, "radius", 0.0)
        for p in shape.local_points():
            x, y = pose.transform_point(p)
            xs += [x - pad, x + pad]
            ys += [y - pad, y + pad]
    return min(xs), min(ys), max(xs), max(ys)


def _inside(point: tuple[float, float], bounds: tuple[float, ...], eps: float = 1e-9) -> bool:
    x, y = point
    return bounds[0] - eps <= x <= bounds[2] + eps and bounds[1] - eps <= y <= bounds[3] + eps


def test_registry_lists_and_returns_builtins() -> None:
    assert set(BUILTINS) <= set(ke.Asset.names())
    for name in BUILTINS:
        asset = ke.Asset.from_registry(name)
        assert asset.name == name and isinstance(asset.description, ke.RobotDescription)
        assert ke.Asset.from_registry(name) == asset  # deterministic descriptions


def test_unknown_asset_lists_known_names() -> None:
    with pytest.raises(KeyError) as err:
        ke.Asset.from_registry("kelab/robot/unicycle:v1")
    for name in BUILTINS:
        assert name in str(err.value)


def test_register_user_asset_and_duplicates() -> None:
    desc = ke.RobotDescription("ball", (ke.BodySpec("ball", (ke.Circle(0.1),)),))
    name = "tests/robot/ball:v1"
    try:
        asset = ke.Asset.register(name, desc)
        assert ke.Asset.from_registry(name) == asset and name in ke.Asset.names()
        # the same description again (a module imported twice, a notebook cell run again):
        # a no-op, as ke.register_task's; an equal copy counts as the same
        same = ke.RobotDescription("ball", (ke.BodySpec("ball", (ke.Circle(0.1),)),))
        assert ke.Asset.register(name, same) == asset
        assert ke.Asset.from_registry(name).description is desc  # the first one kept
        other = ke.RobotDescription("ball", (ke.BodySpec("ball", (ke.Circle(0.2),)),))
        with pytest.raises(ValueError, match="already registered to another description"):
            ke.Asset.register(name, other)
        with pytest.raises(ValueError, match="already registered"):
            ke.Asset.register("kelab/robot/cartpole:v1", desc)
        cartpole = ke.Asset.from_registry("kelab/robot/cartpole:v1")
        assert ke.Asset.register(cartpole.name, cartpole.description) == cartpole  # a no-op
        robot = ke.Robot(asset=asset)
        b = ke.SceneBuilder()
        b.add(robot, at="/World/Ball")
        assert [x.path for x in b.build().bodies] == ["/World/Ball/ball"]
    finally:
        ke.Asset.unregister(name)
    assert name not in ke.Asset.names()
    with pytest.raises(ValueError, match="built-in"):
        ke.Asset.unregister("kelab/robot/pi:v1")
    with pytest.raises(ValueError, match="Asset.description"):
        ke.Asset.register("tests/bad:v1", "not a description")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", BUILTINS)
def test_builtins_stand_on_the_ground(name: str) -> None:
    desc = ke.Asset.from_registry(name).description
    assert desc.lowest_point() == pytest.approx(0.0, abs=1e-12)
    poses = desc.body_poses()
    for body in desc.bodies:
        assert body.body_type == "dynamic" and body.resolved_mass() > 0
        for shape in body.shapes:
            assert shape_lowest_point(shape, poses[body.name]) >= -1e-12


@pytest.mark.parametrize("name", BUILTINS)
def test_joints_sit_at_body_contact_points(name: str) -> None:
    desc = ke.Asset.from_registry(name).description
    poses = desc.body_poses()
    for joint in desc.joints:
        if joint.parent == "world":
            continue
        point = poses[joint.parent].transform_point(joint.anchor)
        assert _inside(point, _bounds(desc.body(joint.parent), poses[joint.parent])), joint.name
        assert _inside(point, _bounds(desc.body(joint.child), poses[joint.child])), joint.name


def test_cartpole_matches_gymnasium() -> None:
    desc = ke.Asset.from_registry("kelab/robot/cartpole:v1").description
    assert desc.body_names == ("cart", "pole")
    assert desc.joint_names == ("slider_to_cart", "cart_to_pole")
    cart, pole = desc.body("cart"), desc.body("pole")
    assert cart.mass == 1.0 and pole.mass == 0.1
    assert cart.material.dynamic_friction == 0.0
    slider, hinge = desc.joints
    assert isinstance(slider, ke.PrismaticJoint) and slider.parent == "world"
    assert slider.axis == (1.0, 0.0) and slider.limits == (-3.0, 3.0)
    assert slider.actuator == ke.EffortActuator(limit=100.0)
    assert slider.anchor == (cart.initial_pose.x, cart.initial_pose.y)
    assert isinstance(hinge, ke.RevoluteJoint) and hinge.actuator is None
    # pole: 1.0 m long (half-length 0.5), upright, its bottom on the hinge
    poses = desc.body_poses()
    lo = _bounds(pole, poses["pole"])
    pivot = poses["cart"].transform_point(hinge.anchor)
    assert lo[3] - lo[1] == pytest.approx(1.0)
    assert lo[1] == pytest.approx(pivot[1]) and poses["pole"].x == pivot[0]
    assert poses["pole"].angle == 0.0


def test_biped_v1_keeps_its_joints_and_v2_differs_in_them_alone() -> None:
    v1 = ke.Asset.from_registry("kelab/robot/biped:v1").description
    v2 = ke.Asset.from_registry("kelab/robot/biped:v2").description
    assert v1.bodies == v2.bodies and v1.sites == v2.sites
    for a, b in zip(v1.joints, v2.joints, strict=True):
        assert a.error_correction is None and b.error_correction == 0.3
        want = 80.0 if a.name.startswith("ankle") else 150.0
        assert a.actuator.limit == want
        assert dataclasses.replace(a, actuator=b.actuator, error_correction=0.3) == b


def test_biped_proportions_and_actuators() -> None:
    desc = ke.Asset.from_registry("kelab/robot/biped:v2").description
    assert set(desc.body_names) == {
        "torso", "thigh_l", "thigh_r", "shin_l", "shin_r", "foot_l", "foot_r",
    }  # fmt: skip
    poses = desc.body_poses()
    top = max(_bounds(b, poses[b.name])[3] for b in desc.bodies)
    assert top == pytest.approx(1.4)
    total = sum(b.resolved_mass() for b in desc.bodies)
    assert 50.0 <= total <= 90.0
    assert len(desc.joints) == 6
    for joint in desc.joints:
        assert isinstance(joint, ke.RevoluteJoint)
        assert isinstance(joint.actuator, ke.EffortActuator)
        want = 40.0 if joint.name.startswith("ankle") else 150.0
        assert joint.actuator.limit == want
        assert joint.limits is not None and joint.limits[0] < 0.0 < joint.limits[1]
        assert joint.error_correction == 0.3  # firmer than Chipmunk's 0.1 (the light feet)


def test_pi_quadruped_proportions_and_pd() -> None:
    desc = ke.Asset.from_registry("kelab/robot/pi:v1").description
    assert len(desc.bodies) == 9 and len(desc.joints) == 8
    torso = desc.body("torso")
    x0, _, x1, _ = _bounds(torso, torso.initial_pose)
    assert x1 - x0 == pytest.approx(0.5)
    for joint in desc.joints:
        assert isinstance(joint, ke.RevoluteJoint)
        act = joint.actuator
        assert isinstance(act, ke.PDActuator) and act.kp > 0 and act.kd > 0 and act.limit > 0
    # explicit PD is stable at a 120 Hz step: kd*dt/I and kp*dt^2/I well below 2 and 4
    dt = 1.0 / 120.0
    shin = desc.body("shin_fl")
    inertia = shin.resolved_mass() * (0.03**2 + 0.15**2) / 12 + shin.resolved_mass() * 0.075**2
    act = desc.joints[1].actuator
    assert act.kd * dt / inertia < 1.0 and act.kp * dt * dt / inertia < 2.0


def test_robot_accepts_asset_or_description() -> None:
    asset = ke.Asset.from_registry("kelab/robot/pi:v1")
    assert ke.Robot(asset).description == ke.Robot(asset.description).description
    with pytest.raises(ValueError, match="Robot.asset"):
        ke.Robot("kelab/robot/pi:v1")  # type: ignore[arg-type]
    robot = ke.Robot(asset, initial_pose=ke.Pose(1.0, 0.0, math.pi))
    assert robot.path is None and "pi" in repr(robot)
