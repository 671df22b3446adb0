"""Offscreen render throughput: KELab's two backends vs Gymnasium's CartPole rgb_array.

Each frame is what an RL ``render()`` costs: draw the scene and read the pixels back as an
``(H, W, 3)`` uint8 array. KELab draws the real ``kelab/robot/cartpole:v1`` scene (cart
with wheels, pole, ground) from a World, 600x400; Gymnasium's CartPole-v1 with
``render_mode="rgb_array"`` draws its own 600x400 cartpole with pygame.

Usage: python benchmarks/render_throughput.py [--frames 600] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import kelab as ke  # noqa: E402


def cartpole_world() -> ke.World:
    b = ke.SceneBuilder()
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.add(ke.Terrain.plane(), at="/")
    return ke.World(b.build(), num_envs=1)


def kelab_fps(
    backend: str, antialias: bool | str, frames: int, repeats: int
) -> tuple[float, np.ndarray]:
    world = cartpole_world()
    world.step(1 / 120)
    with ke.create_renderer(backend, size=(600, 400), headless=True, antialias=antialias) as r:
        r.camera.center = (0.0, 1.0)
        r.camera.zoom = 100.0
        best = 0.0
        img = None
        for rep in range(repeats + 1):  # the first round warms up
            t0 = time.perf_counter()
            for _ in range(frames):
                r.begin_frame()
                r.canvas.clear((255, 255, 255))
                r.canvas.draw_world(world)
                r.end_frame()
                img = r.read_rgb_pixels()
            dt = time.perf_counter() - t0
            if rep:
                best = max(best, frames / dt)
        assert img is not None and img.shape == (400, 600, 3)
        return best, img


def gym_fps(frames: int, repeats: int) -> tuple[float, np.ndarray]:
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    best = 0.0
    img = None
    for rep in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in range(frames):
            img = env.render()
        dt = time.perf_counter() - t0
        if rep:
            best = max(best, frames / dt)
    env.close()
    assert img is not None
    return best, img


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=600, help="frames per timed round")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (best is kept)")
    parser.add_argument("--png-dir", default="", help="also save one frame of each as PNG")
    args = parser.parse_args()

    base, gym_img = gym_fps(args.frames, args.repeats)
    rows = [("Gymnasium CartPole-v1 rgb_array (pygame)", base, gym_img.shape)]
    configs: list[tuple[str, bool | str]] = [
        ("pygame", True),
        ("pygame", False),
        ("gl", True),
        ("gl", False),
        ("gl", "msaa"),
    ]
    for backend, antialias in configs:
        fps, img = kelab_fps(backend, antialias, args.frames, args.repeats)
        name = f"kelab `{backend}` headless, antialias={antialias!r}"
        rows.append((name, fps, img.shape))
        if args.png_dir:
            import pygame

            surf = pygame.image.frombuffer(img.tobytes(), img.shape[1::-1], "RGB")
            out = os.path.join(args.png_dir, f"cartpole_{backend}_aa-{antialias}.png")
            pygame.image.save(surf, out)

    print(
        f"{args.frames} frames x best of {args.repeats}, draw + read_rgb_pixels per frame; "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n"
    )
    print("| renderer | frame | frames/s | ms/frame | vs Gymnasium |")
    print("|---|---|---:|---:|---:|")
    for name, fps, shape in rows:
        print(
            f"| {name} | {shape[1]}x{shape[0]} | {fps:,.0f} | {1000.0 / fps:.3f} "
            f"| {fps / base:.2f}x |"
        )


if __name__ == "__main__":
    main()
