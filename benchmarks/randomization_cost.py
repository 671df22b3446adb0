"""What domain randomization costs (#41): Humanoid-v0, 256 copies, packed, random actions.

    python benchmarks/randomization_cost.py [--rounds 7] [--steps 300] [--block 20]
                                            [--cases none,dr,...]

The reset-heavy loop (a copy falls and resets every few dozen steps: ~12 resets a step)
with the task as it is (``none``) against the same task declaring randomization:

- ``dr``: masses (x0.8-x1.2 per body) and friction (x0.5-x1.5 per body) drawn at every
  reset, a push (up to 0.5 m/s on every body) every 1-2 s of each episode: the issue's
  case, target >= 0.9x of ``none``;
- ``gravity``: a gravity offset (up to 1 m/s^2 per axis) drawn at every reset: the packed
  layout's per-copy gravity (a held force on every body of the copy);
- ``all``: both, and actuator strength (x0.8-x1.2) too.

Every case's env is built once, in this process, and stepped 20 untimed steps; then each
round steps every case ``--steps`` env steps in blocks of ``--block``, the cases taking
turns block by block (the order rotating), so a change in the machine's load falls on
all of them alike. Rates are env-steps per CPU second of this process (one thread: its
CPU time is the loop's). The table gives each case's median rate over the rounds and
the median (and range) of the per-round ratios to ``none``, and the load average. The
last column is the steadiest: the share of each randomized run's own CPU time spent
drawing and writing the randomization (the randomizer's calls, the World's setters they
make included), measured within that run.
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


class Case:
    """One case's env, stepped in blocks: its CPU seconds, episode ends and the randomizer's.

    Args:
        case: A key of :data:`TERMS`.
        num_envs: Copies.
    """

    def __init__(self, case: str, num_envs: int = 256) -> None:
        task = type(f"Humanoid_{case}", (HumanoidTask,), {"randomization": TERMS[case]})()
        self.env = ke.LearningEnv(task, num_envs=num_envs, seed=0, layout="packed")
        self.env.reset(seed=0)
        self.spent = [0.0]
        r = self.env.randomizer
        if r is not None:  # the env calls these three (instance attributes win)
            r.begin = _timed(r.begin, self.spent)  # type: ignore[method-assign]
            r.after_reset = _timed(r.after_reset, self.spent)  # type: ignore[method-assign]
            r.tick = _timed(r.tick, self.spent)  # type: ignore[method-assign]
        self.rng = np.random.default_rng(0)
        self.num_envs = num_envs
        self.clear()
        self.run(20)  # untimed warm-up
        self.clear()

    def clear(self) -> None:
        """Start counting again."""
        self.seconds, self.steps, self.ends, self.spent[0] = 0.0, 0, 0, 0.0

    def run(self, steps: int) -> None:
        """Step ``steps`` env steps with random actions, counting their CPU time."""
        acts = self.rng.uniform(-1, 1, (steps, self.num_envs, 6)).astype(np.float32)
        t0 = time.process_time()
        for a in acts:
            _, _, term, trunc, _ = self.env.step(a)
            self.ends += int((term | trunc).sum())
        self.seconds += time.process_time() - t0
        self.steps += steps

    def figures(self) -> tuple[float, float, float]:
        """Env-steps per CPU second, resets per env-step, the randomizer's share."""
        return (
            self.num_envs * self.steps / self.seconds,
            self.ends / self.steps,
            self.spent[0] / self.seconds,
        )


def main() -> None:
    """Run the rounds and print the table (markdown)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=300, help="env steps per case and round")
    p.add_argument("--block", type=int, default=20, help="env steps a case runs in turn")
    p.add_argument("--cases", default="none,dr,gravity,all")
    args = p.parse_args()
    cases = args.cases.split(",")
    if cases[0] != "none":
        cases.insert(0, "none")
    runs = {c: Case(c) for c in cases}
    rates: dict[str, list[float]] = {c: [] for c in cases}
    resets: dict[str, list[float]] = {c: [] for c in cases}
    share: dict[str, list[float]] = {c: [] for c in cases}
    ratios: dict[str, list[float]] = {c: [] for c in cases}
    load0 = os.getloadavg()
    turn = 0
    for r in range(args.rounds):
        for run in runs.values():
            run.clear()
        done = 0
        while done < args.steps:
            block = min(args.block, args.steps - done)
            order = cases[turn % len(cases) :] + cases[: turn % len(cases)]
            turn += 1
            for case in order:
                runs[case].run(block)
            done += block
        got = {}
        for case in cases:
            got[case], per, part = runs[case].figures()
            rates[case].append(got[case])
            resets[case].append(per)
            share[case].append(part)
        for case in cases:
            ratios[case].append(got[case] / got["none"])
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{c} {got[c]:,.0f}" for c in cases))
    load1 = os.getloadavg()
    for run in runs.values():
        run.env.close()
    print()
    print(
        f"Humanoid-v0 x256, packed, 1 thread, {args.steps} steps a case and round in blocks "
        f"of {args.block}, {args.rounds} rounds;"
    )
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
