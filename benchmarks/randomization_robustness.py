"""Does domain randomization matter? CartPole trained with and without it, judged off-nominal.

    python benchmarks/randomization_robustness.py [--seed 42] [--episodes 100] [--runs DIR]

Trains ``kelab.tasks.cartpole:CartPoleTask`` (the nominal world, its own settings: it
stops at the first deterministic evaluation with >= 95 % success) and
``kelab.tasks.cartpole:RandomizedCartPoleTask`` (the same task over a range of worlds:
cart and pole masses, motor strength, gravity, pole kicks; 400 iterations) with
``kelab train ... --seed S`` (one process each, one core), then judges each trainer's
``best`` policy with ``ke.evaluate`` (``--episodes`` episodes, 50 copies, seed 1000) on
the nominal world and on fixed off-nominal ones, each a CartPole whose randomization
holds one value (``ke.Randomize(..., low == high)``). Prints a markdown table of the
success rates and mean returns, and the training cost (CPU seconds of each ``kelab
train`` process, its wall time). ``--runs DIR`` keeps the runs (default: a temporary
folder); existing runs there are reused, not retrained.

"Slipperier" has no row: CartPole's cart runs on a frictionless rail (its material has no
friction and the floor sits below the wheels), so no contact friction acts in this task.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask

POLE, CART = "/World/Robot/pole", "/World/Robot/cart"
TASKS = {
    "nominal": "kelab.tasks.cartpole:CartPoleTask",
    "randomized": "kelab.tasks.cartpole:RandomizedCartPoleTask",
}


def _world(*terms: ke.Randomize) -> type:
    """CartPole in one fixed off-nominal world (its terms hold one value each)."""
    return type("OffNominal", (CartPoleTask,), {"randomization": tuple(terms)})


def _kick(v: float, every: tuple[float, float]) -> ke.Randomize:
    return ke.Randomize("push", (-v, 0.0), (v, 0.0), when="interval", interval_s=every,
                        bodies=(POLE,))  # fmt: skip


WORLDS = {
    "nominal": _world(),
    "heavier cart (x8)": _world(ke.Randomize("mass_scale", 8.0, 8.0, bodies=(CART,))),
    "heavier pole (x4)": _world(ke.Randomize("mass_scale", 4.0, 4.0, bodies=(POLE,))),
    "weaker motor (x0.15)": _world(ke.Randomize("actuator_strength", 0.15, 0.15)),
    "pushed (pole kicks <= 2 m/s, every 0.5-1 s)": _world(_kick(2.0, (0.5, 1.0))),
    "tilted track (2 m/s^2 along it)": _world(ke.Randomize("gravity", (2.0, 0.0), (2.0, 0.0))),
    "heavier cart (x4) + weaker motor (x0.5) + kicks <= 1.5 m/s": _world(
        ke.Randomize("mass_scale", 4.0, 4.0, bodies=(CART,)),
        ke.Randomize("actuator_strength", 0.5, 0.5),
        _kick(1.5, (0.5, 1.0)),
    ),
}


def train(name: str, seed: int, runs: Path) -> tuple[Path, float, float]:
    """Train one task with ``kelab train``; its run folder, CPU and wall seconds."""
    run = runs / f"{name}-{seed}"
    if (run / "best.json").exists():
        return run, float("nan"), float("nan")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "kelab", "train", TASKS[name], "--seed", str(seed),
           "--run-dir", str(run)]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return run, cpu, time.perf_counter() - t0


def main() -> None:
    """Train both, judge both on every world, print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--runs", type=Path, default=None)
    args = p.parse_args()
    runs = args.runs or Path(tempfile.mkdtemp(prefix="kelab-dr-"))
    policies = {}
    for name in TASKS:
        run, cpu, wall = train(name, args.seed, runs)
        policies[name] = ke.RLPlayer(f"{run}:best", render_mode=None)
        print(f"trained {name}: {run} ({cpu:.0f} CPU s, {wall:.0f} s wall)", flush=True)
    print()
    print("| world | nominal policy: success, return | randomized policy: success, return |")
    print("|---|---:|---:|")
    for world, cls in WORLDS.items():
        cells = []
        for name in TASKS:
            env = ke.LearningEnv(cls(), num_envs=50, seed=1, layout="packed")
            r = ke.evaluate(env, policies[name].policy, episodes=args.episodes, seed=1000)
            env.close()
            cells.append(f"{100 * (r.success_rate or 0.0):.0f} %, {r.return_mean:.0f}")
        print(f"| {world} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
