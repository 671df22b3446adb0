"""Camera sensor throughput: KELab's batched camera vs Gymnasium's rgb_array frame + resize.

State -> image, measured in CPU seconds (``time.process_time``: the machine is shared, so
wall time would count other people's work):

- KELab: ``world.read_sensor("eye")`` of a camera on the CartPole scene (ground, cart with
  wheels, pole), 1,024 copies at random cart positions and pole angles, 64x64 RGB (and
  grayscale 64x64, 48x48), every copy drawn in one batched call per shape.
- The CPU peer: Gymnasium CartPole-v1 with ``render_mode="rgb_array"`` (pygame, 600x400),
  one ``render()`` per image plus a resize to 64x64 (PIL, bilinear), the usual way a pixel
  policy gets its input from a Gymnasium env.

Then the camera's share of a pixel env step: ``kelab/CartPole-Pixels-v0`` at its training
``num_envs``, the CPU time of its steps with and without the camera's reads.

Usage: python benchmarks/camera_throughput.py [--copies 1024] [--repeats 5]
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
from kelab.tasks.cartpole import CartPoleTask  # noqa: E402


def camera_world(copies: int, size: tuple[int, int], channels: int) -> ke.World:
    """The CartPole scene with a world-fixed camera, copies at random states."""
    b = ke.SceneBuilder()
    CartPoleTask().build(b)
    zoom = size[0] / 6.4  # the track's +-2.4 m and some margin across the image
    b.camera_sensor("eye", size=size, channels=channels, zoom=zoom, offset=ke.Pose(0.0, 0.6))
    world = ke.World(b.build(), num_envs=copies, layout="packed")
    rng = np.random.default_rng(0)
    x, angle = rng.uniform(-2.4, 2.4, copies), rng.uniform(-0.5, 0.5, copies)
    poses = world.body_poses
    poses[:, 1, 0] = x
    poses[:, 2, 0] = x - 0.5 * np.sin(angle)
    poses[:, 2, 1] = 0.25 + 0.5 * np.cos(angle)
    poses[:, 2, 2] = angle
    world.set_body_states(None, poses)
    world.step(1 / 120)
    return world


def kelab_rate(copies: int, size: tuple[int, int], channels: int, repeats: int) -> float:
    """Images per CPU second, the best of ``repeats`` rounds of ~0.5 s."""
    world = camera_world(copies, size, channels)
    world.read_sensor("eye")  # warm up
    best = 0.0
    for _ in range(repeats):
        reads, t0 = 0, time.process_time()
        while time.process_time() - t0 < 0.5:
            world.read_sensor("eye")
            reads += 1
        best = max(best, reads * copies / (time.process_time() - t0))
    world.close()
    return best


def gym_rate(repeats: int) -> tuple[float, float]:
    """Gymnasium CartPole-v1: (rgb_array frames + resize to 64x64, frames alone) per CPU s."""
    from PIL import Image

    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    env.render()
    best, best_frame = 0.0, 0.0
    for _ in range(repeats):
        for resize in (True, False):
            frames, t0 = 0, time.process_time()
            while time.process_time() - t0 < 0.5:
                frame = env.render()
                if resize:
                    Image.fromarray(frame).resize((64, 64), Image.BILINEAR)
                frames += 1
            rate = frames / (time.process_time() - t0)
            if resize:
                best = max(best, rate)
            else:
                best_frame = max(best_frame, rate)
    env.close()
    return best, best_frame


def pixel_env_share(steps: int) -> tuple[int, float, float] | None:
    """``(num_envs, step CPU ms, camera reads' share)`` of kelab/CartPole-Pixels-v0."""
    if "kelab/CartPole-Pixels-v0" not in gym.registry:
        return None
    from kelab.tasks.cartpole_pixels import CartPolePixelsTask

    n = int(CartPolePixelsTask.training_config["num_envs"])
    env = ke.LearningEnv(task=CartPolePixelsTask(), num_envs=n, layout="packed", seed=0)
    env.reset(seed=0)
    world = env.world
    actions = np.zeros((n, 1), np.float32)
    rng = np.random.default_rng(0)
    read = world.read_sensor
    spent = [0.0]

    def timed(name: str, env_ids: np.ndarray | None = None) -> np.ndarray:
        t = time.process_time()
        out = read(name, env_ids)
        spent[0] += time.process_time() - t
        return out

    world.read_sensor = timed  # type: ignore[method-assign]  # counts the camera's reads
    for _ in range(20):
        env.step(rng.uniform(-1, 1, (n, 1)).astype(np.float32))
    spent[0] = 0.0
    t0 = time.process_time()
    for _ in range(steps):
        actions[:] = rng.uniform(-1, 1, (n, 1))
        env.step(actions)
    total = time.process_time() - t0
    env.close()
    return n, 1e3 * total / steps, spent[0] / total


def main() -> None:
    """Print the tables of benchmarks/README.md, "camera_throughput"."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}, numpy {np.__version__}")  # fmt: skip
    peer, frame_only = gym_rate(args.repeats)
    print("| images | per CPU second | vs the peer |")
    print("|---|---:|---:|")
    print(f"| Gymnasium CartPole-v1 rgb_array 600x400 + resize to 64x64 | {peer:,.0f} | 1.0x |")
    print(f"| Gymnasium CartPole-v1 rgb_array 600x400 alone | {frame_only:,.0f} | "
          f"{frame_only / peer:.2f}x |")  # fmt: skip
    for size, channels in (((64, 64), 3), ((64, 64), 1), ((48, 48), 1)):
        rate = kelab_rate(args.copies, size, channels, args.repeats)
        kind = "RGB" if channels == 3 else "gray"
        print(f"| KELab camera {size[0]}x{size[1]} {kind}, {args.copies} copies | {rate:,.0f} | "
              f"{rate / peer:.1f}x |")  # fmt: skip
    share = pixel_env_share(args.steps)
    if share is not None:
        n, ms, part = share
        print(f"\nkelab/CartPole-Pixels-v0, {n} copies: {ms:.2f} CPU ms a step, the camera "
              f"{100 * part:.0f} % of it")  # fmt: skip


if __name__ == "__main__":
    main()
