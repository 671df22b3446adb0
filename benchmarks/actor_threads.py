"""The numpy actor on one BLAS thread against the BLAS's own threads (trial of 2026-12-06).

    python benchmarks/actor_threads.py [--rounds 5]

``kelab play`` / ``kelab eval`` / ``ke.RLPlayer`` run a checkpoint's policy in numpy
(:class:`kelab.train.numpy_actor.NumpyActor`), which now runs a product large enough for
the BLAS to split on one thread (``kelab.train.blas_threads``). "threads" below is the
actor as it was: numpy's BLAS (OpenBLAS) on its own threads, one per core (the actor with
``SPLIT_FROM`` set out of reach). Interleaved rounds, the best of each (a shared machine):

1. ``RLPlayer.act`` of a convolutional policy (CartPole-Pixels-v0's network, from a
   1-iteration ``kelab train`` run, trained here: needs kelab[train]) on 1-32 images: CPU
   and wall ms a call.
2. ``ke.evaluate`` of the shipped MLP policies over 100 copies, 100 episodes (seed 1000,
   as benchmarks/shipped_policies.py): CPU and wall s, and the mean return each gives.
3. The whole ``kelab eval CartPole-Pixels-v0 --checkpoint ... --episodes 8 --num-envs 8``
   command in a new process: its CPU (user + system, children's) and wall s.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import kelab as ke
import kelab.train.numpy_actor as numpy_actor
from kelab.tasks import TASK_IDS
from kelab.tasks.registry import task_class
from kelab.train.shipped import shipped_policy

ONE_THREAD = numpy_actor.SPLIT_FROM


def _mode(threads: bool) -> None:
    """The actor as it was (the BLAS's own threads) or as it is (one thread)."""
    numpy_actor.SPLIT_FROM = 1 << 62 if threads else ONE_THREAD


def _timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


def conv_checkpoint(folder: Path) -> str:
    """A convolutional checkpoint of CartPole-Pixels-v0 (1 iteration of kelab train)."""
    run = folder / "pixels"
    subprocess.run(
        [sys.executable, "-m", "kelab", "train", "CartPole-Pixels-v0", "--iterations", "1",
         "--num-envs", "8", "--run-dir", str(run)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return f"{run}:latest"


def act_table(spec: str, rounds: int) -> None:
    player = ke.RLPlayer(spec, render_mode=None)
    shape = player.policy.image
    print("| images | threads: CPU ms | wall ms | one thread: CPU ms | wall ms |")
    print("|---:|---:|---:|---:|---:|")
    for n in (1, 4, 8, 16, 32):
        obs = np.random.default_rng(0).integers(0, 255, (n, *shape), dtype=np.uint8)
        best = {True: [np.inf, np.inf], False: [np.inf, np.inf]}
        for _ in range(rounds):
            for threads in (True, False):
                _mode(threads)
                player.act(obs)
                cpu, wall, _ = _timed(lambda obs=obs: [player.act(obs) for _ in range(10)])
                best[threads] = [min(best[threads][0], cpu / 10), min(best[threads][1], wall / 10)]
        t, o = best[True], best[False]
        ms = " | ".join(f"{1e3 * v:.2f}" for v in (*t, *o))
        print(f"| {n} | {ms} |")
    _mode(False)


def eval_table(rounds: int) -> None:
    print("| task (100 copies) | threads: CPU s | wall s | return | one thread: CPU s | wall s "
          "| return |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for env_id, target in TASK_IDS.items():
        spec = shipped_policy(target)
        if spec is None:
            continue
        player = ke.RLPlayer(spec, render_mode=None)
        best = {True: [np.inf, np.inf, None], False: [np.inf, np.inf, None]}
        for _ in range(rounds):
            for threads in (True, False):
                _mode(threads)
                env = ke.LearningEnv(task_class(target)(), num_envs=100, seed=1000)
                cpu, wall, report = _timed(
                    lambda env=env, policy=player.policy: ke.evaluate(
                        env, policy, episodes=100, seed=1000
                    )
                )
                env.close()
                b = best[threads]
                best[threads] = [min(b[0], cpu), min(b[1], wall), report.return_mean]
        t, o = best[True], best[False]
        print(f"| {env_id} | {t[0]:.2f} | {t[1]:.2f} | {t[2]:.4f} | {o[0]:.2f} | {o[1]:.2f} | "
              f"{o[2]:.4f} |")  # fmt: skip
    _mode(False)


_EVAL = """
import sys
import kelab.train.numpy_actor as numpy_actor
from kelab.cli import main
if sys.argv[1] == "threads":
    numpy_actor.SPLIT_FROM = 1 << 62
sys.exit(main(["eval", "CartPole-Pixels-v0", "--checkpoint", sys.argv[2], "--episodes", "8",
               "--num-envs", "8"]))
"""


def command_table(spec: str, rounds: int) -> None:
    print("| `kelab eval` (8 episodes, 8 copies) | CPU s (best) | wall s (best) |")
    print("|---|---:|---:|")
    best = {"threads": [np.inf, np.inf], "one": [np.inf, np.inf]}
    for _ in range(rounds):
        for mode in best:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            w = time.perf_counter()
            subprocess.run([sys.executable, "-c", _EVAL, mode, spec], check=True,
                           capture_output=True, timeout=600)  # fmt: skip
            wall = time.perf_counter() - w
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            best[mode] = [min(best[mode][0], cpu), min(best[mode][1], wall)]
    for mode, (cpu, wall) in best.items():
        print(f"| {'the BLAS threads' if mode == 'threads' else 'one thread'} | {cpu:.2f} | "
              f"{wall:.2f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load:.1f}, "
          f"{os.cpu_count()} cores, numpy {np.__version__}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        spec = conv_checkpoint(Path(folder))
        act_table(spec, args.rounds)
        print()
        command_table(spec, args.rounds)
    print()
    eval_table(max(1, args.rounds // 2))
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
