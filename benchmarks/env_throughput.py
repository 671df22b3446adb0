"""Env throughput: LearningEnv against the bare pymunk loop and Gymnasium's envs.

Run: python benchmarks/env_throughput.py [--steps 200] [--repeats 3] [--quick]
Prints a markdown table (kept in benchmarks/README.md under "## env_throughput").

The BipedalWalker-v3 baseline needs Box2D: ``pip install -e ".[bench]"`` (the ``bench``
extra is ``gymnasium[box2d]``); without it that row prints "unavailable".

Rows, side by side in one run, each the median of ``--repeats`` runs:
- LearningEnv kelab/CartPole-v0, 1024 copies, an LQR balancing policy (keeps every copy
  up from the task's random starts, so episodes end only at the 5 s time limit; the full
  Task step: actions, 2 physics steps, dones/rewards/observations, validation, same-step
  resets), in both World layouts, vs ``bare_loop`` of benchmarks/world_throughput.py (one
  pymunk Space, hand-written batch I/O, no task logic, no resets; target >= 0.6x) and vs
  Gymnasium CartPole-v1 (a single env, and its numpy-vectorized 1024-copy version). A
  random-action row shows what frequent resets cost.
- LearningEnv kelab/Humanoid-v0, 256 copies, uniform random actions (so copies fall
  and reset all the time, as early in training), in both layouts, vs Gymnasium
  BipedalWalker-v3 (Box2D), one env, random actions (target >= 10x per core).
Everything runs on one core (num_threads=1; BipedalWalker is one single-threaded env),
so "per core" ratios are plain ratios of env steps per second.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

import gymnasium
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from world_throughput import bare_loop, start_clock  # noqa: E402

import kelab  # noqa: E402,F401  (registers the kelab/ tasks)

# LQR gains of the kelab cartpole (cart 1 kg, pole 0.1 kg x 1 m, Q = diag(1, 1, 10, 1),
# R = 0.01), in the task's observation convention (theta > 0 leans the pole towards -x)
LQR = np.array([10.0, 17.2, -106.9, -28.2]) / 100.0  # action = force / 100 N


def balance(obs: np.ndarray) -> np.ndarray:
    """Balancing policy: ``(n, 4)`` observations -> ``(n, 1)`` float32 actions."""
    return np.clip(obs @ LQR, -1.0, 1.0)[:, None].astype(np.float32)


def kelab_cartpole(n: int, steps: int, layout: str, random: bool = False) -> tuple[float, float]:
    env = gymnasium.make_vec(
        "kelab/CartPole-v0", num_envs=n, vectorization_mode="vector_entry_point", layout=layout
    )
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = 0
    t0 = start_clock()
    for _ in range(steps):
        if random:
            act = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
        else:
            act = balance(obs)
        obs, _, term, trunc, _ = env.step(act)
        ends += int((term | trunc).sum())
    rate = n * steps / (time.perf_counter() - t0)
    env.close()
    return rate, ends / (n * steps)


def gym_cartpole_single(steps: int) -> float:
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, steps)
    t0 = start_clock()
    for a in actions.tolist():
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t0)


def gym_cartpole_vector(n: int, steps: int) -> float:
    env = gymnasium.make_vec("CartPole-v1", num_envs=n, vectorization_mode="vector_entry_point")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    t0 = start_clock()
    for _ in range(steps):
        env.step(rng.integers(0, 2, n))
    return n * steps / (time.perf_counter() - t0)


def kelab_humanoid(n: int, steps: int, layout: str) -> tuple[float, float]:
    env = gymnasium.make_vec(
        "kelab/Humanoid-v0", num_envs=n, vectorization_mode="vector_entry_point", layout=layout
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = 0
    t0 = start_clock()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, (n, 6)).astype(np.float32))
        ends += int((term | trunc).sum())
    rate = n * steps / (time.perf_counter() - t0)
    env.close()
    return rate, ends / (n * steps)


def gym_bipedal(steps: int) -> float | None:
    try:
        env = gymnasium.make("BipedalWalker-v3")
    except Exception as exc:  # box2d missing: pip install -e ".[bench]"
        print(f"BipedalWalker-v3 unavailable: {exc}", file=sys.stderr)
        return None
    env.reset(seed=0)
    env.action_space.seed(0)
    t0 = start_clock()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t0)


def median(runs: int, fn: Callable[[], object]) -> object:
    """The median run of ``runs`` calls (by the rate, the first element of a tuple)."""
    results = [fn() for _ in range(runs)]
    if results[0] is None:
        return None
    return sorted(results, key=lambda r: r[0] if isinstance(r, tuple) else r)[runs // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="env steps per batched run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per row (median)")
    ap.add_argument("--quick", action="store_true", help="few steps, one run (smoke test)")
    args = ap.parse_args()
    steps = 5 if args.quick else args.steps
    runs = 1 if args.quick else args.repeats
    n_cp, n_hu = 1024, 256
    layouts = ("packed", "isolated")
    kc = {lay: median(runs, lambda lay=lay: kelab_cartpole(n_cp, steps, lay)) for lay in layouts}
    kr = median(runs, lambda: kelab_cartpole(n_cp, steps, "packed", random=True))
    bare = median(runs, lambda: bare_loop(n_cp, steps))
    g1 = median(runs, lambda: gym_cartpole_single(20 * steps * (1 if args.quick else 10)))
    gv = median(runs, lambda: gym_cartpole_vector(n_cp, steps))
    kh = {lay: median(runs, lambda lay=lay: kelab_humanoid(n_hu, steps, lay)) for lay in layouts}
    bw = median(runs, lambda: gym_bipedal(max(50, 20 * steps)))
    print(
        f"Python {platform.python_version()}, numpy {np.__version__}, gymnasium "
        f"{gymnasium.__version__}, {os.cpu_count()} cores (everything below runs on one), "
        f"{steps} env steps per batched run, median of {runs}\n"
    )
    print("| run | copies | env steps/s | packed LearningEnv relative to it |")
    print("|---|---:|---:|---:|")
    row = "| {} | {} | {} | {} |".format
    base, _ = kc["packed"]  # type: ignore[misc]
    for lay in layouts:
        rate, ends = kc[lay]  # type: ignore[misc]
        what = f"LearningEnv kelab/CartPole-v0, {lay} (LQR policy, {100 * ends:.1f} % resets)"
        print(row(what, n_cp, f"{rate:,.0f}", f"{base / rate:.2f}x"))
    rate, ends = kr  # type: ignore[misc]
    what = f"LearningEnv kelab/CartPole-v0, packed (random actions, {100 * ends:.1f} % resets)"
    print(row(what, n_cp, f"{rate:,.0f}", f"{base / rate:.2f}x"))
    print(row("bare pymunk.batch loop (world_throughput.bare_loop, no resets)", n_cp,
              f"{bare:,.0f}", f"{base / bare:.2f}x"))  # fmt: skip
    print(row("Gymnasium CartPole-v1 (one env, random)", 1, f"{g1:,.0f}", f"{base / g1:.2f}x"))
    print(row("Gymnasium CartPole-v1 (numpy vector env)", n_cp, f"{gv:,.0f}",
              f"{base / gv:.3f}x"))  # fmt: skip
    base, _ = kh["packed"]  # type: ignore[misc]
    for lay in layouts:
        rate, ends = kh[lay]  # type: ignore[misc]
        what = f"LearningEnv kelab/Humanoid-v0, {lay} (random actions, {100 * ends:.1f} % resets)"
        print(row(what, n_hu, f"{rate:,.0f}", f"{base / rate:.2f}x"))
    if bw is None:
        print(row("Gymnasium BipedalWalker-v3", 1, "unavailable (no box2d)", ""))
    else:
        print(row("Gymnasium BipedalWalker-v3 (Box2D, random actions)", 1, f"{bw:,.0f}",
                  f"{base / bw:.1f}x"))  # fmt: skip


if __name__ == "__main__":
    main()
