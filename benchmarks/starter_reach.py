"""What a goal-and-hold task needs to learn: ``kelab new``'s starter, varied one knob at a time.

    python benchmarks/starter_reach.py                 # every variant, seeds 0 and 1
    python benchmarks/starter_reach.py sparse no-rate  # some of them
    python benchmarks/starter_reach.py --seeds 0 1 2 --iterations 90

The task is the one ``kelab new`` writes (a two-link arm reaching for a goal and holding
it for the episode's last 0.3 s; made in a temp folder and imported from there). Each
variant changes one thing of it or of its training config, then trains with
``ke.RLTrainer`` as ``kelab train`` does (its config's layout, its evaluations of the
deterministic policy every 3 iterations over 50 episodes, stopping at the first that
meets 90 %), run in this process so the CPU time counts them, up to ``--iterations``.
Prints one markdown row per variant and seed: the iteration the target was met at (or
``-``), env steps, CPU seconds, the last evaluation's success rate, the action noise
(the policy's mean std) at the end, and what the trainer said (``trainer.findings``).
docs/training.md, "When training does not reach the target", quotes the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import tempfile
import time
import warnings

import numpy as np

import kelab as ke
from kelab.cli.new import create_project
from kelab.train.config import training_config_of
from kelab.train.diagnose import TrainingWarning
from kelab.train.trainer import RLTrainer


def variants(base: type) -> dict[str, tuple[str, type, dict]]:
    """name -> (what it changes, task class, TrainConfig changes)."""

    def task(name: str, **attrs: object) -> type:
        return type(name, (base,), dict(attrs))

    class Sparse(base):  # type: ignore[misc, valid-type]
        def get_rewards(self) -> np.ndarray:
            self.last_distance[:] = self.distance
            return self.dwell.done.astype(np.float64)  # 1 a step while held, else 0

    class DistanceOnly(base):  # type: ignore[misc, valid-type]
        def get_rewards(self) -> np.ndarray:
            self.last_distance[:] = self.distance
            return -self.distance

    module = sys.modules[base.__module__]

    class Torque(base):  # type: ignore[misc, valid-type]
        """The same arm driven by torques: action * (6, 3) N·m, no PD loop."""

        def build(self, scene: ke.SceneBuilder) -> None:
            arm = module.two_link_arm()
            joints = tuple(
                dataclasses.replace(j, actuator=ke.EffortActuator(limit=j.actuator.limit))
                for j in arm.joints
            )
            scene.gravity = (0.0, 0.0)
            self.robot = ke.Robot(dataclasses.replace(arm, joints=joints))
            scene.add(self.robot, at="/World/Arm")

        def apply_actions(self, actions: np.ndarray) -> None:
            first = (self.episode_length_buf == 0)[:, None]
            self.previous_actions[:] = np.where(first, actions, self.actions)
            self.actions[:] = actions
            torques = actions * np.array([6.0, 3.0], dtype=np.float32)
            self.robot.set_joint_effort_target(torques, joint_ids=self.joints)

    return {
        "starter": ("the starter as written", base, {}),
        "torque": ("torques (6, 3 N·m) instead of PD targets", Torque, {}),
        "sparse": ("reward 1 per step while held, nothing else", Sparse, {}),
        "distance": ("reward -distance per step, nothing else", DistanceOnly, {}),
        "no-precision": ("without the peak at the goal", task("P", precision_gain=0.0), {}),
        "no-distance": ("without the steady pull", task("D", distance_cost=0.0), {}),
        "no-hold": ("without the hold term", task("H", hold_gain=0.0), {}),
        "no-rate": ("without the action-rate cost", task("R", action_rate_cost=0.0), {}),
        "noise-0.2": ("init_noise_std 0.2 (0.6)", base, {"init_noise_std": 0.2}),
        "noise-1.0": ("init_noise_std 1.0 (0.6)", base, {"init_noise_std": 1.0}),
        "entropy-0.01": ("entropy_coef 0.01 (0.002)", base, {"entropy_coef": 0.01}),
        "copies-64": ("64 copies (256)", base, {"num_envs": 64}),
        "copies-1024": ("1024 copies (256)", base, {"num_envs": 1024}),
    }


def run(task: type, changes: dict, seed: int, iterations: int, folder: str) -> dict:
    """Train one variant; return its row's numbers."""
    config = training_config_of(task).replace(eval_process=False, **changes)
    env = ke.LearningEnv(task(), num_envs=config.num_envs, seed=seed, layout=config.layout)
    cpu = time.process_time()
    evals: list[str] = []  # as shown: "at most" where the check stopped early
    stds: list[float] = []

    def watch(row: dict) -> None:
        stds.append(row["action_std"])
        if row["eval_success_rate"] is not None:
            bound = "at most " if row["eval_stopped_early"] else ""
            evals.append(f"{bound}{row['eval_success_rate']:.0%}")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrainingWarning)  # trainer.findings has them
        with RLTrainer(env, seed=seed, config=config, run_dir=folder, log=False) as trainer:
            stats = trainer.train(iterations, callback=watch)
    env.close()
    return {
        "reached": stats["target_reached_at"],
        "env_steps": stats["env_steps"],
        "cpu_s": time.process_time() - cpu,
        "eval": evals[-1] if evals else None,
        "std": stds[-1],
        "said": ", ".join(f"{f.kind} ({f.iteration})" for f in trainer.findings) or "-",
    }


def main() -> None:
    """Run the variants named (all by default) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="variants to run (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--iterations", type=int, default=60)
    args = parser.parse_args()
    home = tempfile.mkdtemp()
    create_project("reach_bench", home)
    sys.path.insert(0, f"{home}/reach_bench")
    base = importlib.import_module("reach_bench").ReachBenchTask
    table = variants(base)
    names = args.names or list(table)
    print(
        "| variant | seed | target met at | env steps | CPU s | last evaluation | noise "
        "| the trainer said (iteration) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        what, task, changes = table[name]
        for seed in args.seeds:
            r = run(task, changes, seed, args.iterations, tempfile.mkdtemp(dir=home))
            reached = "-" if r["reached"] is None else f"iteration {r['reached']}"
            evaluated = "-" if r["eval"] is None else r["eval"]
            print(
                f"| {name}: {what} | {seed} | {reached} | {r['env_steps']:,} | "
                f"{r['cpu_s']:.1f} | {evaluated} | {r['std']:.2f} | {r['said']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
