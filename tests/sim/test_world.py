"""ke.World API: batched state, commands, resets, sensors, robot view, docs example."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _world_scenes import DT, LAYOUTS, busy_scene, drive

import kelab as ke
from kelab.sim.scene.assets import Asset

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.parametrize("layout", LAYOUTS)


def _cartpole(n: int = 3, **kw) -> ke.World:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    return ke.World(b.build(), num_envs=n, **kw)


def test_names_shapes_and_initial_state(layout: str) -> None:
    w = _cartpole(4, layout=layout)
    assert w.body_names == ("/ground", "/World/Robot/cart", "/World/Robot/pole")
    assert w.joint_names == ("/World/Robot/slider_to_cart", "/World/Robot/cart_to_pole")
    assert w.body_poses.shape == (4, 3, 3) and w.body_velocities.shape == (4, 3, 3)
    assert w.joint_positions.shape == (4, 2) and w.contact_forces.shape == (4, 3, 2)
    np.testing.assert_array_equal(w.joint_positions, 0.0)
    np.testing.assert_allclose(w.body_poses[2, 2], [0.0, 0.75, 0.0])
    np.testing.assert_allclose(w.env_origins[:, 0], [0.0, 4.0, 8.0, 12.0])


def test_efforts_are_clipped_held_and_move_the_cart(layout: str) -> None:
    w = _cartpole(2, layout=layout)
    w.set_joint_efforts([[500.0, 7.0], [-10.0, 7.0]])
    # clipped to the 100 N actuator limit; the passive pole joint ignores its column
    np.testing.assert_array_equal(w.joint_efforts, [[100.0, 0.0], [-10.0, 0.0]])
    for _ in range(12):
        w.step(DT)
    x = w.joint_positions[:, 0]
    assert x[0] > 0 and x[1] < 0
    # held: the cart keeps accelerating without a new command
    v1 = w.joint_velocities[0, 0]
    w.step(DT)
    assert w.joint_velocities[0, 0] > v1
    # prismatic position equals the cart's x displacement
    np.testing.assert_allclose(w.joint_positions[:, 0], w.body_poses[:, 1, 0], atol=1e-6)


def test_efforts_for_some_copies_and_bad_shapes(layout: str) -> None:
    w = _cartpole(3, layout=layout)
    w.set_joint_efforts([[20.0, 0.0]], env_ids=[1])
    np.testing.assert_array_equal(w.joint_efforts[:, 0], [0.0, 20.0, 0.0])
    with pytest.raises(ValueError, match="shape"):
        w.set_joint_efforts(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="env_ids"):
        w.set_joint_efforts([[1.0, 0.0]], env_ids=[7])
    with pytest.raises(ValueError, match="dt"):
        w.step(0.0)
    with pytest.raises(ValueError, match="num_envs"):
        ke.World(w.scene, num_envs=0, layout=layout)


def test_resetting_some_copies_leaves_the_others_untouched(layout: str) -> None:
    scene = busy_scene()
    a = ke.World(scene, num_envs=3, seed=1, layout=layout)
    b = ke.World(scene, num_envs=3, seed=1, layout=layout)
    drive(a, 60)
    drive(b, 60)
    poses = a.body_poses[[1]]
    poses[0, 3] = (0.5, 2.0, 0.3)  # lift the ball
    a.set_body_states([1], poses, np.zeros_like(poses))
    np.testing.assert_allclose(a.body_poses[1, 3], (0.5, 2.0, 0.3))  # cache invalidated
    np.testing.assert_array_equal(a.body_velocities[1], 0.0)
    after_a = drive(a, 60, start=60)
    after_b = drive(b, 60, start=60)
    for i in (0, 2):
        assert np.array_equal(after_a[:, i], after_b[:, i])
    a.reset_envs([2])
    np.testing.assert_allclose(a.body_poses[2], a.body_poses[2] * 0 + _initial(a))


def _initial(w: ke.World) -> np.ndarray:
    return np.array([(b.pose.x, b.pose.y, b.pose.angle) for b in w.scene.bodies])


def test_sim_time_is_exact(layout: str) -> None:
    w = _cartpole(1, layout=layout)
    for _ in range(300):
        w.step(1 / 300)
    assert w.step_count == 300 and w.sim_time == 1.0
    assert w.sim_time_exact == sum([__import__("fractions").Fraction(1 / 300)] * 300)


def test_sensors_read_true_signals(layout: str) -> None:
    w = ke.World(busy_scene(noise=0.0), num_envs=2, layout=layout)
    drive(w, 240)
    imu = w.read_sensor("imu")
    assert imu.shape == (2, 4)
    np.testing.assert_allclose(w.read_sensor("where"), w.body_poses[:, 5])
    rng = w.read_sensor("range")[:, 0]
    box2 = w.body_poses[:, 6]
    assert np.all((rng > 0) & (rng <= 3.0))
    down = np.sin(box2[:, 2] - np.pi / 2)  # where Box2's ray points (it tumbles: chaotic)
    steep = down < -0.5  # then it meets the ground (top at y = 0) or something above it
    assert np.all(rng[steep] <= box2[steep, 1] / -down[steep] + 1e-9)
    # the cart rides upright: its downward ray ignores its own wheels and meets the ground
    cart = w.body_poses[:, 1]
    np.testing.assert_allclose(w.read_sensor("floor")[:, 0], cart[:, 1], atol=1e-6)
    touch = w.read_sensor("touch")
    assert np.all(touch[:, 1] > 0)  # the ground pushes Box0 up
    with pytest.raises(KeyError, match="known sensors"):
        w.read_sensor("nope")
    w.reset_envs([0])
    np.testing.assert_array_equal(w.read_sensor("pole")[0], 0.0)


def test_imu_at_rest_reads_minus_gravity(layout: str) -> None:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    box = ke.Prop(ke.Box(0.2, 0.2), initial_pose=ke.Pose(0.0, 0.0999))
    b.add(box, at="/World/Box")
    b.imu("imu", box)
    w = ke.World(b.build(), layout=layout)
    for _ in range(120):
        w.step(DT)
    np.testing.assert_allclose(w.read_sensor("imu")[0], [0.0, 0.0, 9.81, 0.0], atol=1e-4)


def test_pd_actuators_track_targets(layout: str) -> None:
    b = ke.SceneBuilder()
    arm = ke.RobotDescription(
        name="arm",
        bodies=(
            ke.BodySpec("base", (ke.Box(0.2, 0.2),), body_type="static"),
            ke.BodySpec("link", (ke.Box(0.6, 0.05),), mass=1.0, initial_pose=ke.Pose(0.3, 0.0)),
        ),
        joints=(
            ke.RevoluteJoint(
                "shoulder",
                "base",
                "link",
                anchor=(0.0, 0.0),
                actuator=ke.PDActuator(kp=200.0, kd=20.0, limit=50.0),
            ),
        ),
    )
    b.add(ke.Robot(arm), at="/World/Arm")
    w = ke.World(b.build(), num_envs=2, layout=layout)
    w.set_joint_position_targets([[0.5], [-0.3]])
    for _ in range(600):
        w.step(DT)
    np.testing.assert_allclose(w.joint_positions[:, 0], [0.5, -0.3], atol=0.03)


def test_robot_view(layout: str) -> None:
    w = _cartpole(3, layout=layout)
    r = w.robot("/World/Robot")
    idx = r.find_joints("slider_to_cart")
    np.testing.assert_array_equal(idx, [0])
    np.testing.assert_array_equal(r.find_joints(["cart_to_pole", "slider.*"]), [1, 0])
    with pytest.raises(ValueError, match="joints"):
        r.find_joints("elbow")
    for bad in (3, [0], None):  # an index is not a name: said in one line, with the names
        with pytest.raises(ValueError, match=r"find_joints takes a joint name .* joints: \("):
            r.find_joints(bad)
    r.set_joint_effort_target([[50.0]], joint_ids=idx, env_ids=[2])
    for _ in range(30):
        w.step(DT)
    assert r.joint_pos.shape == (3, 2) and r.joint_pos[2, 0] > 0.1 and abs(r.joint_pos[0, 0]) < 1e-9
    pos, ang = r.get_body_pose_in_base_frame("pole")
    assert pos.shape == (3, 2) and ang.shape == (3,)
    np.testing.assert_allclose(r.root_pose, w.body_poses[:, 1])
    np.testing.assert_array_equal(r.root_velocity, w.body_velocities[:, 1])
    assert r.root_velocity[2, 0] > 0.1  # the pushed cart moves
    r.reset([2])
    np.testing.assert_allclose(r.joint_pos[2], 0.0, atol=1e-12)  # reads current after reset
    np.testing.assert_array_equal(r.joint_vel[2], 0.0)
    with pytest.raises(KeyError, match="robots"):
        w.robot("/World/Nope")


def test_docs_example_runs(layout: str) -> None:
    text = (ROOT / "docs" / "world.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/world.md", "exec"), {})


def test_effort_targets_for_every_joint_in_another_order(layout: str) -> None:
    # all copies, all joints listed out of order: the same as the joint-order call
    a, b = _cartpole(3, layout=layout), _cartpole(3, layout=layout)
    ra, rb = a.robot("/World/Robot"), b.robot("/World/Robot")
    efforts = np.array([[0.0, 250.0], [0.0, -30.0], [0.0, 7.0]])  # (pole, cart) columns
    ra.set_joint_effort_target(efforts, joint_ids=[1, 0])
    rb.set_joint_effort_target(efforts[:, ::-1])
    assert np.array_equal(a.joint_efforts, b.joint_efforts)
    np.testing.assert_array_equal(a.joint_efforts[:, 0], [100.0, -30.0, 7.0])  # clipped
    assert np.all(a.joint_efforts[:, 1] == 0.0)  # the pole joint has no actuator
    ra.set_joint_effort_target([[5.0]] * 3, joint_ids=0)  # one joint by a plain index
    np.testing.assert_array_equal(a.joint_efforts[:, 0], 5.0)


def test_robot_joint_ids_arrays_mapped_once_follow_their_values(layout: str) -> None:
    # a task's int64 joint-id array is checked and mapped once per value: the same array
    # changed in place maps anew, a bad one is refused every time, a 2-D one never passes
    w = _cartpole(2, layout=layout)
    r = w.robot("/World/Robot")
    ids = np.array([1, 0])
    for _ in range(2):
        r.set_joint_effort_target([[0.0, 9.0]] * 2, joint_ids=ids)
        np.testing.assert_array_equal(w.joint_efforts[:, 0], 9.0)
    ids[:] = [0, 1]  # the caller's array, changed in place
    r.set_joint_effort_target([[4.0, 0.0]] * 2, joint_ids=ids)
    np.testing.assert_array_equal(w.joint_efforts[:, 0], 4.0)
    for bad in (np.array([0, 2]), np.array([0, 0]), np.array([[0, 1]])):
        for _ in range(2):
            with pytest.raises(ValueError, match="joint_ids"):
                r.set_joint_effort_target([[1.0, 1.0]] * 2, joint_ids=bad)
