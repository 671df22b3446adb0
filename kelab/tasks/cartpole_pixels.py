"""``kelab/CartPole-Pixels-v0``: CartPole seen only through cameras.

The CartPole of :mod:`kelab.tasks.cartpole` (the same scene, physics, actions, rewards,
endings, resets and success rule), but the policy observes no joint state, only two
grayscale cameras (``SceneBuilder.camera_sensor``), 64x36 pixels each: ``track``, fixed
to the world, sees the whole track (10 px/m: the track's +-2.4 m and the pole's 1.25 m
fit), where the cart is; ``pole`` rides with the cart (25 px/m) and sees the pole up close.
The observation is each camera's last :data:`FRAMES` images stacked as channels, ``(36,
64, 4)`` uint8 (Gymnasium's image space): ``track`` then ``pole``, each oldest first. Two
frames 1/60 s apart show the motion. A new episode's stack holds its first images twice.
"""

from __future__ import annotations

import numpy as np

from kelab.sim.scene import Pose
from kelab.sim.scene.builder import SceneBuilder
from kelab.tasks.cartpole import CartPoleTask

__all__ = ["CAMERAS", "FRAMES", "SIZE", "CartPolePixelsTask"]

FRAMES = 2
"""Images of each camera stacked in one observation (the newest last)."""
CAMERAS = ("track", "pole")
"""The task's camera sensors, in the observation's channel order."""
SIZE = (64, 36)
"""Each camera's (width, height), pixels."""


class CartPolePixelsTask(CartPoleTask):
    """Balance the pole from pixels alone (see the module docstring)."""

    observation_shape = (SIZE[1], SIZE[0], FRAMES * len(CAMERAS))
    observation_dim = SIZE[1] * SIZE[0] * FRAMES * len(CAMERAS)
    training_config = dict(
        layout="packed",
        num_envs=64,
        num_steps_per_env=16,
        max_iterations=1000,
        cnn_channels=(16, 32),
        cnn_kernels=(8, 4),
        cnn_strides=(4, 2),
        actor_hidden_dims=(64,),
        critic_hidden_dims=(64,),
        init_noise_std=0.5,
        obs_normalization=False,
        entropy_coef=0.0,
        learning_rate=1e-3,
        gamma=0.98,
        num_learning_epochs=4,
        num_mini_batches=4,
        success_target=0.95,
        stop_at_target=True,
        eval_every=5,
        eval_episodes=100,
        eval_process=True,
    )
    """PPO with a small convolutional policy (docs/training.md, "Learning from pixels")."""

    def build(self, scene: SceneBuilder) -> None:
        """CartPole's ground and cartpole, the track camera and the pole camera."""
        super().build(scene)
        track, pole = CAMERAS
        scene.camera_sensor(track, size=SIZE, channels=1, zoom=10.0, offset=Pose(0.0, 0.5))
        scene.camera_sensor(
            pole, f"{self.robot.path}/cart", size=SIZE, channels=1, zoom=25.0,
            offset=Pose(0.0, 0.47), follow="position",
        )  # fmt: skip

    def on_start(self, env: object) -> None:
        """CartPole's set-up, and the frame stacks."""
        super().on_start(env)
        self.frames = np.zeros((self.num_envs, *self.observation_shape), dtype=np.uint8)

    def _images(self) -> np.ndarray:
        """Every camera's image now, ``(num_envs, H, W, cameras)``."""
        read = self.world.read_sensor
        return np.concatenate([read(name) for name in CAMERAS], axis=-1)

    def on_post_physics_step(self) -> None:
        """CartPole's joint state for the rules, and the cameras' new images on the stacks."""
        super().on_post_physics_step()
        frames = self.frames
        frames[..., :-1] = frames[..., 1:]  # each camera's newest is last: shift all, then
        frames[..., FRAMES - 1 :: FRAMES] = self._images()  # write each camera's newest

    def get_observations(self) -> np.ndarray:
        """The stacked images, ``(num_envs, 36, 64, 4)`` uint8 (see the module docstring)."""
        return self.frames

    def reset_idx(self, env_ids: np.ndarray) -> None:
        """CartPole's reset; the copies' stacks start with their first images."""
        super().reset_idx(env_ids)
        images = self._images()[env_ids]  # (k, H, W, cameras)
        self.frames[env_ids] = np.repeat(images, FRAMES, axis=-1)
