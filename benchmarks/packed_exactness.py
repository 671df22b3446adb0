"""Packed layout exactness: is copy i of a 40-copy World bit-identical to a lone copy?

Run: python benchmarks/packed_exactness.py [--copies 40] [--steps 300]
Prints the markdown rows kept in docs/world.md ("Layouts"). Not a speed benchmark: it
measures which scenes the packed layout reproduces exactly (the isolated layout does in
every scene; tests/sim/test_determinism.py). Every copy gets the same open-loop efforts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

import kelab as ke
from kelab.sim.scene.assets import Asset

DT = 1 / 120


def _with_plane(*props: tuple[str, ke.Prop]) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    for path, prop in props:
        b.add(prop, at=path)
    return b.build()


def cartpole_alone() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    return b.build()


def tumbling_boxes() -> ke.Scene:
    return _with_plane(
        *(
            (f"/World/Box{k}", ke.Prop(ke.Box(0.3, 0.2), initial_pose=ke.Pose(0.4 * k, 0.5, 0.3)))
            for k in range(3)
        )
    )


def sliding_cart() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    return b.build()


def circles_on_plane() -> ke.Scene:
    return _with_plane(
        *(
            (f"/World/Ball{k}", ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.3 * k, 0.4 + k)))
            for k in range(3)
        )
    )


def box_stack() -> ke.Scene:
    return _with_plane(
        *(
            (f"/World/Box{k}", ke.Prop(ke.Box(0.4, 0.2), initial_pose=ke.Pose(0.0, 0.1 + 0.21 * k)))
            for k in range(4)
        )
    )


def busy() -> ke.Scene:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sim"))
    from _world_scenes import busy_scene  # the tests' scene with every sensor kind

    return busy_scene()


def run(world: ke.World, steps: int) -> np.ndarray:
    """Poses and velocities of every copy after each step, ``(steps, n, k)``."""
    n, out = world.num_envs, []
    for t in range(steps):
        if world.joint_names:
            u = 30.0 * np.sin(t / 9.0)
            world.set_joint_efforts(np.tile([u] + [0.0] * (len(world.joint_names) - 1), (n, 1)))
        world.step(DT)
        out.append(np.concatenate([world.body_poses, world.body_velocities], axis=2).reshape(n, -1))
    world.close()
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    scenes: dict[str, Callable[[], ke.Scene]] = {
        "joints only (cartpole without ground)": cartpole_alone,
        "boxes tumbling onto a plane": tumbling_boxes,
        "cart in contact with a plane (wheels)": sliding_cart,
        "circles on a plane (box ground)": circles_on_plane,
        "box stack (polygon-polygon)": box_stack,
        "busy test scene (chaotic)": busy,
    }
    print(f"| copy i == lone copy, packed, {args.steps} steps | exact copies | max drift |")
    print("|---|---:|---:|")
    for name, make in scenes.items():
        scene = make()
        lone = run(ke.World(scene, layout="packed"), args.steps)[:, 0]
        many = run(ke.World(scene, num_envs=args.copies, layout="packed"), args.steps)
        exact = sum(np.array_equal(many[:, i], lone) for i in range(args.copies))
        drift = float(np.nanmax(np.abs(many - lone[:, None])))
        print(f"| {name} | {exact}/{args.copies} | {drift:.1e} |")


if __name__ == "__main__":
    main()
