"""Time to kelab/CartPole-Pixels-v0's target: ``kelab train`` against SB3's CnnPolicy PPO.

Rows, one per seed:

1. KELab: the whole ``python -m kelab train CartPole-Pixels-v0 --seed S`` command with the
   task's default config (a convolutional policy; it stops at its first 100-episode
   evaluation with >= 95 % successes and says so), in a child process: wall seconds, and
   CPU seconds of the command and its helpers (the evaluation process included), from
   ``getrusage(RUSAGE_CHILDREN)``.
2. Anchor: Stable-Baselines3's PPO with ``CnnPolicy`` (its default NatureCNN) and the
   hyperparameters of its CartPole anchor in ``benchmarks/train_speed.py`` (RL Zoo's
   CartPole-v1 ones: 8 envs, n_steps 32, batch 256, 20 epochs, gamma 0.98, lambda 0.8,
   linear learning rate 1e-3 and clip 0.2; one torch thread) on
   ``gym.make("kelab/CartPole-Pixels-v0")`` copies (``make_vec_env``, SB3 transposes the
   images itself), judged the same way: every ``--sb3-check`` env steps its deterministic
   policy is judged by the same ``TargetCheck`` as KELab's evaluation process (100
   episodes in 100 packed copies, seed 1000, stopping once the target is out of reach;
   counted in the time), until >= 95 % succeed or ``--sb3-budget``
   CPU seconds are spent. It runs in this process; its CPU time is this process's.

The machine may be shared: the load average is printed before and after each row, and
CPU seconds are the comparable column.

Usage: python benchmarks/train_pixels.py [--seeds 42 0 1 2] [--iterations N] [--skip-sb3]
[--skip-kelab] [--sb3-budget 1800]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

TARGET = 0.95
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""This tree: the child imports it first, from a neutral folder (its run dir)."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def kelab_row(seed: int, iterations: int | None) -> dict:
    """The whole ``kelab train`` command for one seed (at most ``iterations``, if given)."""
    out = tempfile.mkdtemp(prefix=f"kelab_pixels_{seed}_")
    cmd = [sys.executable, "-m", "kelab", "train", "CartPole-Pixels-v0", "--seed", str(seed),
           "--run-dir", out]  # fmt: skip
    cmd += ["--iterations", str(iterations)] if iterations else []
    load = os.getloadavg()[0]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    lines = done.stdout.replace("\r", "\n").splitlines()
    summary = [line for line in lines if line.startswith(("done:", "target met", "last eval"))]
    return {
        "seed": seed,
        "wall": wall,
        "cpu": cpu,
        "load": (load, os.getloadavg()[0]),
        "summary": f"run dir {out}: " + " / ".join(summary) or done.stderr.strip()[-300:],
        "ok": done.returncode == 0 and any("target met" in line for line in lines),
    }


def sb3_row(seed: int, budget_cpu: float, check_every: int) -> dict:
    """SB3 PPO CnnPolicy until its deterministic policy meets the target (or the budget)."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger

    from kelab.tasks.cartpole_pixels import CartPolePixelsTask
    from kelab.train.target import TargetCheck

    torch.set_num_threads(1)
    check = TargetCheck(CartPolePixelsTask, TARGET, episodes=100, pre_episodes=0, seed=1000,
                        layout="packed")  # fmt: skip

    class Judge(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.last, self.rate, self.checks = 0, 0.0, 0
            self.cpu0 = time.process_time()

        def _on_step(self) -> bool:
            if time.process_time() - self.cpu0 > budget_cpu:
                return False
            if self.num_timesteps - self.last < check_every:
                return True
            self.last = self.num_timesteps
            self.checks += 1

            def policy(obs: np.ndarray) -> np.ndarray:
                images = np.ascontiguousarray(obs.transpose(0, 3, 1, 2))  # SB3's channels first
                return self.model.predict(images, deterministic=True)[0]

            verdict = check(policy)
            self.rate = verdict.success_rate  # measured when it passes, else a bound
            return not verdict.passed

    load = os.getloadavg()[0]
    cpu0, t0 = time.process_time(), time.perf_counter()
    venv = make_vec_env(
        lambda: gym.make("kelab/CartPole-Pixels-v0", render_mode=None), n_envs=8, seed=seed
    )

    def linear(v: float):  # noqa: ANN202 - SB3's schedule: progress_remaining -> value
        return lambda progress: progress * v

    model = PPO(
        "CnnPolicy", venv, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
        n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
        seed=seed, device="cpu", verbose=0,
    )  # fmt: skip
    model.set_logger(Logger(folder=None, output_formats=[]))
    judge = Judge()
    model.learn(10**9, callback=judge)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    check.close()
    return {
        "seed": seed,
        "wall": wall,
        "cpu": cpu,
        "load": (load, os.getloadavg()[0]),
        "summary": f"{model.num_timesteps:,} env steps, {judge.checks} checks, last "
        f"{100 * judge.rate:.0f} % success (at most, unless it passed)",
        "ok": judge.rate >= TARGET,
    }


def main() -> None:
    """Print one markdown row per trainer and seed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 0, 1, 2])
    parser.add_argument("--skip-sb3", action="store_true")
    parser.add_argument("--skip-kelab", action="store_true")
    parser.add_argument(
        "--iterations", type=int, default=None, help="cap kelab train's iterations (a budget)"
    )
    parser.add_argument("--sb3-budget", type=float, default=1800.0, help="CPU seconds per seed")
    parser.add_argument("--sb3-check", type=int, default=16384, help="env steps between checks")
    args = parser.parse_args()
    print("| trainer | seed | wall s | CPU s | load before/after | reached 95 % | result |")
    print("|---|---:|---:|---:|---|---|---|")
    rows = []
    if not args.skip_kelab:
        rows += [("kelab train", kelab_row, (s, args.iterations)) for s in args.seeds]
    if not args.skip_sb3:
        rows += [("SB3 PPO CnnPolicy", sb3_row, (s, args.sb3_budget, args.sb3_check))
                 for s in args.seeds]  # fmt: skip
    for name, run, params in rows:
        r = run(*params)
        print(f"| {name} | {r['seed']} | {r['wall']:.0f} | {r['cpu']:.0f} | "
              f"{r['load'][0]:.1f}/{r['load'][1]:.1f} | {'yes' if r['ok'] else 'no'} | "
              f"{r['summary']} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
