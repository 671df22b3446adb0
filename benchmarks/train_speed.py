"""Training speed: KELab's RLTrainer on kelab/CartPole-v0 against Stable-Baselines3 PPO.

Rows, in one run:

1. KELab: ``ke.RLTrainer`` with CartPole's tuned ``training_config`` until the
   deterministic policy succeeds in >= 95 of 100 evaluation episodes (checked after each
   iteration once the training success rate, with exploration noise, passes ``GATE``;
   a check stops as soon as more than 5 episodes failed; the checks count in the time).
2. Baseline: SB3 PPO with RL Zoo's CartPole-v1 hyperparameters (8 envs, n_steps 32,
   batch 256, 20 epochs, gamma 0.98, lambda 0.8, linear lr 1e-3 and clip 0.2) on
   Gymnasium ``CartPole-v1`` until the deterministic mean return over 10 episodes
   (checked every 4096 steps, also counted) reaches 475.
3. Trainer overhead: env steps/s of the rollout (policy + env) and of whole iterations
   (with the PPO update) against the bare LearningEnv stepping random actions (the
   config's copies), interleaved rounds, best of each.

Both trainers use one torch thread; times exclude imports (reported separately). Wall
and CPU seconds are both printed: on a shared machine wall time is inflated by the other
processes, CPU time much less.

    python benchmarks/train_speed.py [--seed 0] [--skip-sb3]
"""

from __future__ import annotations

import argparse
import gc
import time

t_import = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import kelab as ke  # noqa: E402
from kelab.tasks.cartpole import CartPoleTask  # noqa: E402
from kelab.train.trainer import RLTrainer  # noqa: E402

IMPORT_S = time.perf_counter() - t_import


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def kelab_solve(seed: int, max_iterations: int = 400) -> dict:
    """``kelab train CartPole-v0`` as a library call: the config's own stop (eval_every)."""
    torch.set_num_threads(1)
    config = CartPoleTask.training_config
    gc.collect()
    w0, c0 = _clock()
    env = ke.LearningEnv(CartPoleTask(), num_envs=config.num_envs, seed=seed)
    trainer = RLTrainer(
        env, seed=seed, config=config, run_dir=f"/tmp/kelab_bench_{seed}", log=False
    )
    stats = trainer.train(max_iterations)
    w1, c1 = _clock()
    eval_env = ke.LearningEnv(CartPoleTask(), num_envs=100, seed=1000)
    rate = None
    if stats["stopped_at_target"]:  # the full report, outside the timed part
        rate = ke.evaluate(eval_env, trainer.policy, episodes=100, seed=1000).success_rate
    trainer.close()
    env.close()
    eval_env.close()
    return {
        "wall": w1 - w0,
        "cpu": c1 - c0,
        "env_steps": trainer.env_steps,
        "iterations": trainer.iteration,
        "result": (f"{rate:.2f} success" if rate is not None else "not solved")
        + f" (100 eps; {trainer.evaluations} checks, {trainer.evaluation_time_s:.1f} s)",
        "solved": rate is not None and rate >= 0.95,
    }


def sb3_solve(seed: int, max_steps: int = 300_000) -> dict:
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)

    def linear(v: float):
        return lambda progress: progress * v

    class Solved(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.last_check = 0
            self.score = 0.0
            self.evals = 0
            self.eval_env = gym.make("CartPole-v1")

        def _on_step(self) -> bool:
            if self.num_timesteps - self.last_check < 4096:
                return True
            self.last_check = self.num_timesteps
            self.evals += 1
            self.score, _ = evaluate_policy(self.model, self.eval_env, 10, deterministic=True)
            return self.score < 475

    gc.collect()
    w0, c0 = _clock()
    venv = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO(
        "MlpPolicy", venv, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
        n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
        seed=seed, device="cpu", verbose=0,
    )  # fmt: skip
    cb = Solved()
    model.learn(max_steps, callback=cb)
    w1, c1 = _clock()
    return {
        "wall": w1 - w0,
        "cpu": c1 - c0,
        "env_steps": model.num_timesteps,
        "iterations": model._n_updates // 20,
        "result": f"{cb.score:.0f} eval return (10 eps, {cb.evals} checks)",
        "solved": cb.score >= 475,
    }


def overhead(rounds: int = 3) -> dict:
    torch.set_num_threads(1)
    config = CartPoleTask.training_config.replace(stop_at_target=False, eval_every=0)
    n = config.num_envs
    bare_env = ke.LearningEnv(CartPoleTask(), num_envs=n, seed=0)
    bare_env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (64, n, 1)).astype(np.float32)
    env = ke.LearningEnv(CartPoleTask(), num_envs=n, seed=0)
    trainer = RLTrainer(env, seed=0, config=config, run_dir="/tmp/kelab_bench_overhead", log=False)
    trainer.train(1)  # warm up
    bare, collect, whole = 0.0, 0.0, 0.0
    for _ in range(rounds):
        gc.collect()
        t = time.perf_counter()
        for i in range(config.num_steps_per_env * 4):
            bare_env.step(actions[i % 64])
        bare = max(bare, n * config.num_steps_per_env * 4 / (time.perf_counter() - t))
        gc.collect()
        stats = trainer.train(4)
        collect = max(collect, stats["collect_steps_per_s"])
        whole = max(whole, stats["env_steps_per_s"])
    trainer.close()
    env.close()
    bare_env.close()
    return {"bare": bare, "collect": collect, "whole": whole}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-sb3", action="store_true")
    args = parser.parse_args()
    rows = [("KELab RLTrainer, kelab/CartPole-v0", kelab_solve(args.seed))]
    if not args.skip_sb3:
        rows.append(("SB3 PPO (RL Zoo), gymnasium CartPole-v1", sb3_solve(args.seed)))
    print(f"imports (torch, rsl-rl-lib, kelab): {IMPORT_S:.1f} s wall, not counted\n")
    print("| trainer | solved | result | env steps | wall s | CPU s |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for name, r in rows:
        print(
            f"| {name} | {'yes' if r['solved'] else 'NO'} | {r['result']} | "
            f"{r['env_steps']:,} | {r['wall']:.1f} | {r['cpu']:.1f} |"
        )
    if len(rows) == 2:
        k, s = rows[0][1], rows[1][1]
        print(
            f"\nspeed-up (SB3 / KELab): wall {s['wall'] / k['wall']:.2f}x, "
            f"CPU {s['cpu'] / k['cpu']:.2f}x (target: >= 3x, KELab <= 15 s wall)"
        )
    o = overhead()
    n = CartPoleTask.training_config.num_envs
    print(f"\n| loop ({n} copies) | env steps/s | vs bare env |")
    print("| --- | ---: | ---: |")
    print(f"| bare LearningEnv, random actions | {o['bare']:,.0f} | 1.00x |")
    print(
        f"| RLTrainer rollout (policy + env) | {o['collect']:,.0f} | "
        f"{o['collect'] / o['bare']:.2f}x |"
    )
    print(f"| RLTrainer whole iterations (with PPO update) | {o['whole']:,.0f} | "
          f"{o['whole'] / o['bare']:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
