"""The single env at peer speed: each built-in task's ``gymnasium.make`` env against a peer.

Run: python benchmarks/single_env.py [--steps 2000] [--rounds 5] [--tasks CartPole-v0,...]

Issue #42.1. Stable-Baselines3, CleanRL and most Gymnasium code step one env per
``gymnasium.make``; this measures that env (one copy, a ``DirectRLEnv`` behind
Gymnasium's ``OrderEnforcing`` and ``PassiveEnvChecker``, as ``gymnasium.make`` wraps it)
against a peer of its kind made the same way, both with uniform random actions drawn
before the clock starts (``action_space.sample()`` of a seeded space), resetting when an
episode ends:

| KELab task | peer | why that peer |
|---|---|---|
| kelab/CartPole-v0 | MuJoCo InvertedPendulum-v5 | a cart-pole with a continuous force |
| kelab/Humanoid-v0 | Box2D BipedalWalker-v3 | a 2D legged robot on the ground |
| kelab/BallToGoal-v0 | Box2D LunarLanderContinuous-v3 | a 2D body pushed to a goal |
| kelab/Pi-Locomotion-v0 | Box2D BipedalWalker-v3 | a 2D legged robot on the ground |

The peers come with the ``bench`` extra (``pip install -e ".[bench]"``: Gymnasium's
``box2d`` and ``mujoco`` extras); a peer that cannot be made prints "unavailable".
Both sides of a row run in this process, interleaved in chunks of ``--steps`` steps
(the side that goes first alternating between rounds), each timed by the process's CPU
clock (other processes' load on a shared machine inflates wall time far more); the
table gives each side's median steps/s over the rounds and the median of the per-round
ratios.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
import warnings
from collections.abc import Callable

import gymnasium
import numpy as np

import kelab  # noqa: F401  (registers the kelab/ tasks)

PEERS = {
    "kelab/CartPole-v0": "InvertedPendulum-v5",
    "kelab/Humanoid-v0": "BipedalWalker-v3",
    "kelab/BallToGoal-v0": "LunarLanderContinuous-v3",
    "kelab/Pi-Locomotion-v0": "BipedalWalker-v3",
}


class Side:
    """One env made by ``gymnasium.make``, stepped in timed chunks of pre-drawn actions."""

    def __init__(self, env_id: str, seed: int = 0) -> None:
        self.env_id = env_id
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the peers' deprecation notes
            self.env = gymnasium.make(env_id)
        self.env.reset(seed=seed)
        self.env.action_space.seed(seed)
        self.rates: list[float] = []

    def chunk(self, steps: int) -> float:
        """Step ``steps`` random actions; return steps per CPU second (and keep it)."""
        env = self.env
        actions = [env.action_space.sample() for _ in range(steps)]
        step, reset = env.step, env.reset
        gc.collect()
        t0 = time.process_time()
        for a in actions:
            _, _, terminated, truncated, _ = step(a)
            if terminated or truncated:
                reset()
        rate = steps / (time.process_time() - t0)
        self.rates.append(rate)
        return rate

    def close(self) -> None:
        self.env.close()


def make(env_id: str) -> Side | str:
    """The side, or why it cannot be made (a peer's extra not installed)."""
    try:
        return Side(env_id)
    except Exception as err:  # noqa: BLE001 - a missing Box2D/MuJoCo is reported, not raised
        return f"unavailable ({type(err).__name__}: {str(err).splitlines()[0][:80]})"


def measure(pairs: list[tuple[str, str]], steps: int, rounds: int) -> list[list[str]]:
    """The table rows: each pair interleaved over ``rounds`` rounds of ``steps`` steps."""
    rows = []
    for task, peer in pairs:
        ours, theirs = make(task), make(peer)
        if isinstance(ours, str):
            raise SystemExit(f"{task}: {ours}")
        ratios = []
        for r in range(rounds):
            sides: list[Callable[[int], float]] = [ours.chunk]
            if not isinstance(theirs, str):
                sides.append(theirs.chunk)
            if r % 2:
                sides.reverse()
            for run in sides:
                run(steps)
            if not isinstance(theirs, str):
                ratios.append(ours.rates[-1] / theirs.rates[-1])
        mine = statistics.median(ours.rates)
        if isinstance(theirs, str):
            rows.append([task, f"{mine:,.0f}", peer, theirs, "-"])
        else:
            peer_rate = statistics.median(theirs.rates)
            ratio = statistics.median(ratios)
            rows.append([task, f"{mine:,.0f}", peer, f"{peer_rate:,.0f}", f"{ratio:.2f}x"])
            theirs.close()
        ours.close()
        print(" | ".join(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2000, help="steps per timed chunk")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved chunks per side")
    ap.add_argument(
        "--tasks",
        default=",".join(t.removeprefix("kelab/") for t in PEERS),
        help="comma separated task ids (without kelab/)",
    )
    args = ap.parse_args()
    pairs = []
    for name in args.tasks.split(","):
        task = name if name.startswith("kelab/") else f"kelab/{name}"
        if task not in PEERS:
            raise SystemExit(f"--tasks: {name!r} is not one of {sorted(PEERS)}")
        pairs.append((task, PEERS[task]))
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, gymnasium "
        f"{gymnasium.__version__}; {args.rounds} rounds of {args.steps} steps, CPU clock\n"
    )
    rows = measure(pairs, args.steps, args.rounds)
    print()
    print("| env (one copy, `gym.make`) | steps/s | peer of its kind | peer steps/s | ratio |")
    print("|---|---:|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
