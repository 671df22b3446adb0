"""What the hand-written backward pass (``kelab.train.backprop``) buys on whole training runs.

Interleaved A/B in one process: A is the trainer as built (``ManualPass``: the policy
networks' forward and backward passes by hand), B the same update with the networks'
passes through ``torch.autograd`` (``AutogradPass``, what ``network_pass`` falls back
to); everything else (the loss head's gradient written out, fused Adam, the fast ELU)
is the same in both. The variants alternate A, B, A, B... so a load change on a shared
machine hits both alike; medians are reported.

Rows:

1. CartPole-v0 time to target: its tuned config (evaluations every 2 iterations in a
   second process, stop at the first passing one), ``--seeds`` seeds, ``--rounds``
   rounds each. B rounds differently, so its runs may stop at other iterations: env
   steps and iterations are printed beside the seconds.
2. Humanoid-v0 whole iterations: its tuned config (update beside the next rollout) for
   ``--iterations`` iterations, and the same without overlap (the update's cost shows
   in full); seconds per iteration.
3. The update alone: ``alg.update()`` on one Humanoid-v0 and one CartPole-v0 rollout,
   ``--updates`` times each, A and B alternating.

    python benchmarks/train_backprop.py [--seeds 3] [--rounds 2] [--iterations 8]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator

import torch

import kelab as ke
import kelab.train.ppo as ppo
from kelab.tasks.cartpole import CartPoleTask
from kelab.tasks.humanoid import HumanoidTask
from kelab.train.backprop import AutogradPass, network_pass
from kelab.train.config import TrainConfig, training_config_of
from kelab.train.trainer import RLTrainer

VARIANTS = {"A manual": network_pass, "B autograd": AutogradPass}


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """Run the PPO update with the variant's network passes."""
    saved = ppo.network_pass
    ppo.network_pass = VARIANTS[name]
    try:
        yield
    finally:
        ppo.network_pass = saved


def train(task_type: type, config: TrainConfig, seed: int, iterations: int) -> dict:
    """One training run; its wall and CPU seconds, env steps and iterations."""
    env = ke.LearningEnv(task_type(), num_envs=config.num_envs, seed=seed, layout=config.layout)
    with tempfile.TemporaryDirectory() as tmp:
        start, cpu = time.perf_counter(), time.process_time()
        with RLTrainer(
            env, seed=seed, run_dir=os.path.join(tmp, "run"), config=config, log=False
        ) as tr:
            stats = tr.train(iterations)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    env.close()
    return {
        "wall": wall,
        "cpu": cpu,
        "steps": stats["env_steps"],
        "iterations": stats["iterations"],
        "met": stats["stopped_at_target"],
    }


def update_seconds(task_type: type, updates: int) -> dict[str, list[float]]:
    """Seconds of ``alg.update()`` on one rollout, A and B alternating."""
    config = training_config_of(task_type).replace(overlap_rollout=False, eval_every=0)
    env = ke.LearningEnv(task_type(), num_envs=config.num_envs, seed=0, layout=config.layout)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        with RLTrainer(
            env, seed=0, run_dir=os.path.join(tmp, "run"), config=config, log=False
        ) as tr:
            tr.train(1)  # warm up; then a rollout to learn from, kept aside
            rollouts = tr._rollouts  # noqa: SLF001 - a benchmark reaches in
            alg = tr.alg
            rollouts.collect(alg)
            saved = {k: v.clone() for k, v in alg.training_state()[0].items()}
            kept = [t.clone() for t in _storage_tensors(alg.storage)]
            lr = alg.learning_rate
            for _ in range(updates):
                for name in VARIANTS:
                    _restore(alg, saved, kept, lr)
                    with variant(name):
                        t0 = time.perf_counter()
                        alg.update()
                        times[name].append(time.perf_counter() - t0)
    env.close()
    return times


def _storage_tensors(storage) -> list[torch.Tensor]:
    obs = storage.observations
    tensors = [obs[k] for k in obs.keys()]
    for name in (
        "actions",
        "rewards",
        "dones",
        "values",
        "returns",
        "advantages",
        "actions_log_prob",
    ):
        tensors.append(getattr(storage, name))
    return tensors + list(storage.distribution_params)


def _restore(alg, saved, kept, lr) -> None:
    """Put the networks, the optimizer and the rollout back as they were."""
    state = alg.training_state()[0]
    with torch.no_grad():
        for key, value in saved.items():
            state[key].copy_(value)
    with torch.inference_mode():  # the rollout's tensors are inference tensors
        for dst, src in zip(_storage_tensors(alg.storage), kept, strict=True):
            dst.copy_(src)
    alg.storage.step = alg.storage.num_transitions_per_env
    alg.learning_rate = lr
    for group in alg.optimizer.param_groups:
        group["lr"] = alg.learning_rate


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--updates", type=int, default=5)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")

    cols = "seed | variant | met | iterations | env steps | wall s | CPU s"
    print(f"\n| CartPole-v0 to target | {cols} |")
    print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |")
    cartpole = training_config_of(CartPoleTask)
    walls: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpus: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for rnd in range(args.rounds):
        for seed in range(args.seeds):
            for name in VARIANTS if rnd % 2 == 0 else reversed(VARIANTS):
                with variant(name):
                    r = train(CartPoleTask, cartpole, seed, 400)
                walls[name].append(r["wall"])
                cpus[name].append(r["cpu"])
                cells = (rnd, seed, name, r["met"], r["iterations"], f"{r['steps']:,}")
                print("| round {} | {} | {} | {} | {} | {} ".format(*cells), end="")
                print(f"| {r['wall']:.2f} | {r['cpu']:.2f} |", flush=True)
    for name in VARIANTS:
        print(f"| median | | {name} | | | | {median(walls[name]):.2f} | {median(cpus[name]):.2f} |")

    print("\n| Humanoid-v0 whole iterations | variant | s / iteration (wall) | CPU s / iteration |")
    print("| --- | --- | ---: | ---: |")
    humanoid = training_config_of(HumanoidTask).replace(stop_at_target=False)
    for label, config in (("overlap (its config)", humanoid),
                          ("no overlap", humanoid.replace(overlap_rollout=False))):  # fmt: skip
        per: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
        for rnd in range(args.rounds + 1):
            for name in VARIANTS if rnd % 2 == 0 else reversed(VARIANTS):
                with variant(name):
                    r = train(HumanoidTask, config, 1, args.iterations)
                per[name].append((r["wall"] / r["iterations"], r["cpu"] / r["iterations"]))
        for name in VARIANTS:
            w = median([p[0] for p in per[name]])
            c = median([p[1] for p in per[name]])
            runs = ", ".join(f"{p[0]:.3f}" for p in per[name])
            print(f"| {label} | {name} | {w:.3f} ({runs}) | {c:.3f} |", flush=True)

    print("\n| the update alone | variant | median s | all |")
    print("| --- | --- | ---: | --- |")
    for task_type in (HumanoidTask, CartPoleTask):
        times = update_seconds(task_type, args.updates)
        for name in VARIANTS:
            runs = ", ".join(f"{t:.3f}" for t in times[name])
            print(f"| {task_type.__name__} | {name} | {median(times[name]):.4f} | {runs} |")
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
