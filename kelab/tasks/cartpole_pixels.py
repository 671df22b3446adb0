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

from typing import TYPE_CHECKING

import numpy as np

from kelab.sim.scene import Pose
from kelab.sim.scene.builder import SceneBuilder
from kelab.tasks.cartpole import CartPoleTask

if TYPE_CHECKING:
    from kelab.render.canvas import Canvas

__all__ = ["CAMERAS", "FRAMES", "SIZE", "CartPolePixelsTask"]

FRAMES = 2
"""Images of each camera stacked in one observation (the newest last)."""
CAMERAS = ("track", "pole")
"""The task's camera sensors, in the observation's channel order."""
SIZE = (64, 36)
"""Each camera's (width, height), pixels."""
VIEW_SCALE = 3
"""Screen pixels per camera pixel where frames show what the policy sees."""


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

    def _images(self, env_ids: np.ndarray | None = None) -> np.ndarray:
        """Every camera's image now, ``(copies, H, W, cameras)``: every copy or ``env_ids``."""
        read = self.world.read_sensor
        return np.concatenate([read(name, env_ids) for name in CAMERAS], axis=-1)

    def on_post_physics_step(self) -> None:
        """CartPole's joint state for the rules, and the cameras' new images on the stacks."""
        super().on_post_physics_step()
        frames = self.frames
        for k in range(FRAMES - 1):  # each camera's frames move one older (no overlap)
            frames[..., k::FRAMES] = frames[..., k + 1 :: FRAMES]
        frames[..., FRAMES - 1 :: FRAMES] = self._images()  # and its newest goes last

    def get_observations(self) -> np.ndarray:
        """The stacked images, ``(num_envs, 36, 64, 4)`` uint8 (see the module docstring)."""
        return self.frames

    def reset_idx(self, env_ids: np.ndarray) -> None:
        """CartPole's reset; the copies' stacks start with their first images."""
        super().reset_idx(env_ids)
        images = self._images(env_ids)  # (k, H, W, cameras): only theirs are drawn
        self.frames[env_ids] = np.repeat(images, FRAMES, axis=-1)

    def draw(self, canvas: Canvas, env_ids: np.ndarray, origins: np.ndarray) -> None:
        """What the policy sees, beside the scene: the first copy's newest camera images.

        Top right of the frame, :data:`VIEW_SCALE` screen pixels per camera pixel, the
        track camera above the pole camera (``kelab preview``, ``kelab play`` and the App
        draw it; the observation also holds the frame before each).
        """
        if not len(env_ids) or "frames" not in self.__dict__:
            return
        obs = self.frames[int(env_ids[0])]
        width, _ = canvas.camera.size
        w, h = SIZE[0] * VIEW_SCALE, SIZE[1] * VIEW_SCALE
        x0, y = width - w - 10, 30
        white, dark = (235, 235, 235), (30, 30, 30)
        canvas.text((x0, y - 2), "what the policy sees", dark, size=13, screen_space=True)
        y += 16
        for k, name in enumerate(CAMERAS):
            canvas.screen_rect((x0 - 2, y - 2, x0 + w + 2, y + h + 2), (150, 150, 150))
            canvas.image((x0, y, x0 + w, y + h), obs[..., k * FRAMES + FRAMES - 1])
            canvas.text((x0 + 4, y + 2), name, white, size=12, screen_space=True)
            y += h + 8
