"""``kelab/Humanoid-v0``: make the planar biped walk forward without falling.

120 Hz physics, 2 physics steps per action (60 Hz control), 10 s episodes. Observation
(17): torso height (m), torso angle (rad), torso velocity (vx, vy, omega), the six joint
positions and the six joint velocities (hip, knee, ankle; left then right). Action (6):
joint torques as a fraction of each actuator's limit (hip/knee 150 N·m, ankle 40 N·m).
Reward per step: torso forward speed (m/s) + 1.0 alive bonus - 0.01 * sum(action^2).
Ends early: ``"torso fell"`` (torso centre below 0.8 m or tilted more than 1 rad).
Success: survived to the time limit and moved at least 1 m forward. Resets stand the
robot up with a random whole-body velocity (+-0.1 m/s) from each copy's Generator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kelab.rl.success import success
from kelab.sim.scene.assets.biped import TORQUE_LIMITS
from kelab.tasks._locomotion import LocomotionTask

if TYPE_CHECKING:
    from kelab.rl.direct import DirectRLEnv
    from kelab.rl.env import LearningEnv

__all__ = ["HumanoidTask", "walked_forward"]

MIN_TORSO_HEIGHT = 0.8
MAX_TORSO_TILT = 1.0


@success
def walked_forward(task):  # noqa: ANN001, ANN201 - a rule receives the running task
    """Success: stayed up for the whole episode and got at least 1 m forward."""
    moved = task.robot.root_pose[:, 0] - task.start_x
    forward = task.check("moved at least 1 m forward", moved >= 1.0)
    return task.survived() & forward


def _float32_if_exact(scale: np.ndarray) -> np.ndarray:
    """``scale`` as float32 where every value is a float32 value, else ``scale`` itself.

    float32 actions times the float64 scale are the exact products (24 + 24 bits fit in
    float64's 53) rounded once to float32; times the float32 scale, IEEE rounds the same
    exact products to float32 directly: the same bits, without the float64 loop's casts.

    Example:
        >>> _float32_if_exact(np.array([150.0, 40.0])).dtype
        dtype('float32')
        >>> _float32_if_exact(np.array([0.1])).dtype
        dtype('float64')
    """
    scale32 = scale.astype(np.float32)
    return scale32 if (scale32 == scale).all() else scale


class HumanoidTask(LocomotionTask):
    """Planar biped walking (see the module docstring)."""

    asset = "kelab/robot/biped:v2"
    joint_names = ("hip_l", "knee_l", "ankle_l", "hip_r", "knee_r", "ankle_r")
    fall_name = "torso fell"
    min_torso_height = MIN_TORSO_HEIGHT
    max_torso_tilt = MAX_TORSO_TILT

    observation_dim = 17
    action_dim = 6
    episode_length_s = 10.0
    sim_dt = 1.0 / 120.0
    decimation = 2
    success_rule = walked_forward
    render_zoom = 140.0
    training_config = dict(
        # copies share one pymunk space per thread: ~2.1-2.7x the env steps/s of
        # 'isolated' at 1024 cartpoles, 6-18x less memory a copy (docs/world.md, Layouts);
        # the shipped weights were trained packed
        layout="packed",
        num_envs=256,
        num_steps_per_env=24,
        max_iterations=1500,
        actor_hidden_dims=(128, 64),
        critic_hidden_dims=(128, 64),
        init_noise_std=0.6,
        learning_rate=1e-3,
        desired_kl=0.015,
        gamma=0.99,
        entropy_coef=0.003,
        num_learning_epochs=5,
        num_mini_batches=4,
        success_target=0.9,
        stop_at_target=True,
        eval_every=5,
        eval_episodes=20,
        checkpoint_every=20,
        overlap_rollout=True,
        eval_process=True,
    )
    """PPO settings for ``kelab train Humanoid-v0`` (see docs/training.md).

    The update runs beside the next rollout (``overlap_rollout``, with the proximal-policy
    correction of :attr:`kelab.train.ppo.FinalObsPPO.lagged`). Hidden layers of 128 then 64
    units: the update then takes about as long as the rollout it overlaps (~0.49 s each
    alone, against ~0.75 s for the update with 128x128), so whole iterations run at 0.79x
    the bare env's rate (0.63x with 128x128), and the target (>= 0.9 success, >= 0.5 m/s
    over 20 deterministic episodes) comes sooner: seed 0 at iteration 240 in 138 s, seed 1
    at 220 in 154 s (2026-12-01 20:31-20:37, quiet), against 240 in 193 s and 250 in 199 s
    with 128x128 (18:31-18:39). 64x64 walked faster (5.6 m/s) but met it later (iteration
    440, 222 s). With the firmer biped joints (``error_correction=0.3``, 40 N·m ankles;
    docs/tasks.md): seed 0 at iteration 200 in 110 s, seed 1 at 220 in 125 s (22:33-22:39).

    256 copies, not 512 (issue #30's sweep, 2026-12-03; ``benchmarks/README.md``,
    train_targets): half the samples per iteration, the same 5 x 4 mini-batches, so each
    sample gets twice the gradient steps; rollout and update each take about half as long
    (~0.26 s an iteration, estimated quiet). The trainer's evaluation (every 5 iterations,
    20 episodes) passed at iteration 165, 240 and 175 for seeds 0, 1 and 2 (1.02M, 1.48M,
    1.08M env steps; ~43, ~62, ~46 s estimated quiet), against iteration 140 (1.73M env
    steps, ~77 s) with 512 copies, seed 0. Desired KL 0.02, 8 mini-batches, 12-step
    rollouts and 128 copies were slower.

    Exploration noise 0.6 at the start (was 0.8) and a desired KL of 0.015 per update (was
    0.01; issue #30's second sweep, 2026-12-03, ``kelab train``'s path:
    ``benchmarks/README.md``, "Humanoid-v0 sweep 2"): the trainer's evaluation passed at
    iteration 190, 225, 230 and 235 for seeds 0, 1, 2 and 42 (mean 220, worst 235; not
    timed quiet: at the old config's 0.23-0.27 s an iteration, 43-63 s), against 270, 175,
    335 and 215 (mean 249, worst 335; 68, 45, 76 and 57.5 s measured quiet) with the old
    two. Noise 0.6 alone: 185, 205, 260, 235. Noise 0.5 or 0.7, entropy 0 or 0.01, lambda
    0.9, gamma 0.98 or 0.995, 6 epochs or a learning rate of 2e-3 were slower on seed 2, 0
    or 42. (The first sweep's iterations above were counted in the isolated layout.)

    The evaluations run in a second process (``eval_process``), on the core the update
    leaves idle part of each iteration: each verdict is read 5 iterations later, so a run
    stops 5 iterations after the policy that passed (the same ``best``), and the rollout
    no longer waits for up to ~0.5 s per evaluation. ``kelab train``, seeds 42, 0, 2 and
    1, alternating with the in-process evaluations (#30, 2026-12-03 17:45-17:55):
    45.7, 36.3, 51.8 and 47.4 s against 47.7, 39.0, 53.0 and 49.3 s (mean 45.3 against
    47.2), stopping at 225, 185, 235 and 230 with the policies of 220, 180, 230 and 225.
    """

    def on_start(self, env: LearningEnv | DirectRLEnv) -> None:
        """Joint order, torque scale, body indices and the fall termination."""
        super().on_start(env)
        self._scale = np.array([TORQUE_LIMITS[n.split("_")[0]] for n in self.joint_names])
        # the same torques from a float32 scale (#40: apply_actions' multiply ~7.8 -> ~5.4
        # us in a 2-thread step at 256 copies)
        self._action_scale = _float32_if_exact(self._scale)
        # the scale repeated for every copy: numpy then multiplies in one contiguous loop,
        # not one loop of action_dim per copy (#40: ~3.0 -> ~0.9 us at 256 x 6; the same
        # products)
        self._copies_scale = np.tile(self._action_scale, (self.num_envs, 1))
        self.start_x = np.zeros(self.num_envs)
        # the actions are every World joint in World order, some taking efforts: then
        # world.set_joint_efforts(torques) holds what robot.set_joint_effort_target(torques,
        # joint_ids=self.joint_ids) would (the same columns, the same refusals), without
        # the robot's and the World's checks and reordering of the columns (#40: ~50 ->
        # ~17 us a step at 256 copies)
        self._direct_efforts = self._world_joints and any(
            layout.actuator == "effort" for layout in self.world.joint_layouts
        )

    def apply_actions(self, actions: np.ndarray) -> None:
        """Torques = action * actuator limit (held for both physics steps)."""
        self._actions[:] = actions
        scale = self._copies_scale
        actions *= scale if actions.shape == scale.shape else self._action_scale
        if self._direct_efforts:
            self.world.set_joint_efforts(actions)
        else:
            self.robot.set_joint_effort_target(actions, joint_ids=self.joint_ids)

    def get_rewards(self) -> np.ndarray:
        """Forward speed + alive bonus - control cost."""
        speed = self._torso_vel[:, 0]
        actions = self._actions
        if actions.shape[1] < 8:
            # np.sum(actions**2, axis=1)'s values: numpy adds a row shorter than 8 left to
            # right (longer ones pairwise), as adding the squares' columns one after
            # another does, here with long inner loops (#40: ~7.8 -> ~4.5 us at 256 x 6;
            # tests/tasks/test_locomotion_reads.py compares the two for 1 to 12 joints);
            # the transposed copy squared in place (#40: in a 2-thread step, in-process A/B,
            # ~1.2-1.9 us less than np.square(actions.T, order="C"))
            squares = actions.T.copy()
            cost = np.add.reduce(np.square(squares, out=squares), axis=0)
        else:
            cost = np.add.reduce(np.square(actions), axis=1)
        cost *= 0.01  # float32, as 0.01 * cost
        reward = speed + 1.0
        reward -= cost
        return reward

    def reset_idx(self, env_ids: np.ndarray) -> None:
        """Stand up at the start pose with a small random whole-body velocity."""
        self.stand(env_ids, linear_velocity=self.uniform(env_ids, -0.1, 0.1, size=2))
        self.start_x[env_ids] = self._initial[self._torso_index, 0]
