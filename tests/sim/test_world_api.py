"""ke.World additions: static poses, primed sensors, external forces, picking, joint-space
writes, threaded reads, bounded replay log (both layouts)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from _world_scenes import DT, LAYOUTS, busy_scene, drive

import kelab as ke
from kelab.sim.kinematics import cog_world as _cog_world
from kelab.sim.kinematics import point_state as _point
from kelab.sim.scene.assets import Asset


def _walls() -> ke.Scene:
    """A ground plane, two static walls (no ground-attached joint) and a ball."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    wall = ke.Box(0.2, 2.0)
    b.add(ke.Prop(wall, body_type="static", initial_pose=ke.Pose(-1.5, 1.0)), at="/World/left_wall")
    b.add(
        ke.Prop(wall, body_type="static", initial_pose=ke.Pose(1.5, 1.0, 0.3)),
        at="/World/right_wall",
    )
    b.add(ke.Prop(ke.Circle(0.1), mass=2.0, initial_pose=ke.Pose(0.0, 0.5)), at="/World/Ball")
    return b.build()


def _robot_scene(name: str = "cartpole", sensors: bool = False) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    pose = ke.Pose() if name == "cartpole" else ke.Pose(0.0, 1.0)
    b.add(ke.Robot(Asset.from_registry(f"kelab/robot/{name}:v1"), initial_pose=pose), at="/World/R")
    if sensors:
        b.joint_sensor("pole", "/World/R/cart_to_pole", ke.SensorConfig(delay=0.05, cutoff_hz=3))
        b.imu("imu", "/World/R/pole", ke.SensorConfig(delay=0.02))
        b.pose_sensor("where", "/World/R/cart")
    return b.build()


# ---------------------------------------------------------------- 1. static body poses
@pytest.mark.parametrize("layout", LAYOUTS)
def test_static_bodies_report_their_own_poses(layout: str) -> None:
    w = ke.World(_walls(), num_envs=3, layout=layout)
    assert w.body_names == ("/ground", "/World/left_wall", "/World/right_wall", "/World/Ball")
    want = np.array([[0.0, 0.0, 0.0], [-1.5, 1.0, 0.0], [1.5, 1.0, 0.3]])
    for _ in range(3):
        assert np.array_equal(w.body_poses[:, 0:3], np.broadcast_to(want, (3, 3, 3)))
        assert np.array_equal(w.body_velocities[:, 0:3], np.zeros((3, 3, 3)))
        w.step(DT)
    assert w.body_poses[0, 3, 1] < 0.5  # the ball (read from its own row) falls


# ---------------------------------------------------------------- 2. primed sensors
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sensors_describe_the_state_right_after_creation_and_resets(layout: str) -> None:
    w = ke.World(_robot_scene(sensors=True), num_envs=3, layout=layout)
    pole = w.robot("/World/R")
    # before any step (no pipelines yet): the present state, IMU at rest reads -gravity
    assert np.allclose(w.read_sensor("imu")[:, 2], 9.81)
    assert np.array_equal(w.read_sensor("where"), w.body_poses[:, 1])
    pole.set_joint_state([[0.3, 0.4]] * 3)  # before the first step
    w.step(DT)
    assert np.allclose(w.read_sensor("pole")[:, 0], 0.4)  # primed: delayed, filtered, 0.4
    for _ in range(30):
        w.set_joint_efforts(np.tile([40.0, 0.0], (3, 1)))
        w.step(DT)
    q = w.joint_positions
    pole.set_joint_state([[0.5, -0.2]], env_ids=[1])
    w.reset_envs([2])
    got = w.read_sensor("pole")
    assert np.allclose(got[1], [-0.2, 0.0]) and np.allclose(got[2], [0.0, 0.0], atol=1e-9)
    assert not np.allclose(got[0, 0], q[0, 1])  # copy 0 still reads its delayed signal
    assert np.array_equal(w.read_sensor("where")[1:], w.body_poses[1:, 1])
    imu = w.read_sensor("imu")
    assert np.allclose(imu[2], [0.0, 0.0, 9.81, 0.0])
    pole.reset([0])
    assert np.allclose(w.read_sensor("pole")[0], [0.0, 0.0], atol=1e-9)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_primed_sensors_keep_snapshots_exact(layout: str) -> None:
    w = ke.World(busy_scene(noise=0.05), num_envs=3, seed=2, layout=layout)
    snap0 = w.snapshot()  # before the first step: no pipelines yet
    first = drive(w, 20)
    w.reset_envs([1])
    snap = w.snapshot()
    future = drive(w, 30)
    w.restore(snap)
    assert np.array_equal(drive(w, 30), future)
    w.restore(snap0)
    assert np.array_equal(drive(w, 20), first)


# ---------------------------------------------------------------- 3. external forces
@pytest.mark.parametrize("layout", LAYOUTS)
def test_body_forces_are_held_added_logged_and_cleared(layout: str) -> None:
    w = ke.World(_walls(), num_envs=3, layout=layout)
    f = np.zeros((3, 4, 2))
    f[:, 3] = [0.0, 2.0 * 9.81]  # the 2 kg ball hovers
    f[2, 3, 0] = 4.0  # copy 2 is pushed right: 2 m/s^2
    w.set_body_forces(f, torques=np.zeros((3, 4)))
    for _ in range(12):
        w.step(DT)
    v = w.body_velocities[:, 3]
    assert np.array_equal(v[:2, 1], [0.0, 0.0])
    assert v[2, 0] == pytest.approx(2.0 * 12 * DT, rel=1e-12)
    assert w.external_forces[2, 3].tolist() == [4.0, 2.0 * 9.81, 0.0]
    snap = w.snapshot()
    after = [w.step(DT) or w.body_poses for _ in range(5)][-1]
    w.restore(snap)
    for _ in range(5):
        w.step(DT)
    assert np.array_equal(w.body_poses, after)
    w.reset_envs([2])
    assert not w.external_forces[2].any() and w.external_forces[0].any()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_force_at_point_adds_the_lever_torque_and_picking_uses_exact_shapes(
    layout: str,
) -> None:
    w = ke.World(_robot_scene(), num_envs=2, layout=layout)
    pole = w.body_names.index("/World/R/pole")
    cart = w.body_names.index("/World/R/cart")
    x, y, _ = w.body_poses[1, pole]
    com = _cog_world(w.body_poses[1:, pole], w._layout.cog[pole])[0]
    top = (x, y + 0.2)
    assert w.body_at(top, env_id=1) == pole and w.body_at((x + 5.0, y), env_id=1) is None
    assert w.body_at((x, 0.1), env_id=1) == cart or w.body_at((x, 0.12), env_id=1) == cart
    assert w.body_at((0.0, -0.5), env_id=0) is None  # the ground is static: never picked
    assert w.body_at((x + 0.3, y), env_id=1, tolerance=0.5) == pole
    w.apply_force_at_point(1, pole, (3.0, 0.0), top)
    ext = w.external_forces
    assert ext[1, pole, 0:2].tolist() == [3.0, 0.0]
    assert ext[1, pole, 2] == pytest.approx((top[0] - com[0]) * 0.0 - (top[1] - com[1]) * 3.0)
    assert not ext[0].any()
    for _ in range(10):
        w.step(DT)
    assert w.joint_positions[1, 1] < -1e-3 and abs(w.joint_positions[0, 1]) < 1e-12
    # picking follows the body after a state write (no step in between)
    p = w.body_poses
    p[0, pole] = [1.0, 1.5, np.pi / 2]
    w.set_body_states([0], p[:1])
    assert w.body_at((1.2, 1.5), env_id=0) == pole


@pytest.mark.parametrize("layout", LAYOUTS)
def test_force_api_rejects_bad_input_naming_the_argument(layout: str) -> None:
    w = ke.World(_walls(), num_envs=2, layout=layout)
    with pytest.raises(ValueError, match=re.escape("forces must have shape (2, 4, 2)")):
        w.set_body_forces(np.zeros((2, 4)))
    with pytest.raises(
        ValueError, match=re.escape("torques must have shape (1, 4) (copies, bodies), got (4,)")
    ):
        w.set_body_forces(np.zeros((1, 4, 2)), np.zeros(4), env_ids=[0])
    with pytest.raises(ValueError, match="finite"):
        w.set_body_forces(np.full((2, 4, 2), np.nan))
    with pytest.raises(ValueError, match="static"):
        w.apply_force_at_point(0, 1, (1.0, 0.0), (0.0, 0.0))
    with pytest.raises(ValueError, match=re.escape("point must have shape (2,), got (3,)")):
        w.apply_force_at_point(0, 3, (1.0, 0.0), (0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="env_id"):
        w.body_at((0.0, 0.0), env_id=2)
    with pytest.raises(ValueError, match="tolerance"):
        w.body_at((0.0, 0.0), tolerance=-1.0)


# ---------------------------------------------------------------- 4. joint-space writes
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", ["cartpole", "biped", "pi"])
def test_set_joint_state_reads_back_and_is_stable(layout: str, name: str) -> None:
    w = ke.World(_robot_scene(name), num_envs=3, layout=layout)
    r = w.robot("/World/R")
    rng = np.random.default_rng(4)
    q = rng.uniform(-0.5, 0.5, (3, r.num_joints))
    qd = rng.uniform(-1.0, 1.0, (3, r.num_joints))
    r.set_joint_state(q, qd)
    assert np.abs(r.joint_pos - q).max() < 1e-9
    assert np.abs(r.joint_vel - qd).max() < 1e-9
    # the joint anchors coincide (a revolute joint is satisfied, nothing to correct)
    lay = w._layout
    poses = np.concatenate([w.body_poses, w.body_velocities], axis=2)
    for j in r._jidx.tolist():
        jl = lay.joints[j]
        if jl.kind == "revolute" and jl.parent >= 0:
            a = _point(poses[:, jl.parent], jl.anchor_parent, lay.cog[jl.parent])
            b = _point(poses[:, jl.child], jl.anchor_child, lay.cog[jl.child])
            assert np.abs(a[0] - b[0]).max() < 1e-9 and np.abs(a[1] - b[1]).max() < 1e-9
    for _ in range(60):
        w.step(DT)
    assert np.isfinite(w.body_poses).all() and np.abs(w.body_velocities).max() < 50.0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_joint_state_for_some_joints_and_copies(layout: str) -> None:
    w = ke.World(_robot_scene(), num_envs=3, layout=layout)
    r = w.robot("/World/R")
    w.set_joint_efforts(np.tile([20.0, 0.0], (3, 1)))
    for _ in range(20):
        w.step(DT)
    before = w.joint_positions
    r.set_joint_state([[0.7]], joint_ids=r.find_joints("cart_to_pole"), env_ids=[2])
    after = w.joint_positions
    assert np.array_equal(after[:2], before[:2])
    assert after[2, 1] == pytest.approx(0.7, abs=1e-12)
    assert after[2, 0] == pytest.approx(before[2, 0], abs=1e-9)
    assert w.joint_efforts[2].tolist() == [0.0, 0.0] and w.joint_efforts[0, 0] == 20.0
    with pytest.raises(ValueError, match="joint_ids"):
        r.set_joint_state([[0.0]], joint_ids=[5])
    with pytest.raises(ValueError, match=re.escape("positions must have shape (3, 2)")):
        r.set_joint_state(np.zeros((2, 3)))


# ---------------------------------------------------------------- 5. threads
@pytest.mark.parametrize("layout", LAYOUTS)
def test_threaded_reads_and_forces_are_bit_identical_to_one_thread(layout: str) -> None:
    def run(threads: int) -> np.ndarray:
        w = ke.World(_robot_scene(), num_envs=10, num_threads=threads, layout=layout)
        out = []
        for t in range(60):  # read every 2nd step, then every 3rd: the read predictor
            if t % (2 if t < 30 else 3) == 0:
                q = w.joint_positions
                out.append(np.concatenate([q, w.joint_velocities, w.body_poses[:, 1]], 1))
                w.set_joint_efforts(np.stack([-20.0 * q[:, 1], np.zeros(10)], 1))
            if t == 20:
                w.set_body_forces(np.full((3, 3, 2), 0.5), env_ids=[1, 5, 9])
            if t == 40:
                w.reset_envs([0, 7])
            w.step(DT)
        w.close()
        return np.array(out)

    one, two = run(1), run(2)
    assert np.abs(one).max() > 0 and np.array_equal(one, two)


# ---------------------------------------------------------------- 6. bounded log
@pytest.mark.parametrize("layout", LAYOUTS)
def test_log_is_bounded_by_the_oldest_copys_last_reset(layout: str) -> None:
    n = 5
    w = ke.World(_robot_scene(), num_envs=n, layout=layout)
    rng = np.random.default_rng(0)
    last = np.zeros(n, dtype=int)
    for t in range(400):  # RL-style autoreset: copies finish at different times
        w.set_joint_efforts(np.tile([10.0 * np.sin(t / 7), 0.0], (n, 1)))
        w.step(DT)
        done = np.flatnonzero(rng.random(n) < 0.05)
        if done.size:
            w.reset_envs(done)
            last[done] = w.step_count
        # every entry is at or after the oldest copy's last reset (plus one dt entry)
        oldest = int(last.min())
        assert all(step >= oldest for step, *_ in w._log)
        assert len(w._log) <= 2 * (w.step_count - oldest) + 2 + n
    assert last.min() > 100  # every copy was reset, late: the log was really pruned
    snap = w.snapshot()
    future = [w.step(DT) or w.joint_positions for _ in range(20)]
    w.restore(snap)
    assert np.array_equal([w.step(DT) or w.joint_positions for _ in range(20)], future)
