"""Shared scenes and drivers for the World tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import kelab as ke
from kelab.sim.scene.assets import Asset

DT = 1 / 120
LAYOUTS = ("isolated", "packed")


def busy_scene(noise: float = 0.05) -> ke.Scene:
    """Cartpole + ball + three tumbling boxes, with every sensor kind."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    ball = ke.Prop(
        ke.Circle(0.1),
        material=ke.Material(restitution=0.4, rolling_friction=0.02),
        initial_pose=ke.Pose(1.0, 0.6),
    )
    b.add(ball, at="/World/Ball")
    for k in range(3):
        box = ke.Prop(
            ke.Box(0.3, 0.2), initial_pose=ke.Pose(-1.0 + 0.07 * k, 0.3 + 0.5 * k, 0.4 * k)
        )
        b.add(box, at=f"/World/Box{k}")
    b.imu("imu", ball, ke.SensorConfig(noise=noise))
    b.contact_sensor("touch", "/World/Box0")
    b.rangefinder("range", "/World/Box2", angle=-np.pi / 2, max_range=3.0)
    b.rangefinder("floor", "/World/Robot/cart", angle=-np.pi / 2, max_range=3.0)
    b.joint_sensor("pole", "/World/Robot/cart_to_pole", ke.SensorConfig(delay=0.02, cutoff_hz=5))
    b.pose_sensor("where", "/World/Box1")
    return b.build()


def drive(
    world: ke.World, steps: int, start: int = 0, copy_ids: Sequence[int] | None = None
) -> np.ndarray:
    """Deterministic open-loop actions; returns (steps, num_envs, k) of everything read.

    Every copy gets its own command (a phase and an offset that grow with its id), so a
    test built on this catches copies that swap or share their commands. ``copy_ids``
    names the id each row of the world plays (default: its index); a lone world driven
    with ``copy_ids=[i]`` gets exactly what copy ``i`` of a bigger world gets.
    """
    out = []
    n = world.num_envs
    k = np.arange(n, dtype=np.float64) if copy_ids is None else np.asarray(copy_ids, float)
    if k.shape != (n,):
        raise ValueError(f"copy_ids must name one id per copy ({n}), got {copy_ids!r}")
    for t in range(start, start + steps):
        if t % 2 == 0:
            u = 30.0 * np.sin(t / 9.0 + 0.8 * k) + 4.0 * k
            world.set_joint_efforts(np.stack([u, np.zeros(n)], axis=1))
        world.step(DT)
        parts = [
            world.body_poses.reshape(n, -1),
            world.body_velocities.reshape(n, -1),
            world.joint_positions,
            world.joint_velocities,
            world.contact_forces.reshape(n, -1),
        ]
        parts += [world.read_sensor(s.name) for s in world.scene.sensors]
        out.append(np.concatenate(parts, axis=1))
    return np.array(out)


def separate_reset_states(backend, ids, poses, vels) -> bool:
    """A backend's reset_states as its separate calls: the rebuild, then the state write;
    nothing read back (the reference the fused paths are compared with)."""
    backend.rebuild(ids, place=False)
    backend.write_states(ids, poses, vels)
    return False
