"""Training speed: KELab's RLTrainer on kelab/CartPole-v0 against Stable-Baselines3 PPO.

Rows, in one run:

1. KELab: ``ke.RLTrainer`` with CartPole's tuned ``training_config`` until the
   deterministic policy succeeds in >= 95 of 100 evaluation episodes (judged every 2
   iterations in a second process, ``eval_process``; the verdict on iteration k is read
   at k + 2; the time the trainer waits for verdicts counts). The CPU column is the
   training process's; the evaluation process's CPU time is printed in the result.
2. Baseline: SB3 PPO with RL Zoo's CartPole-v1 hyperparameters (8 envs, n_steps 32,
   batch 256, 20 epochs, gamma 0.98, lambda 0.8, linear lr 1e-3 and clip 0.2) on
   Gymnasium ``CartPole-v1`` until the deterministic mean return over 10 episodes
   (checked every 4096 steps, also counted) reaches 475.
3. Trainer overhead: env steps/s of the rollout (policy + env) and of whole iterations
   (with the PPO update; also with ``overlap_rollout``, the update in a thread and in
   the learner process) against the bare LearningEnv
   stepping random actions (the config's copies), interleaved rounds, best of each;
   ``--overhead-humanoid`` adds Humanoid-v0's rows.

Both trainers use one torch thread; times exclude imports (reported separately). Wall
and CPU seconds are both printed: on a shared machine wall time is inflated by the other
processes, CPU time much less.

    python benchmarks/train_speed.py [--seed 0] [--skip-sb3] [--set FIELD=VALUE ...]

``--set`` changes a field of CartPole-v0's config (a JSON value) for its solve and its
overhead rows, e.g. ``--set overlap_rollout=true --set num_learning_epochs=2``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import resource
import tempfile
import time
from collections.abc import Iterator

t_import = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import kelab as ke  # noqa: E402
import kelab.train._fork as _fork  # noqa: E402
from kelab.tasks.cartpole import CartPoleTask  # noqa: E402
from kelab.train.checkpoint import load_checkpoint  # noqa: E402
from kelab.train.config import TrainConfig, training_config_of  # noqa: E402
from kelab.train.policy import CheckpointPolicy  # noqa: E402
from kelab.train.trainer import RLTrainer  # noqa: E402

IMPORT_S = time.perf_counter() - t_import


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def kelab_solve(seed: int, config: TrainConfig, max_iterations: int = 400) -> dict:
    """``kelab train CartPole-v0`` as a library call: the config's own stop (eval_every)."""
    torch.set_num_threads(1)
    gc.collect()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0, c0 = _clock()
    env = ke.LearningEnv(CartPoleTask(), num_envs=config.num_envs, seed=seed)
    trainer = RLTrainer(
        env,
        seed=seed,
        config=config,
        run_dir=tempfile.mkdtemp(prefix=f"kelab_bench_{seed}_"),
        log=False,
    )
    stats = trainer.train(max_iterations)
    w1, c1 = _clock()
    eval_env = ke.LearningEnv(CartPoleTask(), num_envs=100, seed=1000)
    rate = None
    if stats["stopped_at_target"]:  # the full report on `best` (the policy that passed)
        best = CheckpointPolicy(load_checkpoint(trainer.checkpoints["best"]))
        rate = ke.evaluate(eval_env, best, episodes=100, seed=1000).success_rate
    trainer.close()  # joins the evaluation process: its CPU time is counted below
    env.close()
    eval_env.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    eval_cpu = (children.ru_utime + children.ru_stime) - (children0.ru_utime + children0.ru_stime)
    where = f", {eval_cpu:.1f} CPU s in the evaluation process" if eval_cpu > 0 else ""
    return {
        "wall": w1 - w0,
        "cpu": c1 - c0,
        "env_steps": trainer.env_steps,
        "iterations": trainer.iteration,
        "result": (f"{rate:.2f} success" if rate is not None else "not solved")
        + f" (100 eps; {trainer.evaluations} checks, {trainer.evaluation_time_s:.1f} s waited"
        + f"{where})",
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


@contextlib.contextmanager
def _update_in_a_thread(on: bool) -> Iterator[None]:
    """As where the trainer cannot fork (a Ray driver): the overlapped update in a thread."""
    cannot = _fork._ray_driver
    if on:
        _fork._ray_driver = lambda: True
    try:
        yield
    finally:
        _fork._ray_driver = cannot


def overhead(
    task_type: type = CartPoleTask,
    rounds: int = 3,
    iterations: int = 8,
    config: TrainConfig | None = None,
) -> dict:
    """Env steps/s: the bare env (random actions) against the trainer's rollout and iterations.

    The trainer runs the task's own ``training_config`` (no evaluations), without
    ``overlap_rollout`` and with it (the update in a thread, as where the trainer cannot
    fork, and in the learner process); every loop gets ``rounds`` interleaved rounds of
    ``iterations`` iterations, best of each. Whole iterations are timed from the end of a
    call's first iteration to the end of its second-to-last (steady state: not a call's
    first rollout, last update or final save and curve).
    """
    torch.set_num_threads(1)
    config = (config or training_config_of(task_type)).replace(stop_at_target=False, eval_every=0)
    n, steps = config.num_envs, config.num_steps_per_env * iterations
    bare_env = ke.LearningEnv(task_type(), num_envs=n, seed=0)
    bare_env.reset(seed=0)
    act_dim = bare_env.single_action_space.shape[0]
    actions = np.random.default_rng(0).uniform(-1, 1, (64, n, act_dim)).astype(np.float32)
    trainers = {}
    for mode in ("plain", "thread", "process"):
        env = ke.LearningEnv(task_type(), num_envs=n, seed=0)
        trainers[mode] = RLTrainer(
            env, seed=0, config=config.replace(overlap_rollout=mode != "plain"),
            run_dir=tempfile.mkdtemp(prefix=f"kelab_bench_overhead_{mode}_"), log=False,
        )  # fmt: skip
        with _update_in_a_thread(mode == "thread"):
            trainers[mode].train(1)  # warm up
    out = {"bare": 0.0, "collect": 0.0, "plain": 0.0, "thread": 0.0, "process": 0.0}
    for _ in range(rounds):
        gc.collect()
        t = time.perf_counter()
        for i in range(steps):
            bare_env.step(actions[i % 64])
        out["bare"] = max(out["bare"], n * steps / (time.perf_counter() - t))
        for mode, trainer in trainers.items():
            gc.collect()
            marks: list[tuple[float, int]] = []

            def mark(row: dict, marks: list = marks) -> None:
                marks.append((time.perf_counter(), row["env_steps"]))

            with _update_in_a_thread(mode == "thread"):
                stats = trainer.train(iterations, callback=mark)
            # steady state: from the first iteration's end to the second-to-last's (a
            # call's start and end are not steady iterations: its first rollout, its last
            # update alone with overlap_rollout, its final checkpoint and curve)
            rate = (marks[-2][1] - marks[0][1]) / (marks[-2][0] - marks[0][0])
            out[mode] = max(out[mode], rate)
            if mode == "plain":
                out["collect"] = max(out["collect"], stats["collect_steps_per_s"])
    for trainer in trainers.values():
        trainer.close()
        trainer.env.close()
    bare_env.close()
    out["copies"] = n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-sb3", action="store_true")
    parser.add_argument(
        "--overhead-humanoid", action="store_true", help="also measure Humanoid-v0's overhead"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a field of CartPole-v0's config (a JSON value), e.g. num_learning_epochs=2",
    )
    args = parser.parse_args()
    cartpole = training_config_of(CartPoleTask)
    for change in args.set:
        field, _, value = change.partition("=")
        cartpole = cartpole.replace(**{field: json.loads(value)})
    rows = [("KELab RLTrainer, kelab/CartPole-v0", kelab_solve(args.seed, cartpole))]
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
    tasks = [CartPoleTask]
    if args.overhead_humanoid:
        from kelab.tasks.humanoid import HumanoidTask

        tasks.append(HumanoidTask)
    print("\n| task (copies) | loop | env steps/s | vs bare env |")
    print("| --- | --- | ---: | ---: |")
    for task_type in tasks:
        o = overhead(task_type, config=cartpole if task_type is CartPoleTask else None)
        name = f"{task_type.__name__} ({o['copies']})"
        rows = [
            ("bare LearningEnv, random actions", o["bare"]),
            ("RLTrainer rollout (policy + env)", o["collect"]),
            ("RLTrainer whole iterations (with PPO update)", o["plain"]),
            ("whole iterations, overlap_rollout, update in a thread", o["thread"]),
            ("whole iterations, overlap_rollout, update in a process", o["process"]),
        ]
        for label, rate in rows:
            print(f"| {name} | {label} | {rate:,.0f} | {rate / o['bare']:.2f}x |")


if __name__ == "__main__":
    main()
