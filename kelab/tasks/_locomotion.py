"""What the legged-robot tasks share: a robot on flat ground that must not fall.

:class:`LocomotionTask` is the common body of ``kelab/Humanoid-v0`` and
``kelab/Pi-Locomotion-v0``: the scene (a ground plane and one robot per copy), the joint
and body lookups, the fall termination, the observation of the robot's own state, and a
reset that stands the robot at its start pose. Each task adds its actions, reward,
per-episode values and success rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from kelab.rl.task import Task
from kelab.rl.terminations import TerminationSet
from kelab.sim.scene import Robot, Terrain
from kelab.sim.scene.assets import Asset
from kelab.sim.scene.builder import SceneBuilder

if TYPE_CHECKING:
    from kelab.rl.direct import DirectRLEnv
    from kelab.rl.env import LearningEnv

__all__ = ["LocomotionTask"]


class LocomotionTask(Task):
    """A registry robot on a ground plane, ended early when its torso falls.

    Subclasses set the class attributes below; the torso is the robot's first body
    (``robot.root_pose``). ``self._actions`` holds the actions of the current step (a
    subclass's ``apply_actions`` stores them before scaling), zeroed by :meth:`stand`.

    Attributes:
        asset: The robot's registry name (``"kelab/robot/biped:v2"``).
        joint_names: The actuated joints, in action order.
        fall_name: The termination's name (``"torso fell"``).
        min_torso_height: The torso centre below this height (m) counts as a fall.
        max_torso_tilt: The torso tilted more than this (rad) counts as a fall.
    """

    asset: ClassVar[str]
    joint_names: ClassVar[tuple[str, ...]]
    fall_name: ClassVar[str]
    min_torso_height: ClassVar[float]
    max_torso_tilt: ClassVar[float]

    robot: Robot
    """The robot of every copy (bound to the world when the env starts)."""
    joint_ids: np.ndarray
    """The actuated joints, in action order."""
    terminations: TerminationSet
    """The fall condition and the time limit."""

    def build(self, scene: SceneBuilder) -> None:
        """Ground and one robot per copy."""
        scene.add(Terrain.plane(name="ground"), at="/", per_environment=False)
        self.robot = Robot(asset=Asset.from_registry(self.asset))
        scene.add(self.robot, at="/World/Robot")

    def on_start(self, env: LearningEnv | DirectRLEnv) -> None:
        """Look up the joints and bodies, keep the start pose, set up the fall termination."""
        self.joint_ids = self.robot.find_joints(list(self.joint_names))
        path = self.robot.path
        self._body_ids = np.array(
            [self.world.body_names.index(f"{path}/{b}") for b in self.robot.body_names]
        )
        self._initial = self.world.body_poses[0].copy()  # the freshly built copy
        # the scene's moving bodies that are not the robot's (a subclass's props): a reset
        # keeps their present state, so only then does it read the World's state
        moving = [
            b for b, inst in enumerate(self.world.scene.bodies) if inst.spec.body_type != "static"
        ]
        self._others = np.setdiff1d(moving, self._body_ids)
        # the robot's bodies as a slice where they are consecutive (the usual): a reset's
        # velocity writes them without fancy indexing (#40)
        first = int(self._body_ids[0])
        consecutive = self._body_ids.tolist() == list(range(first, first + self._body_ids.size))
        self._robot_bodies = slice(first, first + self._body_ids.size) if consecutive else None
        self._actions = np.zeros((self.num_envs, self.action_dim), dtype=np.float32)
        self.terminations = TerminationSet(self, {self.fall_name: self._fell})
        self._torso_index = first  # the robot's first body (robot.root_pose's)
        # the actuated joints are every World joint, in World order (the robot alone in
        # its scene, the usual): the World's joint arrays (new arrays each read) are
        # theirs, without the robot's view and a gather (#40: ~3 us of each of the 4
        # reads a step)
        world, robot = self.world, self.robot
        cols = [world.joint_names.index(f"{path}/{robot.joint_names[j]}") for j in self.joint_ids]
        self._world_joints = cols == list(range(len(world.joint_names)))

    def _fell(self) -> np.ndarray:
        torso = self._torso_pose
        low = torso[:, 1] < self.min_torso_height
        return low | (np.abs(torso[:, 2]) > self.max_torso_tilt)

    def on_post_physics_step(self) -> None:
        """Read the torso state once for get_dones() and get_rewards() of this step."""
        torso = self._torso_state()
        self._torso_pose = torso[:, 0:3]
        self._torso_vel = torso[:, 3:6]

    def _torso_state(self) -> np.ndarray:
        """The torso's state ``(num_envs, 6)`` (a new array): pose and velocity in one read.

        ``robot.root_pose`` and ``robot.root_velocity`` are its columns 0:3 and 3:6.
        """
        return self.world.body_state(self._torso_index)

    def robot_state(self) -> list[np.ndarray]:
        """Torso height and angle, torso velocity, joint positions and joint velocities.

        Returns:
            The four ``(num_envs, k)`` blocks that start the observation.
        """
        torso = self._torso_state()
        return [
            torso[:, 1:3],  # robot.root_pose[:, 1:3]
            torso[:, 3:6],  # robot.root_velocity
            *self._joint_state(),
        ]

    def _joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The actuated joints' positions and velocities, ``(num_envs, k)`` each (new arrays).

        ``robot.joint_pos[:, joint_ids]`` and ``robot.joint_vel[:, joint_ids]``.
        """
        if self._world_joints:
            world = self.world
            return world.joint_positions, world.joint_velocities
        robot = self.robot
        return robot.joint_pos[:, self.joint_ids], robot.joint_vel[:, self.joint_ids]

    def get_observations(self) -> np.ndarray:
        """The robot's own state (:meth:`robot_state`, its blocks side by side).

        One ``np.concatenate`` of the torso's columns and the joint arrays (#40: ~2 us
        less a call than three writes into an empty array, at 256 copies in a 2-thread
        step).
        """
        torso = self.world.body_state(self._torso_index)  # height, angle, vx, vy, omega: 1:6
        return np.concatenate((torso[:, 1:6], *self._joint_state()), axis=1)

    def get_dones(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The fall termination and the time limit."""
        return self.terminations.check()

    def stand(self, env_ids: np.ndarray, linear_velocity: np.ndarray | None = None) -> None:
        """Put the robot of the listed copies at its start pose, at rest.

        Args:
            env_ids: The copies to reset.
            linear_velocity: Optional ``(len(env_ids), 2)`` velocity (m/s) given to every
                body of each copy's robot instead of rest.
        """
        world = self.world
        ids = self._body_ids
        plain = isinstance(env_ids, np.ndarray) and env_ids.ndim == 1 and env_ids.dtype.kind in "iu"
        if plain and not self._others.size:
            # every moving body is the robot's, and the static ones never move: the
            # rows body_poses / body_velocities would give, without reading every copy
            # (the robot's at its start pose, at rest already)
            poses = np.empty((env_ids.size, *self._initial.shape))
            poses[:] = self._initial
            vels = np.zeros(poses.shape)
        else:
            poses = world.body_poses[env_ids]
            vels = world.body_velocities[env_ids]
            poses[:, ids] = self._initial[ids]
            vels[:, ids] = 0.0
        if linear_velocity is not None:
            bodies = ids if self._robot_bodies is None else self._robot_bodies
            vels[:, bodies, 0:2] = linear_velocity[:, None, :]
        world.set_body_states(env_ids, poses, vels)
        self._actions[env_ids] = 0.0
