"""Locomotion tasks read and command the World directly where that is the same (#40 item 2)."""

from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.sim.scene.assets.biped import TORQUE_LIMITS
from kelab.tasks.humanoid import HumanoidTask


class ReversedHumanoid(HumanoidTask):
    """The actions drive the joints in the reverse of the World's order."""

    joint_names = tuple(reversed(HumanoidTask.joint_names))


@pytest.mark.parametrize("cls, direct", [(HumanoidTask, True), (ReversedHumanoid, False)])
def test_observations_and_efforts_are_what_the_robot_view_gives(cls, direct):
    env = ke.LearningEnv(cls(), num_envs=5, seed=2)
    task, world = env.task, env.world
    robot = task.robot
    # the shipped humanoid takes the direct path, a reordered one the robot's
    assert task._world_joints is direct and task._direct_efforts is direct
    cols = [world.joint_names.index(f"{robot.path}/{robot.joint_names[j]}") for j in task.joint_ids]
    scale = np.array([TORQUE_LIMITS[name.split("_")[0]] for name in cls.joint_names])
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(4):
        actions = rng.uniform(-1.5, 1.5, (5, 6)).astype(np.float32)
        env.step(actions)
        observed = np.concatenate(
            [
                robot.root_pose[:, 1:3],
                robot.root_velocity,
                robot.joint_pos[:, task.joint_ids],
                robot.joint_vel[:, task.joint_ids],
            ],
            axis=1,
        )
        assert task.get_observations().tobytes() == observed.tobytes()
        assert np.concatenate(task.robot_state(), axis=1).tobytes() == observed.tobytes()
        torques = np.clip(actions, -1.0, 1.0)
        torques *= scale  # float32, as the task scales its own copy
        assert world.joint_efforts[:, cols].tobytes() == torques.astype(np.float64).tobytes()


def test_a_reset_stands_the_robot_with_its_drawn_velocity():
    env = ke.LearningEnv(HumanoidTask(), num_envs=3, seed=4)
    task, world = env.task, env.world
    env.reset()
    for _ in range(5):
        env.step(np.ones((3, 6), np.float32))
    clone = np.random.default_rng(0)
    clone.bit_generator.state = task.rngs[1].bit_generator.state
    env.reset(options={"env_ids": [1]})
    bodies = task._body_ids
    velocity = clone.uniform(-0.1, 0.1, 2)
    assert world.body_poses[1, bodies].tobytes() == task._initial[bodies].tobytes()
    assert (world.body_velocities[1, bodies, 0:2] == velocity).all()
    assert (world.body_velocities[1, bodies, 2] == 0.0).all()


def test_rewards_are_the_documented_sum_bit_for_bit():
    """Forward speed + 1 - 0.01 * sum(action^2): the control cost summed in each row's order."""
    env = ke.LearningEnv(HumanoidTask(), num_envs=7, seed=3)
    task = env.task
    env.reset()
    rng = np.random.default_rng(1)
    for scale in (1.0, 1e-3, 1e-20, 3.0):
        env.step((rng.uniform(-1, 1, (7, 6)) * scale).astype(np.float32))
        speed = task.robot.root_velocity[:, 0]
        want = speed + 1.0 - 0.01 * np.sum(task._actions**2, axis=1)
        assert task.get_rewards().tobytes() == want.tobytes()
    # a robot with other joint counts: numpy sums rows of 8 or more pairwise
    for joints in range(1, 13):
        task._actions = rng.uniform(-1, 1, (7, joints)).astype(np.float32)
        want = speed + 1.0 - 0.01 * np.sum(task._actions**2, axis=1)
        assert task.get_rewards().tobytes() == want.tobytes(), joints


def test_a_float32_scale_gives_the_float64_scales_torques():
    from kelab.tasks.humanoid import _float32_if_exact

    limits = np.array([TORQUE_LIMITS["hip"], TORQUE_LIMITS["knee"], TORQUE_LIMITS["ankle"]] * 2)
    scale = _float32_if_exact(limits)
    assert scale.dtype == np.float32 and (scale == limits).all()
    assert _float32_if_exact(np.array([0.1, 2.0])).dtype == np.float64  # 0.1 is no float32
    rng = np.random.default_rng(5)
    tiny = np.finfo(np.float32).smallest_subnormal
    actions = np.concatenate(
        [rng.uniform(-1, 1, (2000, 6)), rng.normal(0, 1e-40, (100, 6)), np.full((1, 6), tiny)]
    ).astype(np.float32)
    want = actions.copy()
    want *= limits  # the float64 loop, rounded to float32
    got = actions.copy()
    got *= scale
    assert got.tobytes() == want.tobytes()


def test_the_per_copy_scale_gives_the_action_scales_torques():
    """apply_actions multiplies by the scale repeated per copy (one contiguous loop, #40);
    actions of another (broadcastable) shape take the one-row scale: the same torques."""
    env = ke.LearningEnv(HumanoidTask(), num_envs=5, seed=1)
    task, world = env.task, env.world
    env.reset()
    full = task._copies_scale
    assert full.shape == (5, 6) and full.flags.c_contiguous
    assert full.dtype == task._action_scale.dtype and (full == task._action_scale).all()
    rng = np.random.default_rng(2)
    actions = rng.uniform(-1, 1, (5, 6)).astype(np.float32)
    want = actions * task._action_scale  # the one-row scale's products
    task.apply_actions(actions.copy())
    assert world.joint_efforts.tobytes() == want.astype(np.float64).tobytes()
    row = actions[:1].copy()  # one row for every copy: the World broadcasts it
    task.apply_actions(row)
    assert row.tobytes() == want[:1].tobytes()
    assert world.joint_efforts.tobytes() == np.repeat(want[:1], 5, 0).astype(np.float64).tobytes()
