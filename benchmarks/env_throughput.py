"""Env throughput: LearningEnv against the bare pymunk loop and Gymnasium's envs.

Run: python benchmarks/env_throughput.py [--steps 200] [--quick]
Prints a markdown table (kept in benchmarks/README.md under "## env_throughput").

Rows, side by side in one run:
- LearningEnv kelab/CartPole-v0, 1024 copies, the engine benchmark's balancing policy
  (the full Task step: actions, 2 physics steps, dones/rewards/observations, validation,
  same-step resets) vs ``bare_loop`` of benchmarks/world_throughput.py (one pymunk Space,
  hand-written batch I/O, no task logic; target >= 0.6x) and vs Gymnasium CartPole-v1
  (a single env, and its numpy-vectorized 1024-copy version).
- LearningEnv kelab/Humanoid-v0, 256 copies, uniform random actions (so copies fall
  and reset all the time, as early in training) vs Gymnasium BipedalWalker-v3 (Box2D),
  one env, random actions (target >= 10x per core). Everything runs on one core.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import gymnasium
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from world_throughput import bare_loop, policy  # noqa: E402

import kelab  # noqa: E402,F401  (registers the kelab/ tasks)


def kelab_cartpole(n: int, steps: int) -> float:
    env = gymnasium.make_vec(
        "kelab/CartPole-v0", num_envs=n, vectorization_mode="vector_entry_point"
    )
    obs, _ = env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(steps):
        u = policy(obs[:, 0], obs[:, 2], obs[:, 1], obs[:, 3]) / 100.0
        obs, *_ = env.step(u[:, None].astype(np.float32))
    rate = n * steps / (time.perf_counter() - t0)
    env.close()
    return rate


def gym_cartpole_single(steps: int) -> float:
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, steps)
    t0 = time.perf_counter()
    for a in actions.tolist():
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t0)


def gym_cartpole_vector(n: int, steps: int) -> float:
    env = gymnasium.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(rng.integers(0, 2, n))
    return n * steps / (time.perf_counter() - t0)


def kelab_humanoid(n: int, steps: int) -> tuple[float, float]:
    env = gymnasium.make_vec(
        "kelab/Humanoid-v0", num_envs=n, vectorization_mode="vector_entry_point"
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, (n, 6)).astype(np.float32))
        ends += int((term | trunc).sum())
    rate = n * steps / (time.perf_counter() - t0)
    env.close()
    return rate, ends / (n * steps)


def gym_bipedal(steps: int) -> float | None:
    try:
        env = gymnasium.make("BipedalWalker-v3")
    except Exception as exc:  # box2d missing: pip install "gymnasium[box2d]"
        print(f"BipedalWalker-v3 unavailable: {exc}", file=sys.stderr)
        return None
    env.reset(seed=0)
    env.action_space.seed(0)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="env steps per batched run")
    ap.add_argument("--quick", action="store_true", help="few steps (smoke test)")
    args = ap.parse_args()
    steps = 5 if args.quick else args.steps
    n_cp, n_hu = 1024, 256
    kc = kelab_cartpole(n_cp, steps)
    bare = bare_loop(n_cp, steps)
    g1 = gym_cartpole_single(20 * steps * (1 if args.quick else 10))
    gv = gym_cartpole_vector(n_cp, steps)
    kh, end_rate = kelab_humanoid(n_hu, steps)
    bw = gym_bipedal(max(50, 20 * steps))
    print(
        f"Python {platform.python_version()}, numpy {np.__version__}, gymnasium "
        f"{gymnasium.__version__}, {os.cpu_count()} cores (everything below runs on one)\n"
    )
    print("| run | copies | env steps/s | KELab LearningEnv relative to it |")
    print("|---|---:|---:|---:|")
    row = "| {} | {} | {} | {} |".format
    print(row("KELab LearningEnv kelab/CartPole-v0 (balancing)", n_cp, f"{kc:,.0f}", "1.00x"))
    print(row("bare pymunk.batch loop (world_throughput.bare_loop)", n_cp, f"{bare:,.0f}",
              f"{kc / bare:.2f}x"))  # fmt: skip
    print(row("Gymnasium CartPole-v1 (one env, random)", 1, f"{g1:,.0f}", f"{kc / g1:.2f}x"))
    print(row("Gymnasium CartPole-v1 (numpy vector env)", n_cp, f"{gv:,.0f}", f"{kc / gv:.3f}x"))
    what = f"KELab LearningEnv kelab/Humanoid-v0 (random actions, {100 * end_rate:.1f} % resets)"
    print(row(what, n_hu, f"{kh:,.0f}", "1.00x"))
    if bw is None:
        print(row("Gymnasium BipedalWalker-v3", 1, "unavailable (no box2d)", ""))
    else:
        print(row("Gymnasium BipedalWalker-v3 (Box2D, random actions)", 1, f"{bw:,.0f}",
                  f"{kh / bw:.1f}x"))  # fmt: skip

if __name__ == "__main__":
    main()
