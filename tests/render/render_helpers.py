"""Render test helpers: a minimal World stand-in, scene builders and an edge mask.

Imported by module name (tests/render is on sys.path through its conftest), not from
``conftest``, which would clash with other test folders' conftest modules.
"""

from __future__ import annotations

import numpy as np

import kelab as ke

BACKENDS = ("pygame", "gl")


class FakeWorld:
    """The read-only surface of kelab.World that the renderer uses.

    Per-environment bodies are listed in ``body_names``; shared ones (terrain) are not.
    """

    def __init__(self, scene: ke.Scene, num_envs: int = 1, env_spacing: float = 0.0) -> None:
        self.scene = scene
        self.num_envs = num_envs
        self.env_spacing = env_spacing
        per_env = [b for b in scene.bodies if b.per_environment]
        self.body_names = tuple(b.path for b in per_env)
        init = np.array([[b.pose.x, b.pose.y, b.pose.angle] for b in per_env], dtype=np.float64)
        self.body_poses = np.repeat(init.reshape(1, -1, 3), num_envs, axis=0)
        self.env_origins = np.stack([np.arange(num_envs) * env_spacing, np.zeros(num_envs)], axis=1)


def make_world(items: list[tuple[object, str]], num_envs: int = 1, spacing: float = 0.0):
    """Build a FakeWorld from (item, path) pairs added to a SceneBuilder."""
    b = ke.SceneBuilder()
    for item, path in items:
        b.add(item, at=path)
    return FakeWorld(b.build(), num_envs=num_envs, env_spacing=spacing)


def prop(shape, x=0.0, y=0.0, angle=0.0, color=(255, 0, 0), layer=0) -> ke.Prop:
    return ke.Prop(
        shape,
        mass=1.0,
        initial_pose=ke.Pose(x, y, angle),
        render=ke.RenderHint(color=color, layer=layer),
    )


def cartpole_world(num_envs: int = 1, spacing: float = 0.0) -> FakeWorld:
    robot = ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1"))
    return make_world(
        [(robot, "/World/Robot"), (ke.Terrain.plane(name="ground"), "/")], num_envs, spacing
    )


def edge_mask(*images: np.ndarray, grow: int = 1) -> np.ndarray:
    """True where any image changes colour within ``grow`` pixels (shape edges)."""
    mask = np.zeros(images[0].shape[:2], dtype=bool)
    for img in images:
        a = img.astype(np.int16)
        e = np.zeros(mask.shape, dtype=bool)
        e[:, 1:] |= np.abs(a[:, 1:] - a[:, :-1]).max(-1) > 0
        e[1:, :] |= np.abs(a[1:, :] - a[:-1, :]).max(-1) > 0
        mask |= e
    for _ in range(grow):
        g = mask.copy()
        g[1:] |= mask[:-1]
        g[:-1] |= mask[1:]
        g[:, 1:] |= mask[:, :-1]
        g[:, :-1] |= mask[:, 1:]
        mask = g
    return mask
