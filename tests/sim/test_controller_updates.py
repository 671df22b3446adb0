"""World.controller_updates: PD torques every physics step, or held between updates."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import kelab as ke
from kelab.sim.replay_log import Kind

DT = 1 / 50
LAYOUTS = ("isolated", "packed")


def _arm_scene() -> ke.Scene:
    """A two-link PD arm (shoulder, elbow) beside a ball, on a plane."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    pd = ke.PDActuator(kp=60.0, kd=2.0, limit=8.0)
    arm = ke.RobotDescription(
        name="arm",
        bodies=(
            ke.BodySpec("base", (ke.Box(0.2, 0.2),), body_type="static",
                        initial_pose=ke.Pose(0.0, 1.0)),
            ke.BodySpec("upper", (ke.Box(0.5, 0.05),), mass=1.0, initial_pose=ke.Pose(0.25, 1.0)),
            ke.BodySpec("fore", (ke.Box(0.4, 0.05),), mass=0.5, initial_pose=ke.Pose(0.7, 1.0)),
        ),
        joints=(
            ke.RevoluteJoint("shoulder", "base", "upper", anchor=(0.0, 1.0), actuator=pd),
            ke.RevoluteJoint("elbow", "upper", "fore", anchor=(0.5, 1.0), actuator=pd),
        ),
    )  # fmt: skip
    b.add(ke.Robot(arm), at="/World/Arm")
    b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(-0.8, 0.5)), at="/World/Ball")
    return b.build()


def _targets(t: int, n: int) -> np.ndarray:
    k = np.arange(n, dtype=np.float64)
    return np.stack([0.9 * np.sin(t / 7.0 + k), 0.6 * np.cos(t / 5.0 - k)], axis=1)


def _run(world: ke.World, steps: int, start: int = 0, every: int | None = None) -> str:
    """Step with changing targets; ``every``: update the controllers every that many steps
    (before the step, after the targets, as the App orders them). Returns a state hash."""
    h = hashlib.sha256()
    for t in range(start, start + steps):
        if t % 3 == 0:
            world.set_joint_position_targets(_targets(t, world.num_envs))
        if every is not None and t % every == 0:
            world.update_controllers()
        world.step(DT)
        h.update(world.body_poses.tobytes())
        h.update(world.body_velocities.tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_held_updates_every_step_equal_every_step_mode(layout: str) -> None:
    # a controller ticking before every physics step holds exactly what every-step
    # mode recomputes: the same body states bit for bit (the default is every_step)
    a = ke.World(_arm_scene(), num_envs=3, layout=layout)
    b = ke.World(_arm_scene(), num_envs=3, layout=layout)
    assert a.controller_updates == "every_step"
    b.controller_updates = "held"
    assert _run(a, 300) == _run(b, 300, every=1)
    # and the PD arm moved: the comparison is not one of resting bodies
    assert np.abs(a.joint_positions).max() > 0.2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_25_hz_controller_holds_its_torque_between_ticks(layout: str) -> None:
    world = ke.World(_arm_scene(), num_envs=2, layout=layout)
    world.controller_updates = "held"
    held = []
    for t in range(40):
        world.set_joint_position_targets(_targets(t, 2))  # new targets every step
        if t % 2 == 0:  # 25 Hz on 50 Hz physics
            world.update_controllers()
            q, qd = world.joint_positions, world.joint_velocities
            want = np.clip(60.0 * (world.joint_position_targets - q) - 2.0 * qd, -8.0, 8.0)
            np.testing.assert_array_equal(world.controller_efforts, want)
        held.append(world.controller_efforts)
        world.step(DT)
    held_a = np.array(held)
    np.testing.assert_array_equal(held_a[1::2], held_a[0::2])  # held through the odd step
    assert (held_a[2::2] != held_a[0:-2:2]).any()  # and changed at the ticks
    # the held torque is what moves the arm: every-step control differs
    every = ke.World(_arm_scene(), num_envs=2, layout=layout)
    for t in range(40):
        every.set_joint_position_targets(_targets(t, 2))
        every.step(DT)
    assert not np.array_equal(every.body_poses, world.body_poses)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("max_log_steps", [7200, 7])
def test_snapshot_restore_is_exact_in_held_mode(layout: str, max_log_steps: int) -> None:
    # restore then step == never restored; snapshots taken between ticks and (with a
    # tiny max_log_steps) across rebases, which carry the held torques
    world = ke.World(_arm_scene(), num_envs=3, layout=layout, max_log_steps=max_log_steps)
    _run(world, 11)  # every_step first: the switch is logged
    world.controller_updates = "held"
    _run(world, 20, start=11, every=2)
    world.step(DT)  # between two ticks
    snap = world.snapshot()
    assert np.abs(world.controller_efforts).max() > 0
    live = _run(world, 30, start=32, every=2)
    end = (world.body_poses, world.controller_efforts)
    world.reset_envs()
    world.controller_updates = "every_step"  # the snapshot puts "held" back
    world.restore(snap)
    assert world.controller_updates == "held"
    assert _run(world, 30, start=32, every=2) == live
    np.testing.assert_array_equal(world.body_poses, end[0])
    np.testing.assert_array_equal(world.controller_efforts, end[1])
    # and into a fresh World
    other = ke.World(_arm_scene(), num_envs=3, layout=layout, max_log_steps=max_log_steps)
    other.restore(snap)
    assert _run(other, 30, start=32, every=2) == live


def test_the_mode_survives_the_log_pruned_by_resets() -> None:
    world = ke.World(_arm_scene(), num_envs=2)
    world.controller_updates = "held"
    _run(world, 5, every=2)
    world.reset_envs()  # every copy rebuilt: the log's older entries go, the mode stays
    assert world.controller_updates == "held"
    np.testing.assert_array_equal(world.controller_efforts, 0.0)  # a reset zeroes them
    assert [e.kind for e in world._log][:2] == [Kind.DT, Kind.PD_MODE]
    _run(world, 4, every=2)
    snap = world.snapshot()
    live = _run(world, 10, start=4, every=2)
    other = ke.World(_arm_scene(), num_envs=2)
    other.restore(snap)
    assert other.controller_updates == "held"
    assert _run(other, 10, start=4, every=2) == live


def test_bad_inputs_are_refused() -> None:
    world = ke.World(_arm_scene(), num_envs=2)
    for bad in ("sometimes", 1, None, "HELD"):
        with pytest.raises(ValueError, match=r"controller_updates must be one of"):
            world.controller_updates = bad  # type: ignore[assignment]
    assert world.controller_updates == "every_step"
    with pytest.raises(ValueError, match="set world.controller_updates = 'held' first"):
        world.update_controllers()
    world.controller_updates = "held"
    with pytest.raises(ValueError, match="env_id"):
        world.update_controllers([5])
    world.update_controllers([1])  # one copy is fine
    world.step(DT)
    snap = world.snapshot()
    # a doctored snapshot is refused whole: a PD mode that is neither 0 nor 1, held
    # torques beyond the actuator limit
    arrays = dict(snap.arrays)
    kinds = arrays["log/kind"]
    e = int(np.flatnonzero(kinds == Kind.PD_MODE)[0])
    vals = arrays["log/vals"].copy()
    vals[arrays["log/val_off"][e]] = 0.5
    arrays["log/vals"] = vals
    bad_mode = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, snap.meta)
    with pytest.raises(ValueError, match=r"pd_mode.*must hold one mode"):
        world.restore(bad_mode)
    arrays = dict(snap.arrays)
    arrays["controls/pd_efforts"] = np.full((2, 2), 9.0)
    too_big = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, snap.meta)
    with pytest.raises(ValueError, match=r"controls/pd_efforts.*limit"):
        world.restore(too_big)
    assert world.controller_updates == "held" and world.step_count == 1


def test_a_world_that_holds_no_torque_writes_the_snapshot_bytes_it_wrote_before() -> None:
    # held torques are saved only while some is non-zero: every-step Worlds (every World
    # before held updates existed) keep their snapshot bytes bit for bit
    world = ke.World(_arm_scene(), 2)
    _run(world, 20)
    assert "controls/pd_efforts" not in world.snapshot().arrays
    world.controller_updates = "held"  # takes one tick: non-zero torques
    world.step(DT)
    snap = world.snapshot()
    assert snap.arrays["controls/pd_efforts"].any()
    again = ke.World(_arm_scene(), 2)
    again.restore(ke.Snapshot.from_bytes(snap.to_bytes()))
    assert np.array_equal(again.controller_efforts, world.controller_efforts)


def test_the_controller_api_is_the_world_s_own_no_forwarding_mixin() -> None:
    """#38: World's controller methods live in world.py, not in a mixin kept for its size."""
    for name in ("controller_updates", "update_controllers", "controller_efforts"):
        assert name in vars(ke.World), name
    assert [c.__name__ for c in ke.World.__mro__ if "Controller" in c.__name__] == []


def _mixed_scene() -> ke.Scene:
    """A rail cart on an effort actuator, a PD arm on it, and an unactuated pendulum."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    rig = ke.RobotDescription(
        name="rig",
        bodies=(
            ke.BodySpec("cart", (ke.Box(0.4, 0.2),), mass=1.0, initial_pose=ke.Pose(0.0, 1.0)),
            ke.BodySpec("arm", (ke.Box(0.4, 0.05),), mass=0.5, initial_pose=ke.Pose(0.2, 1.2)),
            ke.BodySpec("bob", (ke.Circle(0.05),), mass=0.2, initial_pose=ke.Pose(0.0, 0.6)),
        ),
        joints=(
            ke.PrismaticJoint("rail", "world", "cart", axis=(1.0, 0.0),
                              actuator=ke.EffortActuator(20.0)),
            ke.RevoluteJoint("shoulder", "cart", "arm", anchor=(0.0, 1.2),
                             actuator=ke.PDActuator(kp=50.0, kd=2.0, limit=10.0)),
            ke.RevoluteJoint("swing", "cart", "bob", anchor=(0.0, 1.0)),
        ),
    )  # fmt: skip
    b.add(ke.Robot(rig), at="/World/Rig")
    return b.build()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_command_that_every_listed_joint_ignores_is_refused_whole(layout):
    """Targets to an effort joint, efforts to a PD or unactuated one: refused, naming the
    joint and the setter it takes, nothing held (a new user's crane saw nothing move)."""
    w = ke.World(_mixed_scene(), num_envs=2, layout=layout)
    rig = w.robot("/World/Rig")
    rail, shoulder, swing = (rig.find_joints(n) for n in ("rail", "shoulder", "swing"))
    cases = [
        (rig.set_joint_position_target, rail, "'/World/Rig/rail' has an effort actuator"),
        (rig.set_joint_effort_target, shoulder, "'/World/Rig/shoulder' has a PD actuator"),
        (rig.set_joint_effort_target, swing, "'/World/Rig/swing' has no actuator"),
        (rig.set_joint_position_target, [0, 2], r"nor do the other 1 listed"),
    ]
    for setter, joints, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            setter(np.full((2, np.size(joints)), 3.0), joint_ids=joints)
        assert "\n" not in str(info.value)
    assert not w.joint_efforts.any() and not w.joint_position_targets.any()
    # a call that some listed joint takes writes it; the others ignore theirs
    rig.set_joint_effort_target(np.full((2, 3), 4.0))
    rig.set_joint_position_target(np.full((2, 1), 0.5), joint_ids=shoulder)
    w.set_joint_efforts(np.zeros((2, 3)))  # every joint, none listed: as before
    w.step(DT)
    assert w.joint_position_targets[0].tolist() == [0.0, 0.5, 0.0]
    w.close()
