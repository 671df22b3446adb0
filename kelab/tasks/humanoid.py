"""``kelab/Humanoid-v0``: make the planar biped walk forward without falling.

120 Hz physics, 2 physics steps per action (60 Hz control), 10 s episodes. Observation
(17): torso height (m), torso angle (rad), torso velocity (vx, vy, omega), the six joint
positions and the six joint velocities (hip, knee, ankle; left then right). Action (6):
joint torques as a fraction of each actuator's limit (hip/knee 150 N·m, ankle 80 N·m).
Reward per step: torso forward speed (m/s) + 1.0 alive bonus - 0.01 * sum(action^2).
Ends early: ``"torso fell"`` (torso centre below 0.8 m or tilted more than 1 rad).
Success: survived to the time limit and moved at least 1 m forward. Resets stand the
robot up with a random whole-body velocity (+-0.1 m/s) from each copy's Generator.
"""

from __future__ import annotations

import numpy as np

from kelab.rl.success import success
from kelab.rl.task import Task
from kelab.rl.terminations import TerminationSet
from kelab.sim.assets import Asset
from kelab.sim.assets.biped import TORQUE_LIMITS
from kelab.sim.scene import Robot, SceneBuilder, Terrain
from kelab.train.config import TrainConfig

__all__ = ["HumanoidTask", "walked_forward"]

MIN_TORSO_HEIGHT = 0.8
MAX_TORSO_TILT = 1.0


@success
def walked_forward(task):  # noqa: ANN001, ANN201 - a rule receives the running task
    """Success: stayed up for the whole episode and got at least 1 m forward."""
    moved = task.robot.root_pose[:, 0] - task.start_x
    forward = task.check("moved at least 1 m forward", moved >= 1.0)
    return task.survived() & forward


class HumanoidTask(Task):
    """Planar biped walking (see the module docstring)."""

    observation_dim = 17
    action_dim = 6
    episode_length_s = 10.0
    sim_dt = 1.0 / 120.0
    decimation = 2
    success_rule = walked_forward
    render_zoom = 140.0
    training_config = TrainConfig(
        num_envs=512,
        num_steps_per_env=24,
        max_iterations=1500,
        actor_hidden_dims=(128, 128),
        critic_hidden_dims=(128, 128),
        init_noise_std=0.8,
        learning_rate=1e-3,
        gamma=0.99,
        entropy_coef=0.003,
        num_learning_epochs=5,
        num_mini_batches=4,
        success_target=0.9,
        checkpoint_every=20,
    )
    """PPO settings for ``kelab train Humanoid-v0`` (see docs/training.md)."""

    def build(self, scene: SceneBuilder) -> None:
        """Ground and one biped per copy."""
        scene.add(Terrain.plane(name="ground"), at="/", per_environment=False)
        self.robot = Robot(asset=Asset.from_registry("kelab/robot/biped:v1"))
        scene.add(self.robot, at="/World/Robot")

    def on_start(self, env: object) -> None:
        """Joint order, torque scale, body indices and named terminations."""
        names = ("hip_l", "knee_l", "ankle_l", "hip_r", "knee_r", "ankle_r")
        self.joint_ids = self.robot.find_joints(list(names))
        self._scale = np.array([TORQUE_LIMITS[n.split("_")[0]] for n in names])
        path = self.robot.path
        self._body_ids = np.array(
            [self.world.body_names.index(f"{path}/{b}") for b in self.robot.body_names]
        )
        self._initial = self.world.body_poses[0].copy()  # the freshly built copy
        self.start_x = np.zeros(self.num_envs)
        self._actions = np.zeros((self.num_envs, self.action_dim), dtype=np.float32)
        self.terminations = TerminationSet(self, {"torso fell": self._fell})

    def _torso(self) -> np.ndarray:
        return self.robot.root_pose  # the torso is the biped's first body

    def _fell(self) -> np.ndarray:
        torso = self._torso_pose
        return (torso[:, 1] < MIN_TORSO_HEIGHT) | (np.abs(torso[:, 2]) > MAX_TORSO_TILT)

    def apply_actions(self, actions: np.ndarray) -> None:
        """Torques = action * actuator limit (held for both physics steps)."""
        self._actions[:] = actions
        actions *= self._scale
        self.robot.set_joint_effort_target(actions, joint_ids=self.joint_ids)

    def on_post_physics_step(self) -> None:
        """Read the torso state once for get_dones() and get_rewards() of this step."""
        self._torso_pose = self._torso()
        self._torso_vel = self.robot.root_velocity

    def get_observations(self) -> np.ndarray:
        """Torso height, angle, velocity; joint positions and velocities."""
        torso = self._torso()
        vel = self.robot.root_velocity
        return np.concatenate(
            [
                torso[:, 1:3],
                vel,
                self.robot.joint_pos[:, self.joint_ids],
                self.robot.joint_vel[:, self.joint_ids],
            ],
            axis=1,
        )

    def get_rewards(self) -> np.ndarray:
        """Forward speed + alive bonus - control cost."""
        speed = self._torso_vel[:, 0]
        return speed + 1.0 - 0.01 * np.sum(self._actions**2, axis=1)

    def get_dones(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``"torso fell"`` and the time limit."""
        return self.terminations.check()

    def reset_idx(self, env_ids: np.ndarray) -> None:
        """Stand up at the start pose with a small random whole-body velocity."""
        world = self.world
        n = len(env_ids)
        poses = np.empty((n, *self._initial.shape))
        poses[:] = self._initial  # the biped is the only moving body of the scene
        vels = np.zeros_like(poses)
        kick = self.uniform(env_ids, -0.1, 0.1, size=2)
        vels[:, self._body_ids, 0:2] = kick[:, None, :]
        world.set_body_states(env_ids, poses, vels)
        self.start_x[env_ids] = self._initial[self._body_ids[0], 0]
        self._actions[env_ids] = 0.0
