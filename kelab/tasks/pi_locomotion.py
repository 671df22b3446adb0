"""``kelab/Pi-Locomotion-v0``: the quadruped tracks a commanded forward speed.

1000 Hz physics, 20 physics steps per action (50 Hz control), 10 s episodes. Each
episode draws a command speed from U(0.0, 0.8) m/s (``task.command``, also the last
observation). Observation (22): torso height, torso angle, torso velocity (vx, vy,
omega), the eight joint positions, the eight joint velocities (hip then knee of
fl, fr, rl, rr), the command. Action (8): PD joint position targets, ``0.5 rad *
action`` around the standing pose, tracked by the legs' PD actuators. Reward per step:
``exp(-4 (vx - command)^2) - 0.05 |omega| - 0.01 * sum(action^2)``. Ends early:
``"body fell"`` (torso centre below 0.2 m or tilted more than 0.8 rad). Success: survived
and the mean speed error over the episode was below 0.25 m/s.
"""

from __future__ import annotations

import numpy as np

from kelab.rl.success import success
from kelab.rl.task import Task
from kelab.rl.terminations import TerminationSet
from kelab.sim.assets import Asset
from kelab.sim.scene import Robot, SceneBuilder, Terrain
from kelab.train.config import TrainConfig

__all__ = ["PiLocomotionTask", "tracked_command"]

TARGET_SCALE = 0.5
MIN_TORSO_HEIGHT = 0.2
MAX_TORSO_TILT = 0.8
MAX_COMMAND = 0.8


@success
def tracked_command(task):  # noqa: ANN001, ANN201 - a rule receives the running task
    """Success: stayed up and tracked the commanded speed within 0.25 m/s on average."""
    close = task.check("mean speed error below 0.25 m/s", task.mean_speed_error < 0.25)
    return task.survived() & close


class PiLocomotionTask(Task):
    """Quadruped speed tracking with PD joint targets (see the module docstring)."""

    observation_dim = 22
    action_dim = 8
    episode_length_s = 10.0
    sim_dt = 1.0 / 1000.0
    decimation = 20
    success_rule = tracked_command
    render_zoom = 300.0
    training_config = TrainConfig(
        num_envs=256,
        num_steps_per_env=24,
        max_iterations=1000,
        actor_hidden_dims=(128, 128),
        critic_hidden_dims=(128, 128),
        init_noise_std=0.8,
        learning_rate=1e-3,
        gamma=0.99,
        entropy_coef=0.003,
        num_learning_epochs=5,
        num_mini_batches=4,
        success_target=0.8,
        checkpoint_every=10,
    )
    """PPO settings for ``kelab train Pi-Locomotion-v0`` (see docs/training.md)."""
    #: the command (last entry) is drawn from [0, MAX_COMMAND]; the rest has no hard bound
    observation_bounds = ((-np.inf,) * 21 + (0.0,), (np.inf,) * 21 + (MAX_COMMAND,))

    def build(self, scene: SceneBuilder) -> None:
        """Ground and one quadruped per copy."""
        scene.add(Terrain.plane(name="ground"), at="/", per_environment=False)
        self.robot = Robot(asset=Asset.from_registry("kelab/robot/pi:v1"))
        scene.add(self.robot, at="/World/Robot")

    def on_start(self, env: object) -> None:
        """Joint order, body indices, per-episode command and named terminations."""
        legs = ("fl", "fr", "rl", "rr")
        self.joint_ids = self.robot.find_joints(
            [f"{k}_{leg}" for leg in legs for k in ("hip", "knee")]
        )
        path = self.robot.path
        self._body_ids = np.array(
            [self.world.body_names.index(f"{path}/{b}") for b in self.robot.body_names]
        )
        self._initial = self.world.body_poses[0].copy()
        n = self.num_envs
        self.command = np.zeros(n)
        self.speed_error_sum = np.zeros(n)
        self._actions = np.zeros((n, self.action_dim), dtype=np.float32)
        self.terminations = TerminationSet(self, {"body fell": self._fell})

    @property
    def mean_speed_error(self) -> np.ndarray:
        """Mean |vx - command| over the steps of the current episode, ``(num_envs,)``."""
        steps = np.maximum(self.episode_length_buf + 1, 1)
        return self.speed_error_sum / steps

    def _fell(self) -> np.ndarray:
        torso = self.robot.root_pose
        return (torso[:, 1] < MIN_TORSO_HEIGHT) | (np.abs(torso[:, 2]) > MAX_TORSO_TILT)

    def apply_actions(self, actions: np.ndarray) -> None:
        """PD targets = 0.5 rad * action (held for all 20 physics steps)."""
        self._actions[:] = actions
        actions *= TARGET_SCALE
        self.robot.set_joint_position_target(actions, joint_ids=self.joint_ids)

    def on_post_physics_step(self) -> None:
        """Accumulate the speed-tracking error once per step."""
        vx = self.robot.root_velocity[:, 0]
        self.speed_error_sum += np.abs(vx - self.command)

    def get_observations(self) -> np.ndarray:
        """Torso height, angle, velocity; joint positions, velocities; the command."""
        torso = self.robot.root_pose
        vel = self.robot.root_velocity
        return np.concatenate(
            [
                torso[:, 1:3],
                vel,
                self.robot.joint_pos[:, self.joint_ids],
                self.robot.joint_vel[:, self.joint_ids],
                self.command[:, None],
            ],
            axis=1,
        )

    def get_rewards(self) -> np.ndarray:
        """Speed tracking - body rotation - action magnitude."""
        vel = self.robot.root_velocity
        track = np.exp(-4.0 * (vel[:, 0] - self.command) ** 2)
        return track - 0.05 * np.abs(vel[:, 2]) - 0.01 * np.sum(self._actions**2, axis=1)

    def get_dones(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``"body fell"`` and the time limit."""
        return self.terminations.check()

    def camera_center(self) -> tuple[float, float]:
        """Follow copy 0's torso along x; frame the 0.42 m robot with the ground below it."""
        return (float(self.robot.root_pose[0, 0]), 0.45)

    def reset_idx(self, env_ids: np.ndarray) -> None:
        """Stand at the start pose, at rest, with a new command speed."""
        world = self.world
        poses = world.body_poses[env_ids]
        vels = world.body_velocities[env_ids]
        poses[:, self._body_ids] = self._initial[self._body_ids]
        vels[:, self._body_ids] = 0.0
        world.set_body_states(env_ids, poses, vels)
        self.command[env_ids] = self.uniform(env_ids, 0.0, MAX_COMMAND)
        self.speed_error_sum[env_ids] = 0.0
        self._actions[env_ids] = 0.0
