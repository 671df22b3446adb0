"""What domain randomization costs (#41): Humanoid-v0, 256 copies, packed, random actions.

    python benchmarks/randomization_cost.py [--rounds 7] [--steps 300] [--cases none,dr,...]

The reset-heavy loop (a copy falls and resets every few dozen steps: ~12 resets a step)
with the task as it is (``none``) against the same task declaring randomization:

- ``dr``: masses (x0.8-x1.2 per body) and friction (x0.5-x1.5 per body) drawn at every
  reset, a push (up to 0.5 m/s on every body) every 1-2 s of each episode: the issue's
  case, target >= 0.9x of ``none``;
- ``gravity``: a gravity offset (up to 1 m/s^2 per axis) drawn at every reset: the packed
  layout's per-copy gravity (a held force on every body of the copy);
- ``all``: both, and actuator strength (x0.8-x1.2) too.

Each round builds and runs every case once in this process, the order rotating between
rounds; rates are env-steps per CPU second of this process (one thread: its CPU time is
the loop's), after 20 untimed steps. The table gives each case's median and the median
of the per-round ratios to ``none`` (measured in the same round), and the load average.
On a loaded machine those ratios swing by +-10 %; the last column is steadier: the share
of each randomized run's own CPU time spent drawing and writing the randomization (the
randomizer's calls, the World's setters they make included), measured within that run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

import kelab as ke
from kelab.tasks.humanoid import HumanoidTask

_BODIES = ("/World/Robot/*",)
TERMS = {
    "none": (),
    "dr": (
        ke.Randomize("mass_scale", 0.8, 1.2, bodies=_BODIES),
        ke.Randomize("friction_scale", 0.5, 1.5, bodies=_BODIES),
        ke.Randomize("push", (-0.5, -0.5), (0.5, 0.5), when="interval", interval_s=(1.0, 2.0)),
    ),
    "gravity": (ke.Randomize("gravity", (-1.0, -1.0), (1.0, 1.0)),),
}
TERMS["all"] = (*TERMS["dr"], *TERMS["gravity"], ke.Randomize("actuator_strength", 0.8, 1.2))


def _timed(fn: Callable[..., None], spent: list[float]) -> Callable[..., None]:
    """``fn``, adding the CPU seconds each call takes to ``spent[0]``."""

    def call(*args: object) -> None:
        t = time.process_time()
        fn(*args)
        spent[0] += time.process_time() - t

    return call


def rate(case: str, steps: int, num_envs: int = 256) -> tuple[float, float, float]:
    """Env-steps per CPU second of ``case``, resets per env-step, the randomizer's share."""
    task = type(f"Humanoid_{case}", (HumanoidTask,), {"randomization": TERMS[case]})()
    env = ke.LearningEnv(task, num_envs=num_envs, seed=0, layout="packed")
    env.reset(seed=0)
    spent = [0.0]
    r = env.randomizer
    if r is not None:  # the env calls these three (instance attributes win)
        r.begin = _timed(r.begin, spent)  # type: ignore[method-assign]
        r.after_reset = _timed(r.after_reset, spent)  # type: ignore[method-assign]
        r.tick = _timed(r.tick, spent)  # type: ignore[method-assign]
    rng = np.random.default_rng(0)
    acts = rng.uniform(-1, 1, (steps + 20, num_envs, 6)).astype(np.float32)
    ends = 0
    for k, a in enumerate(acts):
        if k == 20:
            t0 = time.process_time()
            spent[0] = 0.0
        _, _, term, trunc, _ = env.step(a)
        if k >= 20:
            ends += int((term | trunc).sum())
    seconds = time.process_time() - t0
    env.close()
    return num_envs * steps / seconds, ends / steps, spent[0] / seconds


def main() -> None:
    """Run the rounds and print the table (markdown)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--cases", default="none,dr,gravity,all")
    args = p.parse_args()
    cases = args.cases.split(",")
    if cases[0] != "none":
        cases.insert(0, "none")
    rates: dict[str, list[float]] = {c: [] for c in cases}
    resets: dict[str, list[float]] = {c: [] for c in cases}
    share: dict[str, list[float]] = {c: [] for c in cases}
    ratios: dict[str, list[float]] = {c: [] for c in cases}
    load0 = os.getloadavg()
    for r in range(args.rounds):
        order = cases[r % len(cases) :] + cases[: r % len(cases)]
        got = {}
        for case in order:
            got[case], per, part = rate(case, args.steps)
            rates[case].append(got[case])
            resets[case].append(per)
            share[case].append(part)
        for case in cases:
            ratios[case].append(got[case] / got["none"])
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{c} {got[c]:,.0f}" for c in cases))
    load1 = os.getloadavg()
    print()
    print(f"Humanoid-v0 x256, packed, 1 thread, {args.steps} steps a run, {args.rounds} rounds;")
    print(f"load average {load0[0]:.2f} before, {load1[0]:.2f} after (2 cores)")
    print()
    print("| case | env-steps per CPU s (median) | x of none (median of rounds) | range |", end="")
    print(" resets a step | randomizer's share of its run (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in cases:
        lo, hi = min(ratios[case]), max(ratios[case])
        print(
            f"| {case} | {statistics.median(rates[case]):,.0f} | "
            f"{statistics.median(ratios[case]):.3f} | {lo:.3f}-{hi:.3f} | "
            f"{statistics.median(resets[case]):.1f} | "
            f"{100 * statistics.median(share[case]):.1f} % |"
        )


if __name__ == "__main__":
    main()
